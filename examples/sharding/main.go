// Command sharding runs cluster sharding across in-process nodes with no
// set-up at all (in-process membership, one shared coordinator state store):
// three nodes host a few thousand counter entities in 100 shards, a fourth
// node joins and the coordinator rebalances shards onto it, then the oldest
// node (the one running the coordinator) leaves gracefully, handing off its
// shards and the coordinator. Requests keep flowing through every node's
// region the whole time, and at the end every request must have been
// answered and every counter must agree with the answers.
//
//	go run ./examples/sharding
//	go run ./examples/sharding -short        # 300 entities
//	go run ./examples/sharding -entities 10000
//
// PROTOSHARD_LOG=1 shows the nodes' logs on stderr.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/examples/sharding/counterpb"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/singleton"
)

const (
	// typeName is the entity type: one region per node and type.
	typeName = "Counter"
	// rebalanceInterval is how often the coordinator looks for shards to
	// move (Akka's default is 10s).
	rebalanceInterval = time.Second
)

// rebalanceLimit is how many shards one rebalance round moves at most with
// the default least-shard strategy (Akka's rebalance-absolute-limit and
// rebalance-relative-limit).
func rebalanceLimit(shards int) int {
	rel := int(coordinatoractor.DefaultRebalanceRelativeLimit * float64(shards))
	return max(1, min(rel, coordinatoractor.DefaultRebalanceAbsoluteLimit))
}

// config is what a run does; main fills it from the flags.
type config struct {
	// entities is the number of counter entities, "counter-0" and up.
	entities int
	// shards is the extractor's number of shards (the same on every node).
	shards int
	// requestTimeout bounds one attempt of a request. A message caught in a
	// hand-off is dropped (at-most-once delivery), so its attempt times out
	// and is retried.
	requestTimeout time.Duration
	// maxAttempts bounds the attempts of one request; a request still
	// unanswered after them is lost and fails the run.
	maxAttempts int
	// retryBackoff is the pause before the first retry, doubled before each
	// next one (up to a second): a dropped message fails its request at
	// once, and an immediate retry would likely land in the same hand-off.
	retryBackoff time.Duration
	// concurrency is the number of requests in flight at once.
	concurrency int
	// settle bounds each wait for the shards to settle after a membership
	// change.
	settle time.Duration
}

func defaultConfig() config {
	return config{
		entities:       3000,
		shards:         100,
		requestTimeout: 2 * time.Second,
		maxAttempts:    5,
		retryBackoff:   100 * time.Millisecond,
		concurrency:    64,
		settle:         30 * time.Second,
	}
}

func main() {
	cfg := defaultConfig()
	entities := flag.Int("entities", 0, "number of counter entities (default 3000, 300 with -short)")
	short := flag.Bool("short", false, "a quick run: 300 entities")
	flag.Parse()
	if *short {
		cfg.entities = 300
	}
	if *entities > 0 {
		cfg.entities = *entities
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// node is one member: an actor system with its remote, membership and the
// Counter region.
type node struct {
	name    string
	system  *actor.ActorSystem
	remote  *remote.Remote
	cluster *membership.Cluster
	region  *actor.PID
	left    bool
}

// counter is the entity: it counts the Increments it received in this
// incarnation and answers each with the count. Its state is in memory only,
// so an entity whose shard moves to another node starts again from zero:
// the caller sees a new incarnation.
type counter struct {
	node        string
	incarnation string
	count       int64
}

func (c *counter) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		c.incarnation = randomID()
	case *counterpb.Increment:
		c.count++
		ctx.Respond(&counterpb.Counted{EntityId: msg.EntityId, Count: c.count, Node: c.node, Incarnation: c.incarnation})
	}
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// run tells the story on out and returns an error if a request went
// unanswered or a counter disagrees with the answers.
func run(ctx context.Context, out io.Writer, cfg config) error {
	if cfg.entities < 1 || cfg.shards < 1 || cfg.maxAttempts < 1 || cfg.concurrency < 1 {
		return fmt.Errorf("bad config: %+v", cfg)
	}
	registry := local.NewRegistry()
	// One store for every node: the coordinator's state (which shard lives
	// where) survives the coordinator moving to another node. Nodes in
	// separate processes would share a consulstore.StateStore.
	store := coordinatoractor.NewMemoryStore()
	extractor := actorsharding.NewHashCodeMessageExtractor(cfg.shards)
	d := &demo{cfg: cfg, out: out, registry: registry, store: store, extractor: extractor}
	defer d.shutdown()

	ids := make([]string, cfg.entities)
	activeShards := map[string]bool{}
	for i := range ids {
		ids[i] = fmt.Sprintf("counter-%d", i)
		activeShards[extractor.ShardID(ids[i])] = true
	}
	d.traffic = newTraffic(ids)
	fmt.Fprintf(out, "sharding example: %d counter entities in %d shards (%d of them used)\n", cfg.entities, cfg.shards, len(activeShards))

	for _, name := range []string{"node-a", "node-b", "node-c"} {
		if err := d.startNode(ctx, name); err != nil {
			return err
		}
	}
	if err := d.waitRegistered(ctx, 3); err != nil {
		return err
	}
	fmt.Fprintf(out, "3 nodes up; every region registered with the coordinator on %s\n", d.oldest().name)

	if err := d.round(ctx, "round 1", 2, d.running()); err != nil {
		return err
	}
	if err := d.printDistribution(); err != nil {
		return err
	}

	if err := d.startNode(ctx, "node-d"); err != nil {
		return err
	}
	fmt.Fprintf(out, "node-d joins; requests go on while the coordinator rebalances (every %v, at most %d shards a round)\n",
		rebalanceInterval, rebalanceLimit(len(activeShards)))
	if err := d.settle(ctx, len(activeShards)); err != nil {
		return err
	}

	leaving := d.oldest()
	fmt.Fprintf(out, "%s (the oldest: it runs the coordinator) leaves gracefully, handing off its shards; requests go on through the others\n", leaving.name)
	leaveDone := make(chan error, 1)
	start := time.Now()
	go func() {
		lctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		leaveDone <- leaving.cluster.Leave(lctx)
	}()
	leaving.left = true // no more requests through its region
	if err := d.round(ctx, "during the leave", 1, d.running()); err != nil {
		return err
	}
	if err := <-leaveDone; err != nil {
		return fmt.Errorf("%s leave: %w", leaving.name, err)
	}
	fmt.Fprintf(out, "%s left after %v; the coordinator now runs on %s\n", leaving.name, time.Since(start).Round(10*time.Millisecond), d.oldest().name)
	leaving.stop()
	if err := d.settle(ctx, len(activeShards)); err != nil {
		return err
	}

	if err := d.round(ctx, "final round", 2, d.running()); err != nil {
		return err
	}
	return d.verify()
}

// demo is one run: its nodes and the traffic they carried.
type demo struct {
	cfg       config
	out       io.Writer
	registry  *local.Registry
	store     coordinatoractor.StateStore
	extractor actorsharding.MessageExtractor
	nodes     []*node
	traffic   *traffic
}

// logging keeps the nodes quiet unless PROTOSHARD_LOG is set ("debug" for
// the debug level): the story is printed, the logs would drown it.
func logging(node string) actor.ConfigOption {
	return actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		level := slog.LevelInfo
		switch os.Getenv("PROTOSHARD_LOG") {
		case "", "0":
			return slog.New(slog.DiscardHandler)
		case "debug":
			level = slog.LevelDebug
		}
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With(slog.String("node", node))
	})
}

func (d *demo) startNode(ctx context.Context, name string) error {
	system := actor.NewActorSystem(logging(name))
	// The quarantine fences this node against removed members at the remote
	// layer (nothing a removed node still sends is processed).
	quarantine := membership.NewQuarantine()
	r := remote.NewRemote(system, remote.Configure("127.0.0.1", 0, quarantine.RemoteOption()))
	// The remote first: a member is known by its address, which is
	// "nonhost" until the remote listens.
	r.Start()
	cluster := membership.NewCluster(system, d.registry.Provider(), membership.Config{Quarantine: quarantine})
	n := &node{name: name, system: system, remote: r, cluster: cluster}
	d.nodes = append(d.nodes, n) // listed now, so shutdown stops it even if the join fails
	jctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := cluster.Join(jctx); err != nil {
		return fmt.Errorf("%s join: %w", name, err)
	}
	sharding, err := actorsharding.New(system, cluster)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	props := actor.PropsFromProducer(func() actor.Actor { return &counter{node: name} })
	n.region, err = sharding.StartRegion(typeName, props, d.extractor,
		actorsharding.WithStateStore(d.store),
		// Akka's 10s default is for production; a demo wants to see it.
		actorsharding.WithRebalanceInterval(rebalanceInterval),
		// Regions register again with a moved coordinator at this interval
		// (default 2s): short, so that the coordinator's move is brief.
		actorsharding.WithRetryInterval(200*time.Millisecond),
		actorsharding.WithCoordinatorSingleton(singleton.WithHandOverRetryInterval(200*time.Millisecond)),
	)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// stop shuts a node down after its graceful leave.
func (n *node) stop() {
	n.left = true
	n.remote.Shutdown(true)
	n.system.Shutdown()
}

// shutdown stops the nodes still running, without a goodbye: the run is
// over, nobody needs their shards any more.
func (d *demo) shutdown() {
	for _, n := range d.nodes {
		if n.system.IsStopped() {
			continue
		}
		n.cluster.Close()
		n.remote.Shutdown(false)
		n.system.Shutdown()
	}
}

// running returns the nodes that take requests.
func (d *demo) running() []*node {
	var out []*node
	for _, n := range d.nodes {
		if !n.left && n.region != nil {
			out = append(out, n)
		}
	}
	return out
}

// oldest returns the oldest running member's node: it runs the coordinator.
func (d *demo) oldest() *node {
	running := d.running()
	if len(running) == 0 {
		return nil
	}
	members := running[0].cluster.Members() // oldest first
	for _, m := range members {
		for _, n := range running {
			if n.system.Address() == m.Address {
				return n
			}
		}
	}
	return running[0]
}

// waitRegistered waits until the coordinator knows want regions: membership
// converges before the regions have registered, and shards are allocated
// only among registered regions.
func (d *demo) waitRegistered(ctx context.Context, want int) error {
	deadline := time.Now().Add(d.cfg.settle)
	for {
		n := d.running()[0]
		res, err := n.system.Root.RequestFuture(n.region, &messages.GetCurrentRegions{}, 5*time.Second).Result()
		if err == nil {
			if cr, ok := res.(*messages.CurrentRegions); ok && len(cr.Addresses) == want {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the coordinator did not see %d regions within %v", want, d.cfg.settle)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// distribution is the shards and entities each running node hosts, by the
// regions' own GetShardRegionStats.
type distribution struct {
	names    []string
	shards   map[string]int
	entities map[string]int
}

func (d *demo) distribution() (distribution, error) {
	dist := distribution{shards: map[string]int{}, entities: map[string]int{}}
	for _, n := range d.running() {
		res, err := n.system.Root.RequestFuture(n.region, &messages.GetShardRegionStats{}, 10*time.Second).Result()
		if err != nil {
			return dist, fmt.Errorf("GetShardRegionStats on %s: %w", n.name, err)
		}
		st, ok := res.(*messages.ShardRegionStats)
		if !ok {
			return dist, fmt.Errorf("GetShardRegionStats on %s answered %T", n.name, res)
		}
		dist.names = append(dist.names, n.name)
		dist.shards[n.name] = len(st.Stats)
		for _, c := range st.Stats {
			dist.entities[n.name] += int(c)
		}
	}
	return dist, nil
}

// balanced: every used shard is hosted, and no node has two more shards
// than another, which is where the least-shard strategy stops moving them.
func (dist distribution) balanced(activeShards int) bool {
	total, lo, hi := 0, int(^uint(0)>>1), 0
	for _, name := range dist.names {
		s := dist.shards[name]
		total += s
		lo, hi = min(lo, s), max(hi, s)
	}
	return total == activeShards && hi-lo <= 1
}

func (d *demo) printDistribution() error {
	dist, err := d.distribution()
	if err != nil {
		return err
	}
	d.print(dist)
	return nil
}

func (d *demo) print(dist distribution) {
	coordinator := d.oldest()
	fmt.Fprintln(d.out, "  where the shards live:")
	for _, name := range dist.names {
		mark := ""
		if coordinator != nil && name == coordinator.name {
			mark = "  (coordinator)"
		}
		fmt.Fprintf(d.out, "    %s: %3d shards, %5d entities running%s\n", name, dist.shards[name], dist.entities[name], mark)
	}
}

// settle sends rounds of requests until the shards are balanced over the
// running nodes: a shard handed off by a rebalance (or a leave) is
// allocated again only when a message for it arrives, so without traffic
// it would stay homeless. Rounds start at most every pace, so that a quick
// round does not flood the story (or the CPU) while the coordinator waits
// for its next rebalance tick.
func (d *demo) settle(ctx context.Context, activeShards int) error {
	const pace = 200 * time.Millisecond
	start := time.Now()
	var total roundResult
	for rounds := 1; ; rounds++ {
		roundStart := time.Now()
		r, err := d.traffic.round(ctx, d.cfg, 1, d.running())
		total.add(r)
		if err != nil {
			d.report(fmt.Sprintf("requests while settling (%d %s)", rounds, plural(rounds, "round")), total, d.running())
			return err
		}
		dist, err := d.distribution()
		if err != nil {
			return err
		}
		if dist.balanced(activeShards) {
			d.report(fmt.Sprintf("requests while settling (%d %s)", rounds, plural(rounds, "round")), total, d.running())
			fmt.Fprintf(d.out, "shards balanced over %d nodes after %v:\n", len(dist.names), time.Since(start).Round(100*time.Millisecond))
			d.print(dist)
			return nil
		}
		if time.Since(start) > d.cfg.settle {
			d.print(dist)
			return fmt.Errorf("shards not balanced after %v", d.cfg.settle)
		}
		if err := sleep(ctx, pace-time.Since(roundStart)); err != nil {
			return err
		}
	}
}

// round sends perEntity requests to every entity, each through another
// node's region, waits for all answers and prints how it went.
func (d *demo) round(ctx context.Context, name string, perEntity int, via []*node) error {
	r, err := d.traffic.round(ctx, d.cfg, perEntity, via)
	d.report(name, r, via)
	return err
}

func (d *demo) report(name string, r roundResult, via []*node) {
	fmt.Fprintf(d.out, "%s: %d requests through %s: %d answered", name, r.sent, names(via), r.sent-r.lost)
	if r.retries > 0 {
		fmt.Fprintf(d.out, " (%d retries: dropped in a hand-off)", r.retries)
	}
	fmt.Fprintf(d.out, " [%v]\n", r.took.Round(10*time.Millisecond))
}

func names(nodes []*node) string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.name
	}
	return strings.Join(out, ", ")
}

// verify checks the whole history and prints the final line.
func (d *demo) verify() error {
	t := d.traffic
	moved, extra, problems := t.check()
	fmt.Fprintf(d.out, "counters: %d entities checked; %d of them were started again on another node when their shard moved, and counted from 1 again\n",
		len(t.ids), moved)
	if extra > 0 {
		fmt.Fprintf(d.out, "counters: %d increments came from attempts that timed out but were delivered after all\n", extra)
	}
	for _, p := range problems[:min(len(problems), 10)] {
		fmt.Fprintln(d.out, "  PROBLEM:", p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d counters disagree with the answers", len(problems))
	}
	fmt.Fprintf(d.out, "all %d messages answered; %d retries during hand-offs\n", t.sent.Load(), t.retries.Load())
	return nil
}

// traffic sends the requests and keeps, per entity, every answer in order.
type traffic struct {
	ids []string
	// answers[i] are entity i's answers in the order the requests were sent;
	// one goroutine at a time works on one entity, so no lock is needed.
	answers [][]answer
	// timedOut[i] counts entity i's attempts that timed out: each may still
	// have reached the entity (at-most-once means "maybe", not "no").
	timedOut []int
	turn     int
	sent     atomic.Int64
	retries  atomic.Int64
}

type answer struct {
	count       int64
	incarnation string
	node        string
}

func newTraffic(ids []string) *traffic {
	return &traffic{ids: ids, answers: make([][]answer, len(ids)), timedOut: make([]int, len(ids))}
}

// roundResult is how one or more rounds of requests went.
type roundResult struct {
	sent    int // requests
	lost    int // requests still unanswered after every attempt
	retries int // attempts beyond the first
	took    time.Duration
}

func (r *roundResult) add(o roundResult) {
	r.sent += o.sent
	r.lost += o.lost
	r.retries += o.retries
	r.took += o.took
}

// round sends perEntity requests to every entity, cfg.concurrency at a
// time; one entity's requests go one after the other, each through the next
// node of via, so its answers are in the order it counted them.
func (t *traffic) round(ctx context.Context, cfg config, perEntity int, via []*node) (roundResult, error) {
	if len(via) == 0 {
		return roundResult{}, errors.New("no node to send through")
	}
	start := time.Now()
	t.turn++
	work := make(chan int)
	var (
		mu       sync.Mutex
		res      roundResult
		firstErr error
		wg       sync.WaitGroup
	)
	for range cfg.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				for j := range perEntity {
					// Change the pattern every round, so that each entity
					// hears from every node over the run.
					n := via[(i+j+t.turn)%len(via)]
					a, retries, err := t.ask(ctx, cfg, n, i)
					mu.Lock()
					res.sent++
					res.retries += retries
					if err != nil {
						res.lost++
						if firstErr == nil {
							firstErr = err
						}
					}
					mu.Unlock()
					if err != nil {
						break // the entity's next requests would not tell us more
					}
					t.answers[i] = append(t.answers[i], a)
				}
			}
		}()
	}
	for i := range t.ids {
		select {
		case work <- i:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	res.took = time.Since(start)
	t.sent.Add(int64(res.sent))
	t.retries.Add(int64(res.retries))
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if res.lost > 0 {
		return res, fmt.Errorf("%d requests lost (unanswered after %d attempts each); the first: %w", res.lost, cfg.maxAttempts, firstErr)
	}
	return res, nil
}

// ask sends one Increment through n's region, with at most cfg.maxAttempts
// attempts, and returns the answer and the number of retries.
func (t *traffic) ask(ctx context.Context, cfg config, n *node, i int) (answer, int, error) {
	id := t.ids[i]
	var lastErr error
	backoff := cfg.retryBackoff
	for attempt := range cfg.maxAttempts {
		if attempt > 0 {
			if err := sleep(ctx, backoff); err != nil {
				return answer{}, attempt, err
			}
			backoff = min(2*backoff, time.Second)
		}
		res, err := n.system.Root.RequestFuture(n.region, &counterpb.Increment{EntityId: id}, cfg.requestTimeout).Result()
		if err != nil {
			// A message dropped in a hand-off (at-most-once delivery)
			// fails its future at once: the region publishes a
			// dead-letter event, and proto.actor answers the sender with
			// a DeadLetterResponse. Such an attempt never reached the
			// entity. A time-out is murkier: the message may still have
			// arrived, late.
			if errors.Is(err, actor.ErrTimeout) {
				t.timedOut[i]++
			}
			lastErr = err
			continue
		}
		c, ok := res.(*counterpb.Counted)
		if !ok || c.EntityId != id {
			return answer{}, attempt, fmt.Errorf("%s answered %T %v", id, res, res)
		}
		return answer{count: c.Count, incarnation: c.Incarnation, node: c.Node}, attempt, nil
	}
	return answer{}, cfg.maxAttempts - 1, fmt.Errorf("%s through %s: no answer after %d attempts: %w", id, n.name, cfg.maxAttempts, lastErr)
}

// check compares every entity's counts with its answers. Within one
// incarnation the count must go up by one per answered request; a new
// incarnation starts at 1; an incarnation that was replaced never answers
// again (that would be two copies of the entity alive at once). The only
// slack: an attempt that timed out may still have been delivered, so an
// entity may have counted up to that many increments nobody saw.
func (t *traffic) check() (moved, extra int, problems []string) {
	for i, as := range t.answers {
		id := t.ids[i]
		retired := map[string]bool{}
		unexplained := 0
		restarted := false
		for k, a := range as {
			switch {
			case k > 0 && a.incarnation == as[k-1].incarnation:
				if a.count <= as[k-1].count {
					problems = append(problems, fmt.Sprintf("%s counted %d after %d", id, a.count, as[k-1].count))
				}
				unexplained += int(a.count - as[k-1].count - 1)
			default:
				if retired[a.incarnation] {
					problems = append(problems, fmt.Sprintf("%s: incarnation %s answered again after another one", id, a.incarnation))
				}
				if k > 0 {
					retired[as[k-1].incarnation] = true
					restarted = true
				}
				unexplained += int(a.count - 1)
			}
		}
		if unexplained > t.timedOut[i] {
			problems = append(problems, fmt.Sprintf("%s counted %d messages nobody sent (only %d attempts timed out)", id, unexplained, t.timedOut[i]))
		}
		extra += max(0, unexplained)
		if restarted {
			moved++
		}
	}
	sort.Strings(problems)
	return moved, extra, slices.Compact(problems)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// plural returns word for one, word+"s" for any other n.
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
