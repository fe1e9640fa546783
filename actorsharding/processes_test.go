package actorsharding_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/testkit"
)

// The router across processes: each node in a process of its own, so that
// the test runs under the race detector too (one proto.actor remote per
// process), which then watches the router on the senders' goroutines of
// every node while shards move and entities passivate.
const (
	// crossEntities entities in crossShards shards; senders pick among
	// the active ones (see crossActive).
	crossEntities = 240
	crossShards   = 24
	// Entity i is active while (i + step) % crossPhases < crossActivePhases,
	// a step being crossStep of wall-clock time (the processes share the
	// clock): a third of the entities, spread over every shard, takes
	// messages at a time, and each is idle for well over its passivation
	// idle timeout between its active steps, so routes open and close
	// while the senders send.
	crossStep         = 300 * time.Millisecond
	crossPhases       = 6
	crossActivePhases = 2
	crossIdleTimeout  = 250 * time.Millisecond
	// crossReactivations entities come back after passivation before c
	// joins, and as many after a left.
	crossReactivations = 100
	// crossSenders goroutines send on each node; each sends crossRound
	// messages a round, then waits for the answers of its requests and
	// crossPause.
	crossSenders = 4
	crossRound   = 12
	crossPause   = 20 * time.Millisecond
	// crossSenderBase: sender indexes of a node start at its number times
	// this, so that they are unique across the processes.
	crossSenderBase = 16
	// crossRequestTimeout bounds a request; a slow machine under the race
	// detector is slow.
	crossRequestTimeout = 20 * time.Second
	// crossCallTimeout bounds a command to a node, a graceful leave
	// included.
	crossCallTimeout = 90 * time.Second
	// crossPoll is how often the parent asks the nodes how far they are.
	crossPoll = 250 * time.Millisecond
)

// crossReport is what a node reports at the end: what its senders sent
// and its entities received, for judgeLoad, and what shows that the
// router was busy.
type crossReport struct {
	// Sent: per sender index, per entity, the last n sent (see
	// loadSenderShift).
	Sent map[int64]map[string]int64
	// Received: per entity, the sequence numbers its incarnations on this
	// node received.
	Received map[string][]int64
	// Messages sent, requests answered and not answered in time.
	Messages, Answered, Unanswered int64
	// Activations of entities here; Entities: of how many entities.
	Activations, Entities int
	// The most entities taking messages directly, and the most shards
	// with a remote home, seen at once in the router's table.
	MaxDirect, MaxRemoteHomes int
}

// TestRouterAcrossProcesses: three nodes, each in its own process with
// Consul membership, send to many entities through their regions from
// several goroutines each (plain messages and ShardingEnvelopes, told and
// asked, through the region and through EntityRefs), while entities
// passivate, a third node joins (a rebalance moves shards to it) and the
// oldest node leaves gracefully. In the race pass the race detector of
// every process watches the router; a node that reports a race, or exits
// otherwise than cleanly, fails the test. The messages of the nodes that
// stay are neither lost nor delivered twice.
func TestRouterAcrossProcesses(t *testing.T) {
	if child := testkit.ThisProcess(); child != nil {
		crossNode(t, child)
		return
	}
	if testing.Short() {
		t.Skip("starts a Consul agent and three node processes")
	}
	backend := testkit.NewConsulBackend(t)
	start := func(name string) *testkit.Process {
		p := testkit.StartProcess(t, testkit.ProcessConfig{Name: name, Role: "node", Consul: backend})
		expectReply(t, p, p.Await(t, crossCallTimeout), "ready")
		return p
	}
	send := func(p *testkit.Process, number int) {
		expectReply(t, p, p.Call(t, fmt.Sprintf("send %d", number*crossSenderBase), crossCallTimeout), "sending")
	}
	// a starts first: the oldest, it runs the coordinator until it leaves.
	a := start("a")
	b := start("b")
	send(a, 1)
	send(b, 2)
	shardsOf := func(ps ...*testkit.Process) int {
		n := 0
		for _, p := range ps {
			n += crossStats(t, p)["shards"]
		}
		return n
	}
	reactivated := func(ps ...*testkit.Process) int {
		n := 0
		for _, p := range ps {
			n += crossStats(t, p)["reactivated"]
		}
		return n
	}
	// Every shard is allocated before c joins, so a shard of c's came in
	// a rebalance; and entities have passivated and come back meanwhile.
	testkit.WaitFor(t, 2*time.Minute, func() bool { return shardsOf(a, b) == crossShards && reactivated(a, b) >= crossReactivations },
		"a and b to host all %d shards (they host %d), and %d entities to come back after passivation (%d)", crossShards,
		testkit.Lazy(func() any { return shardsOf(a, b) }), crossReactivations, testkit.Lazy(func() any { return reactivated(a, b) }))
	c := start("c")
	send(c, 3)
	testkit.WaitFor(t, 2*time.Minute, func() bool { return shardsOf(c) >= crossShards/3-2 },
		"the rebalance to move shards to c (it hosts %d)", testkit.Lazy(func() any { return shardsOf(c) }))

	expectReply(t, a, a.Call(t, "leave", crossCallTimeout), "left")
	before := reactivated(b, c)
	testkit.WaitFor(t, 2*time.Minute, func() bool { return shardsOf(b, c) == crossShards && reactivated(b, c) >= before+crossReactivations },
		"b and c to host all %d shards (%d) and more entities to come back after passivation (%d more)", crossShards,
		testkit.Lazy(func() any { return shardsOf(b, c) }), testkit.Lazy(func() any { return reactivated(b, c) - before }))
	for _, p := range []*testkit.Process{b, c} {
		expectReply(t, p, p.Call(t, "stop", crossCallTimeout), "stopped")
	}

	// Every message of b's and c's senders arrives once; a's, sent while
	// it left, may be lost (it stops), but none twice. Order is shown, not
	// judged: each request is a sender of its own, so a goroutine's
	// messages are not one sender's.
	dir := t.TempDir()
	nodes := []*testkit.Process{a, b, c}
	names := []string{a.Name(), b.Name(), c.Name()}
	var reports []crossReport
	var stay, left loadVerdict
	deadline := time.Now().Add(time.Minute)
	for {
		reports = crossReports(t, dir, nodes)
		stay, left = judgeCross(reports, names, false), judgeCross(reports, names, true)
		if stay.lost == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(crossPoll)
	}
	if stay.lost+stay.duplicated+left.duplicated > 0 {
		t.Errorf("b's and c's senders: %s\na's senders: %s", stay, left)
	}
	var sum crossReport
	for i, r := range reports {
		t.Logf("%s: %d messages, %d answered, %d unanswered; %d activations of %d entities; up to %d direct routes and %d remote homes",
			nodes[i].Name(), r.Messages, r.Answered, r.Unanswered, r.Activations, r.Entities, r.MaxDirect, r.MaxRemoteHomes)
		// Each node's router sent to entities here and to homes elsewhere.
		if r.MaxDirect == 0 || r.MaxRemoteHomes == 0 {
			t.Errorf("%s: the router never had a direct route (%d) or a remote home (%d)", nodes[i].Name(), r.MaxDirect, r.MaxRemoteHomes)
		}
		sum.Messages += r.Messages
		sum.Answered += r.Answered
		sum.Activations += r.Activations
		sum.Entities += r.Entities
	}
	t.Logf("b's and c's senders: %s; a's: %s", stay, left)
	// Not vacuous: traffic flowed, and entities passivated and came back.
	if sum.Messages < 2000 || sum.Answered < 500 || sum.Activations < sum.Entities+2*crossReactivations {
		t.Errorf("too little happened: %d messages, %d answered, %d activations (of entities, counted once per node: %d)",
			sum.Messages, sum.Answered, sum.Activations, sum.Entities)
	}
	for _, p := range nodes {
		p.Exit(t)
	}
}

// expectReply fails the test unless reply begins with want.
func expectReply(t *testing.T, p *testkit.Process, reply, want string) {
	t.Helper()
	if !strings.HasPrefix(reply, want) {
		t.Fatalf("%s replied %q, want %s", p.Name(), reply, want)
	}
}

// crossStats asks a node for its figures (see crossNode's "stats").
func crossStats(t *testing.T, p *testkit.Process) map[string]int {
	t.Helper()
	reply := p.Call(t, "stats", crossCallTimeout)
	out := map[string]int{}
	for _, f := range strings.Fields(reply) {
		k, v, ok := strings.Cut(f, "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil {
			t.Fatalf("%s: stats %q", p.Name(), reply)
		}
		out[k] = n
	}
	return out
}

// crossReports has every node write its report and reads them.
func crossReports(t *testing.T, dir string, nodes []*testkit.Process) []crossReport {
	t.Helper()
	out := make([]crossReport, len(nodes))
	for i, p := range nodes {
		path := filepath.Join(dir, p.Name()+".json")
		expectReply(t, p, p.Call(t, "report "+path, crossCallTimeout), "reported")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &out[i]); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	return out
}

// judgeCross judges the messages of the first node's senders (first) or
// of the others, against what every node's entities received.
func judgeCross(reports []crossReport, names []string, first bool) loadVerdict {
	r := &received{byEntity: map[string][]int64{}}
	for i, rep := range reports {
		for id, seqs := range rep.Received {
			for _, s := range seqs {
				r.addAt(id, s, names[i])
			}
		}
	}
	var senders []*loadSender
	for i, rep := range reports {
		if (i == 0) != first {
			continue
		}
		for index, sent := range rep.Sent {
			senders = append(senders, &loadSender{index: index, sent: sent})
		}
	}
	return judgeLoad(r, senders, entityIDs(crossEntities))
}

// crossNode is a node process of TestRouterAcrossProcesses: a region of
// the test's entities, with a short passivation idle timeout, in a cluster
// over the parent's Consul. Its commands:
//
//	send <base>   start the senders, indexes base+1...; reply "sending"
//	stats         reply "shards=<hosted> answered=<requests answered>
//	              reactivated=<activations of entities activated before>"
//	leave         leave the cluster gracefully, then stop the senders;
//	              reply "left"
//	stop          stop the senders; reply "stopped"
//	report <path> write the crossReport to path; reply "reported"
func crossNode(t *testing.T, child *testkit.ChildProcess) {
	b := child.ConsulBackend(t)
	w := newConsulWorldOf(t, child.Cluster(t, b), b, []actorsharding.Option{actorsharding.WithPassivationIdleTimeout(crossIdleTimeout)})
	w.shards = crossShards
	n := w.startNode(false)
	region := w.region(n)
	sharding, err := actorsharding.New(n.System, n.Membership)
	if err != nil {
		t.Fatal(err)
	}
	ids := entityIDs(crossEntities)
	refs := make([]actorsharding.EntityRef, len(ids))
	for i, id := range ids {
		if refs[i], err = sharding.EntityRefFor(typeName, id); err != nil {
			t.Fatal(err)
		}
	}
	watch := watchRoutes(n.System)
	defer watch.halt()
	var load *crossLoad
	defer func() { load.halt() }() // before the node stops
	child.Reply("ready %s", n.Address())
	for cmd := range child.Commands() {
		verb, arg, _ := strings.Cut(cmd, " ")
		switch verb {
		case "send":
			base, err := strconv.ParseInt(arg, 10, 64)
			if err != nil || load != nil {
				t.Fatalf("%s: bad command %q", child.Name, cmd)
			}
			load = startCrossLoad(n.System, region, refs, base)
			child.Reply("sending")
		case "stats":
			activations, entities := crossActivations(w.ledger, ids)
			child.Reply("shards=%d answered=%d reactivated=%d", len(regionStats(t, n, region).Stats), load.answered(), activations-entities)
		case "leave":
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err := n.Membership.Leave(ctx)
			cancel()
			load.halt()
			if err != nil {
				t.Fatalf("%s: leave: %v", child.Name, err)
			}
			child.Reply("left")
		case "stop":
			load.halt()
			child.Reply("stopped")
		case "report":
			rep := load.report()
			rep.Received = w.received.snapshot()
			rep.Activations, rep.Entities = crossActivations(w.ledger, ids)
			rep.MaxDirect, rep.MaxRemoteHomes = watch.max()
			data, err := json.Marshal(rep)
			if err == nil {
				err = os.WriteFile(arg, data, 0o644)
			}
			if err != nil {
				t.Fatalf("%s: report: %v", child.Name, err)
			}
			child.Reply("reported")
		default:
			t.Fatalf("%s: unknown command %q", child.Name, cmd)
		}
	}
}

// crossActivations counts the activations of the entities ids in l, and
// the entities activated.
func crossActivations(l *testkit.Ledger, ids []string) (activations, entities int) {
	for _, id := range ids {
		if s := l.Starts(id); s > 0 {
			activations += s
			entities++
		}
	}
	return activations, entities
}

// snapshot returns a copy of what every entity received.
func (r *received) snapshot() map[string][]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]int64, len(r.byEntity))
	for id, seqs := range r.byEntity {
		out[id] = append([]int64(nil), seqs...)
	}
	return out
}

// crossActive picks an entity that is active now (see crossStep).
func crossActive(rng *rand.Rand) int {
	step := int(time.Now().UnixMilli() / crossStep.Milliseconds())
	for {
		if i := rng.IntN(crossEntities); (i+step)%crossPhases < crossActivePhases {
			return i
		}
	}
}

// crossLoad is one node's senders.
type crossLoad struct {
	senders []*crossSender
	stop    chan struct{}
	done    sync.WaitGroup
	once    sync.Once
}

// crossSender is one sending goroutine. sent is its own until the load
// stopped.
type crossSender struct {
	index                        int64
	sent                         map[string]int64
	messages, answers, unanswers atomic.Int64
}

// startCrossLoad starts crossSenders goroutines, indexes base+1 and up,
// that send to active entities through region and refs (one per entity,
// shared by all of them).
func startCrossLoad(system *actor.ActorSystem, region *actor.PID, refs []actorsharding.EntityRef, base int64) *crossLoad {
	l := &crossLoad{stop: make(chan struct{})}
	for k := range crossSenders {
		s := &crossSender{index: base + int64(k) + 1, sent: map[string]int64{}}
		l.senders = append(l.senders, s)
		l.done.Add(1)
		go func() {
			defer l.done.Done()
			s.run(system, region, refs, l.stop)
		}()
	}
	return l
}

// run sends rounds until stop: each message in one of the ways a user
// sends, in turn.
func (s *crossSender) run(system *actor.ActorSystem, region *actor.PID, refs []actorsharding.EntityRef, stop <-chan struct{}) {
	root := system.Root
	rng := rand.New(rand.NewPCG(uint64(s.index), uint64(time.Now().UnixNano())))
	for {
		var futures []*actor.Future
		for k := range crossRound {
			i := crossActive(rng)
			ref := refs[i]
			id := ref.EntityID()
			s.sent[id]++
			ping := pingMsg(id, s.index<<loadSenderShift|s.sent[id])
			switch k % 6 {
			case 0:
				root.Send(region, ping)
			case 1:
				root.Send(region, envelopeOf(ping))
			case 2:
				futures = append(futures, root.RequestFuture(region, ping, crossRequestTimeout))
			case 3:
				futures = append(futures, root.RequestFuture(region, envelopeOf(ping), crossRequestTimeout))
			case 4:
				_ = ref.Send(ping) // a Ping always packs
			case 5:
				res, err := requestWithin(ref, ping, crossRequestTimeout)
				s.answered(res, err)
			}
			s.messages.Add(1)
		}
		for _, f := range futures {
			s.answered(f.Result())
		}
		select {
		case <-stop:
			return
		case <-time.After(crossPause):
		}
	}
}

func (s *crossSender) answered(res any, err error) {
	if _, ok := res.(*testpb.Pong); ok && err == nil {
		s.answers.Add(1)
	} else {
		s.unanswers.Add(1)
	}
}

func envelopeOf(ping *testpb.Ping) any {
	env, err := actorsharding.NewEnvelope(ping.EntityId, ping)
	if err != nil {
		panic(err) // a Ping always packs
	}
	return env
}

// answered is how many requests were answered so far (0 before the load).
func (l *crossLoad) answered() int {
	if l == nil {
		return 0
	}
	n := 0
	for _, s := range l.senders {
		n += int(s.answers.Load())
	}
	return n
}

// halt stops the senders and waits until they have returned.
func (l *crossLoad) halt() {
	if l == nil {
		return
	}
	l.once.Do(func() { close(l.stop) })
	l.done.Wait()
}

// report is the senders' part of the report; the load must be halted.
func (l *crossLoad) report() crossReport {
	rep := crossReport{Sent: map[int64]map[string]int64{}}
	if l == nil {
		return rep
	}
	for _, s := range l.senders {
		rep.Sent[s.index] = maps.Clone(s.sent)
		rep.Messages += s.messages.Load()
		rep.Answered += s.answers.Load()
		rep.Unanswered += s.unanswers.Load()
	}
	return rep
}

// routeWatch samples the router's table of the test's region, keeping the
// largest figures seen.
type routeWatch struct {
	direct, remote atomic.Int64
	stop           chan struct{}
	done           chan struct{}
}

func watchRoutes(system *actor.ActorSystem) *routeWatch {
	w := &routeWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			e, r := actorsharding.DirectRoutes(system, typeName)
			if int64(e) > w.direct.Load() {
				w.direct.Store(int64(e))
			}
			if int64(r) > w.remote.Load() {
				w.remote.Store(int64(r))
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *routeWatch) max() (direct, remote int) {
	return int(w.direct.Load()), int(w.remote.Load())
}

func (w *routeWatch) halt() {
	close(w.stop)
	<-w.done
}
