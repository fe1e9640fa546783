package actorsharding_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/internal/coordinator"
	"github.com/protoshard/protoshard/internal/shardproto"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/singleton"
	"github.com/protoshard/protoshard/testkit"
)

// homes asks every entity through n and returns entity -> node address.
func homesOf(t *testing.T, n *testkit.Node, w *world, ids []string, seq int64) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, id := range ids {
		out[id] = askEventually(t, n, w.region(n), id, seq).Node
	}
	return out
}

// spread returns the shard count of each region in the coordinator's state.
func spread(st *coordinator.CurrentCoordinatorState) (counts []int, total int) {
	if st == nil {
		return nil, 0
	}
	for _, r := range st.State.Regions {
		counts = append(counts, len(r.Shards))
		total += len(r.Shards)
	}
	return counts, total
}

// waitBalanced waits until the coordinator's regions hold within one
// shard of each other and no hand-off is in progress. A shard handed off
// is allocated again only on its next message, so the total may be below
// the number of shards then.
func (w *world) waitBalanced(regions int) {
	w.t.Helper()
	testkit.WaitFor(w.t, 90*time.Second, func() bool {
		st := w.coordinatorState()
		counts, _ := spread(st)
		lo, hi := minMax(counts)
		return len(counts) == regions && hi-lo <= 1 && len(st.RebalanceInProgress) == 0
	}, "shards did not spread over %d regions: %v", regions, testkit.Lazy(func() any { c, _ := spread(w.coordinatorState()); return c }))
}

func minMax(xs []int) (int, int) {
	if len(xs) == 0 {
		return 0, 0
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

// One node holds all shards, two more join; the shards spread
// within the strategy's limits, no entity runs twice, and every message sent
// meanwhile either arrives or is dropped with a dead-letter event naming the
// documented hand-off reason.
func TestRebalanceOnJoin(t *testing.T) {
	w := newLocalWorld(t)
	first := w.startNode(false)
	homesOf(t, first, w, entityIDs(1000), 0) // 1000 IDs hit all 100 shards
	ids := entityIDs(300)
	if counts, total := spread(w.coordinatorState()); total != 100 || len(counts) != 1 {
		t.Fatalf("before the join: %v shards per region, want all 100 on one", counts)
	}

	// Traffic through the first node's region while the shards move.
	var sent atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for seq := int64(1); ; seq++ {
			for _, id := range ids {
				select {
				case <-stop:
					return
				default:
				}
				first.System.Root.Send(w.region(first), &testpb.Ping{EntityId: id, Seq: seq})
				sent.Add(1)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	w.startNode(false)
	w.startNode(false)
	w.cluster.WaitConverged(t, 30*time.Second)
	w.waitBalanced(3)
	close(stop)
	wg.Wait()

	pings := func() (delivered, dropped int) {
		delivered = w.received.total() - 1000 // minus the seq-0 asks
		for _, d := range w.dropped() {
			if isPing(d.Message) {
				dropped++
			}
		}
		return
	}
	testkit.WaitFor(t, 60*time.Second, func() bool {
		d, x := pings()
		return int64(d+x) == sent.Load()
	}, "messages unaccounted for: %v", testkit.Lazy(func() any {
		d, x := pings()
		return fmt.Sprintf("sent %d, delivered %d, dropped %d", sent.Load(), d, x)
	}))
	d, x := pings()
	t.Logf("sent %d during the rebalance: delivered %d, dropped with a reason %d", sent.Load(), d, x)
	for _, e := range w.dropped() {
		if isPing(e.Message) && !containsAny(e.Reason, "hand-off", "handing off") {
			t.Errorf("a Ping was dropped for an undocumented reason: %s", e.Reason)
		}
	}
	for _, id := range ids {
		got := w.received.get(id)
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				t.Errorf("entity %s received out of order: %v", id, got)
				break
			}
		}
	}
	// Queries agree with the coordinator after the rebalance: every shard a
	// region reports hosting is allocated to it.
	testkit.WaitFor(t, 30*time.Second, func() bool { return w.regionsAgreeWithCoordinator() == "" },
		"regions and coordinator disagree: %v", testkit.Lazy(func() any { return w.regionsAgreeWithCoordinator() }))
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if len(sub) > 0 && len(s) >= len(sub) && (indexOf(s, sub) >= 0) {
			return true
		}
	}
	return false
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// A non-coordinator node crashes; its shards are reallocated
// and new messages to its entities reach new incarnations elsewhere.
func TestNonCoordinatorCrash(t *testing.T) {
	backends(t, func(t *testing.T, newWorld func(t *testing.T, opts ...actorsharding.Option) *world) {
		// No rebalancing: the test checks that failover alone moves
		// nothing but the dead node's shards.
		w := newWorld(t, actorsharding.WithRebalanceInterval(time.Hour))
		a, b, c := w.startNode(false), w.startNode(false), w.startNode(false)
		w.cluster.WaitConverged(t, 30*time.Second)
		w.waitRegistered(3)
		ids := entityIDs(300)
		before := homesOf(t, a, w, ids, 1)
		var onC []string
		for id, h := range before {
			if h == c.Address() {
				onC = append(onC, id)
			}
		}
		if len(onC) == 0 {
			t.Fatal("no entity on the node to crash")
		}
		c.Crash()
		for _, id := range onC {
			p := askEventually(t, a, w.region(a), id, 2)
			if p.Node == c.Address() {
				t.Fatalf("entity %s still answers from the crashed node", id)
			}
			if w.ledger.Starts(id) != 2 {
				t.Fatalf("entity %s: %d incarnations, want 2", id, w.ledger.Starts(id))
			}
		}
		// Entities on the survivors did not move.
		after := homesOf(t, b, w, ids, 3)
		for id, h := range before {
			if h != c.Address() && after[id] != h {
				t.Fatalf("entity %s moved from %s to %s", id, h, after[id])
			}
		}
		if regs := currentRegions(t, a, w.region(a)); len(regs) != 2 {
			t.Fatalf("CurrentRegions after the crash = %v, want 2", regs)
		}
		checkStatsTotal(t, w, a, len(ids))
	})
}

// checkStatsTotal: the cluster stats count every entity exactly once.
func checkStatsTotal(t *testing.T, w *world, n *testkit.Node, want int) {
	t.Helper()
	testkit.WaitFor(t, 30*time.Second, func() bool {
		cs := clusterStats(t, n, w.region(n))
		total := 0
		for _, st := range cs.Regions {
			if len(st.Failed) > 0 {
				return false
			}
			for _, c := range st.Stats {
				total += int(c)
			}
		}
		return total == want && len(cs.Regions) == len(w.cluster.Running())
	}, "cluster sharding stats never showed %d entities", want)
}

// The coordinator's node crashes; a new coordinator takes over
// with the state from the store; shards on surviving nodes do not move;
// the dead node's shards are reallocated.
func TestCoordinatorCrash(t *testing.T) {
	backends(t, func(t *testing.T, newWorld func(t *testing.T, opts ...actorsharding.Option) *world) {
		// No rebalancing: the test checks that failover alone moves
		// nothing but the dead node's shards.
		w := newWorld(t, actorsharding.WithRebalanceInterval(time.Hour))
		a, b, c := w.startNode(false), w.startNode(false), w.startNode(false)
		w.cluster.WaitConverged(t, 30*time.Second)
		w.waitRegistered(3)
		ids := entityIDs(1000)
		before := homesOf(t, b, w, ids, 1)
		old := w.coordinatorState()
		if old == nil || len(old.State.Shards) != 100 {
			t.Fatalf("coordinator state before the crash: %+v", old)
		}
		a.Crash()
		testkit.WaitFor(t, 60*time.Second, func() bool {
			st := w.coordinatorState()
			return st != nil && st.Name == coordinator.StateActive
		}, "no new active coordinator")
		st := w.coordinatorState()
		// Recovered, not rebuilt: the survivors' shards kept their homes
		// (the dead region's are deallocated at once).
		kept := 0
		for shard, key := range old.State.Shards {
			if key == coordinator.RegionKey(w.region(a)) {
				continue
			}
			if st.State.Shards[shard] != key {
				t.Fatalf("shard %s moved from %s to %q on coordinator failover", shard, key, st.State.Shards[shard])
			}
			kept++
		}
		if kept == 0 {
			t.Fatal("no shard on the survivors")
		}
		for _, id := range ids {
			p := askEventually(t, c, w.region(c), id, 2)
			if before[id] != a.Address() && p.Node != before[id] {
				t.Fatalf("entity %s moved from %s to %s", id, before[id], p.Node)
			}
			if before[id] == a.Address() && p.Node == a.Address() {
				t.Fatalf("entity %s answers from the crashed node", id)
			}
			if before[id] != a.Address() && w.ledger.Starts(id) != 1 {
				t.Fatalf("entity %s on a survivor restarted", id)
			}
		}
		checkStatsTotal(t, w, b, len(ids))
	})
}

// Graceful shutdown of the newest region, of an empty region
// and of the oldest region (which hosts the coordinator).
func TestGracefulShutdown(t *testing.T) {
	// A long rebalance interval keeps the fourth node's region empty.
	w := newLocalWorld(t, actorsharding.WithRebalanceInterval(time.Hour))
	a, b, c := w.startNode(false), w.startNode(false), w.startNode(false)
	w.cluster.WaitConverged(t, 30*time.Second)
	w.waitRegistered(3)
	ids := entityIDs(300)
	homesOf(t, b, w, ids, 1)
	allocated := len(w.coordinatorState().State.Shards)
	empty := w.startNode(false)
	w.cluster.WaitConverged(t, 30*time.Second)
	w.waitRegistered(4)

	leave := func(n *testkit.Node) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := n.Leave(ctx); err != nil {
			t.Fatalf("leave %s: %v", n.Name, err)
		}
	}
	check := func(via *testkit.Node, gone *testkit.Node, seq int64) {
		t.Helper()
		for _, id := range ids {
			p := askEventually(t, via, w.region(via), id, seq)
			if p.Node == gone.Address() {
				t.Fatalf("entity %s answers from %s, which left", id, gone.Name)
			}
		}
		testkit.WaitFor(t, 30*time.Second, func() bool {
			st := w.coordinatorState()
			if st == nil {
				return false
			}
			_, stillThere := st.State.Regions[coordinator.RegionKey(w.region(gone))]
			return !stillThere && len(st.State.Shards) == allocated
		}, "coordinator still lists %s's region", gone.Name)
		checkStatsTotal(t, w, via, len(ids))
	}

	leave(empty)
	check(a, empty, 2)
	leave(c) // the newest region with shards
	check(a, c, 3)
	leave(a) // the oldest: the coordinator moves
	check(b, a, 4)
}

// No allocation until min-nr-of-members regions registered,
// then an even spread.
func TestMinNrOfMembers(t *testing.T) {
	w := newLocalWorld(t, actorsharding.WithMinNrOfMembers(3))
	a, b := w.startNode(false), w.startNode(false)
	w.cluster.WaitConverged(t, 30*time.Second)
	w.waitRegistered(2)
	if _, err := ask(a, w.region(a), "early", 1, 2*time.Second); err == nil {
		t.Fatal("an entity answered before min-nr-of-members regions registered")
	}
	if st := w.coordinatorState(); st == nil || len(st.State.Shards) != 0 {
		t.Fatalf("shards allocated before min-nr-of-members: %+v", st)
	}
	w.startNode(false)
	w.cluster.WaitConverged(t, 30*time.Second)
	// The early message was buffered, not lost.
	testkit.WaitFor(t, 30*time.Second, func() bool { return len(w.received.get("early")) == 1 }, "the early message never arrived")
	homesOf(t, b, w, entityIDs(600), 1)
	counts, total := spread(w.coordinatorState())
	lo, hi := minMax(counts)
	if len(counts) != 3 || total != 100 || hi-lo > 1 {
		t.Fatalf("shards per region %v (total %d), want an even spread of 100 over 3", counts, total)
	}
	checkStatsTotal(t, w, a, 601)
}

// Partial results: while a crashed node is not yet removed,
// GetClusterShardingStats names its shards as failed instead of hanging.
func TestQueriesNameWhatFailed(t *testing.T) {
	skipUnderRace(t)
	backend := testkit.NewLocalBackend()
	backend.FailureDetectionDelay = time.Hour // removed only by the test's cleanup
	w := &world{t: t, cluster: testkit.NewCluster(t, backend), store: coordinatoractor.NewMemoryStore()}
	w.init(nil)
	a, _, c := w.startNode(false), w.startNode(false), w.startNode(false)
	w.cluster.WaitConverged(t, 30*time.Second)
	w.waitRegistered(3)
	homesOf(t, a, w, entityIDs(300), 1)
	cShards := len(w.coordinatorState().State.Regions[coordinator.RegionKey(w.region(c))].Shards)
	if cShards == 0 {
		t.Fatal("no shard on the node to crash")
	}
	c.Crash()
	res, err := a.System.Root.RequestFuture(w.region(a), &messages.GetClusterShardingStats{TimeoutMillis: 1000}, 20*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	cs := res.(*messages.ClusterShardingStats)
	st, ok := cs.Regions[c.Address()]
	if !ok || len(st.Failed) != cShards {
		t.Fatalf("stats for the crashed region: %v, want its %d shards as failed", st, cShards)
	}
	if len(cs.Regions) != 3 {
		t.Fatalf("stats cover %d regions, want 3", len(cs.Regions))
	}
}

// isPing: a dropped Ping, as the region (bare) or a shard (in a Deliver)
// reports it.
func isPing(m any) bool {
	switch d := m.(type) {
	case *shardproto.Deliver:
		m = d.Message
	case *messages.ShardingEnvelope:
		m, _ = d.GetMessage().UnmarshalNew()
	}
	_, ok := m.(*testpb.Ping)
	return ok
}

// The whole cluster leaves at once (here its last two nodes, one running
// the coordinator): no member is left to take the shards, so each region
// stops its own shards instead of waiting for hand-offs that cannot come.
// Both leaves end without error, well within the graceful-shutdown
// timeout, and no entity ever ran twice (the ledger, at cleanup).
func TestWholeClusterLeavesAtOnce(t *testing.T) {
	for round := range 2 {
		t.Run(fmt.Sprintf("round%d", round), func(t *testing.T) {
			w := newLocalWorld(t, actorsharding.WithHandOffTimeout(20*time.Second))
			a, b := w.startNode(false), w.startNode(false)
			w.cluster.WaitConverged(t, 30*time.Second)
			w.waitRegistered(2)
			homes := homesOf(t, b, w, entityIDs(200), 1)
			onA := 0
			for _, h := range homes {
				if h == a.Address() {
					onA++
				}
			}
			if onA == 0 || onA == len(homes) {
				t.Fatalf("entities on a: %d of %d; want both nodes hosting", onA, len(homes))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			errs := make(chan error, 2)
			for _, n := range []*testkit.Node{a, b} {
				go func() { errs <- n.Leave(ctx) }()
			}
			for range 2 {
				if err := <-errs; err != nil {
					t.Errorf("leave: %v", err)
				}
			}
		})
	}
}

// After the coordinator's node crashes, the regions and proxies register
// with the coordinator on the new oldest as soon as it starts: their
// proxies identified the new oldest when the membership changed, and its
// singleton manager tells them the coordinator when it starts. The retry
// interval, far longer here, is only the fallback.
func TestRegionsFindNewCoordinatorAtOnce(t *testing.T) {
	const retryInterval = 10 * time.Second
	w := newLocalWorld(t, actorsharding.WithRetryInterval(retryInterval),
		// The new oldest starts the coordinator a second after the
		// crash: the others identify it before.
		actorsharding.WithCoordinatorSingleton(singleton.WithHandOverRetryInterval(200*time.Millisecond), singleton.WithRemovalMargin(time.Second)))
	a, b, c, d := w.startNode(false), w.startNode(false), w.startNode(false), w.startNode(true)
	w.cluster.WaitConverged(t, 30*time.Second)
	registeredWith := func(on *testkit.Node, nodes ...*testkit.Node) bool {
		for _, n := range nodes {
			st := regionStatus(t, n, w.region(n))
			if !st.GetRegisteredWithCoordinator() || st.GetCoordinator().GetAddress() != on.Address() {
				return false
			}
		}
		return true
	}
	testkit.WaitFor(t, 60*time.Second, func() bool { return registeredWith(a, a, b, c, d) }, "the regions to register with the coordinator on a")

	a.Crash()
	var started time.Time
	testkit.WaitFor(t, 60*time.Second, func() bool {
		st := w.coordinatorState()
		if st != nil && st.Name == coordinator.StateActive && w.cluster.Oldest("") == b {
			started = time.Now()
			return true
		}
		return false
	}, "no coordinator on b")
	for !registeredWith(b, b, c, d) {
		if time.Since(started) > retryInterval {
			t.Fatalf("the regions registered with the coordinator on b only after the retry interval (%v)", retryInterval)
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(started)
	t.Logf("registered with the new coordinator %v after it started", took)
	if took > 2500*time.Millisecond {
		t.Errorf("the regions registered with the new coordinator %v after it started, want well within the retry interval (%v)", took, retryInterval)
	}
}
