package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/backoff"
	"github.com/protoshard/protoshard/internal/shardingadmin"
	"github.com/protoshard/protoshard/internal/shardingconfig"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
)

// requestTimeout bounds every single request of the benchmark.
const requestTimeout = 10 * time.Second

// newSystem returns an actor system whose logs are discarded unless
// PROTOSHARD_LOG is set ("debug" for the debug level).
func newSystem(name string) *actor.ActorSystem { return newObservedSystem(name, nil) }

// newObservedSystem is newSystem whose log records also go to observe (if
// not nil), at every level.
func newObservedSystem(name string, observe func(slog.Record)) *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		level := slog.LevelInfo
		var h slog.Handler
		switch os.Getenv("PROTOSHARD_LOG") {
		case "", "0":
			h = slog.DiscardHandler
		case "debug":
			level = slog.LevelDebug
		}
		if h == nil {
			h = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})
		}
		if observe != nil {
			h = observedHandler{next: h, observe: observe}
		}
		return slog.New(h).With(slog.String("node", name))
	}))
}

// observedHandler passes every record to observe and those its next
// handler takes on to it.
type observedHandler struct {
	next    slog.Handler
	observe func(slog.Record)
}

func (h observedHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h observedHandler) Handle(ctx context.Context, r slog.Record) error {
	h.observe(r)
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h observedHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return observedHandler{next: h.next.WithAttrs(attrs), observe: h.observe}
}

func (h observedHandler) WithGroup(name string) slog.Handler {
	return observedHandler{next: h.next.WithGroup(name), observe: h.observe}
}

// node is one protoshard member: an actor system with its remote on
// loopback, membership and the sharding extension.
type node struct {
	name     string
	system   *actor.ActorSystem
	remote   *remote.Remote
	cluster  *membership.Cluster
	sharding *actorsharding.Sharding
}

func startNode(ctx context.Context, name string, provider membership.Provider) (*node, error) {
	return startNodeOn(ctx, newSystem(name), name, provider)
}

// startNodeOn is startNode on the actor system system. Its remote is
// configured as actorsharding.Join's: proto.actor's default endpoint
// queue, a ring of 16 MB per node connected to, made 12 GB and most of
// the CPU time in the garbage collector with the scale section's 110
// nodes in one process.
func startNodeOn(ctx context.Context, system *actor.ActorSystem, name string, provider membership.Provider) (*node, error) {
	// The quarantine fences this node against removed members at the remote
	// layer (nothing a removed node still sends is processed).
	quarantine := membership.NewQuarantine()
	r := remote.NewRemote(system, remote.Configure("127.0.0.1", 0,
		remote.WithEndpointWriterQueueSize(shardingconfig.EndpointWriterQueueSize), quarantine.RemoteOption()))
	r.Start() // before membership: a member is known by its address
	c := membership.NewCluster(system, provider, membership.Config{Quarantine: quarantine})
	n := &node{name: name, system: system, remote: r, cluster: c}
	jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.Join(jctx); err != nil {
		n.stop()
		return nil, fmt.Errorf("%s join: %w", name, err)
	}
	s, err := actorsharding.New(system, c)
	if err != nil {
		n.stop()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	n.sharding = s
	return n, nil
}

// stop shuts the node down without a goodbye: the measurement is over.
func (n *node) stop() { stopNodes(n) }

// stopNodes shuts nodes down without a goodbye. Every actor of every node
// stops first, while all the remotes still serve, and only then the
// membership and the remotes: proto.actor's ActorSystem.Shutdown stops no
// actor, and one left running (a region's retries, a singleton's hand-over
// retries) keeps sending to the nodes stopped before it; the remote then
// redials the gone address, again and again, leaking a gRPC connection
// each time and keeping the stopped node in memory (seen: 500 MB kept and
// the later sections 3x slower after five rebalance rounds).
func stopNodes(nodes ...*node) {
	for _, n := range nodes {
		stopActors(n.system)
	}
	for _, n := range nodes {
		n.cluster.Close()
		n.remote.Shutdown(false)
		n.system.Shutdown()
	}
}

// stopActors stops every actor of system but the remote's own and waits
// (bounded by proto.actor's stop timeout) until they have stopped. The
// process registry holds every local process: the actors are
// *actor.ActorProcess, but for the regions, in whose place the registry
// holds the sharding's router (which passes a stop on), and the entities,
// which stop with their shards anyway. A child (its ID
// is its parent's, a slash and its name) stops with its parent, so only
// the actors without a parent among them are stopped: a million entities
// stop with their shards. The remote's actors stay: a stopping actor tells
// its remote watchers through them.
func stopActors(system *actor.ActorSystem) {
	actors := map[string]bool{}
	for _, bucket := range system.ProcessRegistry.LocalPIDs.LocalPIDs {
		for id, p := range bucket.Items() {
			_, isActor := p.(*actor.ActorProcess)
			isActor = isActor || strings.HasPrefix(id, shardingadmin.RegionName(""))
			if isActor && id != "activator" && id != "EndpointSupervisor" && !strings.HasPrefix(id, "EndpointSupervisor/") {
				actors[id] = true
			}
		}
	}
	var futures []*actor.Future
	for id := range actors {
		if !hasParentIn(id, actors) {
			futures = append(futures, system.Root.StopFuture(system.NewLocalPID(id)))
		}
	}
	for _, f := range futures {
		_ = f.Wait() // an actor that does not stop in time is left to the system's shutdown
	}
}

// hasParentIn reports whether an ancestor of the actor id is in actors.
func hasParentIn(id string, actors map[string]bool) bool {
	for i := strings.LastIndexByte(id, '/'); i > 0; i = strings.LastIndexByte(id[:i], '/') {
		if actors[id[:i]] {
			return true
		}
	}
	return false
}

// waitRegions waits until the coordinator behind region knows want regions.
func waitRegions(ctx context.Context, system *actor.ActorSystem, region *actor.PID, want int) error {
	for {
		res, err := system.Root.RequestFuture(region, &messages.GetCurrentRegions{}, 2*time.Second).Result()
		if err == nil {
			if cr, ok := res.(*messages.CurrentRegions); ok && len(cr.Addresses) == want {
				return nil
			}
		}
		if err := backoff.Sleep(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("waiting for %d regions: %w", want, err)
		}
	}
}

// counter counts the Pings the entities of one workload receive and
// signals when a target is reached.
type counter struct {
	n      atomic.Int64
	target atomic.Int64
	done   atomic.Pointer[chan struct{}]
}

// expect resets the count and returns a channel closed once n more Pings
// have arrived.
func (c *counter) expect(n int64) <-chan struct{} {
	ch := make(chan struct{})
	c.target.Store(-1)
	c.n.Store(0)
	c.done.Store(&ch)
	c.target.Store(n)
	if n <= 0 {
		close(ch)
	}
	return ch
}

func (c *counter) hit() {
	if c.n.Add(1) == c.target.Load() {
		if ch := c.done.Load(); ch != nil {
			close(*ch)
		}
	}
}

// entityProps is the entity of every workload, sharded, grain or plain: it
// counts every Ping and answers it with a Pong (a fire-and-forget Ping has
// no sender and gets no answer).
func entityProps(count *counter) *actor.Props {
	return actor.PropsFromFunc(func(ctx actor.Context) {
		if p, ok := ctx.Message().(*testpb.Ping); ok {
			count.hit()
			if ctx.Sender() != nil {
				ctx.Respond(&testpb.Pong{EntityId: p.EntityId, Seq: p.Seq})
			}
		}
	})
}

// pings returns one Ping per entity, "prefix-0000" and up.
func pings(prefix string, n int) []*testpb.Ping {
	out := make([]*testpb.Ping, n)
	for i := range out {
		out[i] = &testpb.Ping{EntityId: fmt.Sprintf("%s-%04d", prefix, i), Seq: int64(i), From: "bench"}
	}
	return out
}

// requestAll sends one request per message to target(i) at once and waits
// for every answer.
func requestAll(system *actor.ActorSystem, msgs []*testpb.Ping, target func(i int) *actor.PID) error {
	return requestAllWithin(system, msgs, target, requestTimeout)
}

// requestAllWithin is requestAll with a timeout of each request.
func requestAllWithin(system *actor.ActorSystem, msgs []*testpb.Ping, target func(i int) *actor.PID, timeout time.Duration) error {
	futures := make([]*actor.Future, len(msgs))
	for i, m := range msgs {
		futures[i] = system.Root.RequestFuture(target(i), m, timeout)
	}
	for i, f := range futures {
		res, err := f.Result()
		if err != nil {
			return fmt.Errorf("request %d (%s): %w", i, msgs[i].EntityId, err)
		}
		if _, ok := res.(*testpb.Pong); !ok {
			return fmt.Errorf("request %d (%s) answered %T", i, msgs[i].EntityId, res)
		}
	}
	return nil
}

// sendRate sends n Pings fire-and-forget, round robin over msgs, each to
// target(i), waits until count saw them all and returns messages/s.
func sendRate(ctx context.Context, system *actor.ActorSystem, count *counter, n int, msgs []*testpb.Ping, target func(i int) *actor.PID) (float64, error) {
	done := count.expect(int64(n))
	start := time.Now()
	for i := range n {
		e := i % len(msgs)
		system.Root.Send(target(e), msgs[e])
	}
	select {
	case <-done:
	case <-ctx.Done():
		return 0, fmt.Errorf("only %d of %d messages arrived: %w", count.n.Load(), n, ctx.Err())
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// latencies measures n sequential calls of do and returns p50 and p99 in
// microseconds.
func latencies(n int, do func(i int) error) (p50, p99 float64, err error) {
	d := make([]time.Duration, n)
	for i := range n {
		start := time.Now()
		if err := do(i); err != nil {
			return 0, 0, err
		}
		d[i] = time.Since(start)
	}
	p50, p99 = percentiles(d)
	return p50, p99, nil
}

// percentiles returns p50 and p99 of d in microseconds (nearest rank).
func percentiles(d []time.Duration) (p50, p99 float64) {
	us := make([]float64, len(d))
	for i, v := range d {
		us[i] = float64(v) / float64(time.Microsecond)
	}
	return percentile(us, 50), percentile(us, 99)
}

// ask sends one request and checks that it was answered with a Pong.
func ask(system *actor.ActorSystem, pid *actor.PID, msg *testpb.Ping) error {
	res, err := system.Root.RequestFuture(pid, msg, requestTimeout).Result()
	if err != nil {
		return fmt.Errorf("%s: %w", msg.EntityId, err)
	}
	if _, ok := res.(*testpb.Pong); !ok {
		return fmt.Errorf("%s answered %T", msg.EntityId, res)
	}
	return nil
}
