package actorsharding_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/shardactor"
	"github.com/protoshard/protoshard/testkit"
)

// passivateSeq: a Ping with this Seq makes the test entity passivate itself.
const passivateSeq = -1

// onNode lists the ids whose home (from homesOf) is n.
func onNode(homes map[string]string, n *testkit.Node) []string {
	var out []string
	for id, h := range homes {
		if h == n.Address() {
			out = append(out, id)
		}
	}
	return out
}

// waitRestartedElsewhere waits until each id runs again (a new incarnation,
// without any message sent to it) on a node other than gone.
func waitRestartedElsewhere(t *testing.T, w *world, ids []string, gone *testkit.Node, starts int) {
	t.Helper()
	for _, id := range ids {
		testkit.WaitFor(t, 60*time.Second, func() bool {
			alive := w.ledger.Active(id)
			return w.ledger.Starts(id) == starts && len(alive) == 1 && !strings.Contains(alive[0], gone.Address())
		}, "remembered entity %s did not start again elsewhere (starts %v, active %v)", id,
			testkit.Lazy(func() any { return w.ledger.Starts(id) }), testkit.Lazy(func() any { return w.ledger.Active(id) }))
	}
}

func rememberOpts(store shardactor.RememberEntitiesStore) []actorsharding.Option {
	return []actorsharding.Option{
		actorsharding.WithRememberEntities(store),
		// Rebalancing would move (and restart) entities on its own.
		actorsharding.WithRebalanceInterval(time.Hour),
	}
}

// Remember-entities: the entities of a crashed node start again on the
// others, without a message; an entity stopped by Passivate stays stopped.
func TestRememberEntitiesAfterCrash(t *testing.T) {
	w := newLocalWorld(t, rememberOpts(shardactor.NewMemoryRememberEntitiesStore())...)
	a, _, c := w.startNode(false), w.startNode(false), w.startNode(false)
	w.cluster.WaitConverged(t, 30*time.Second)
	w.waitRegistered(3)
	homes := homesOf(t, a, w, entityIDs(90), 1)
	onC := onNode(homes, c)
	if len(onC) < 2 {
		t.Fatalf("only %d entities on the node to crash", len(onC))
	}
	passivated := onC[0]
	a.System.Root.Send(w.region(a), pingMsg(passivated, passivateSeq))
	testkit.WaitFor(t, 30*time.Second, func() bool { return len(w.ledger.Active(passivated)) == 0 }, "entity did not passivate")
	c.Crash()
	waitRestartedElsewhere(t, w, onC[1:], c, 2)
	if s := w.ledger.Starts(passivated); s != 1 {
		t.Fatalf("the passivated entity started %d times, want 1 (it is forgotten)", s)
	}
	for id, h := range homes {
		if h != c.Address() && w.ledger.Starts(id) != 1 {
			t.Fatalf("entity %s on a survivor restarted", id)
		}
	}
}

// Remember-entities after a coordinator failover: the oldest node (with the
// coordinator) crashes; its entities start elsewhere, the rest stay put.
func TestRememberEntitiesAfterCoordinatorFailover(t *testing.T) {
	w := newLocalWorld(t, rememberOpts(shardactor.NewMemoryRememberEntitiesStore())...)
	a, b, _ := w.startNode(false), w.startNode(false), w.startNode(false)
	w.cluster.WaitConverged(t, 30*time.Second)
	w.waitRegistered(3)
	homes := homesOf(t, b, w, entityIDs(90), 1)
	a.Crash()
	waitRestartedElsewhere(t, w, onNode(homes, a), a, 2)
	for id, h := range homes {
		if h != a.Address() && w.ledger.Starts(id) != 1 {
			t.Fatalf("entity %s on a survivor restarted", id)
		}
	}
}

// fullRestart stops every node crash-style and starts n new ones on the
// same stores, with numberOfShards shards. The nodes crash one after the
// other, so the last ones may restart the first ones' entities before they
// crash too: what counts is that every entity runs again afterwards.
func fullRestart(t *testing.T, w *world, n, numberOfShards int) []*testkit.Node {
	t.Helper()
	for _, node := range w.cluster.Running() {
		node.Crash()
	}
	w.shards = numberOfShards
	var nodes []*testkit.Node
	for range n {
		nodes = append(nodes, w.startNode(false))
	}
	w.cluster.WaitConverged(t, 60*time.Second)
	return nodes
}

// waitRunningAgain waits until every id has exactly one incarnation, on one
// of nodes, started after the restart (more starts than before).
func waitRunningAgain(t *testing.T, w *world, ids []string, before map[string]int, nodes []*testkit.Node, timeout time.Duration) {
	t.Helper()
	on := func(inc string) bool {
		for _, n := range nodes {
			if strings.Contains(inc, n.Address()) {
				return true
			}
		}
		return false
	}
	for _, id := range ids {
		testkit.WaitFor(t, timeout, func() bool {
			alive := w.ledger.Active(id)
			return w.ledger.Starts(id) > before[id] && len(alive) == 1 && on(alive[0])
		}, "remembered entity %s did not run again after the restart (starts %v, before %d, active %v)", id,
			testkit.Lazy(func() any { return w.ledger.Starts(id) }), before[id], testkit.Lazy(func() any { return w.ledger.Active(id) }))
	}
}

func startCounts(w *world, ids []string) map[string]int {
	out := map[string]int{}
	for _, id := range ids {
		out[id] = w.ledger.Starts(id)
	}
	return out
}

// Remember-entities survive a full cluster restart with a real Consul:
// membership, coordinator state and remembered entities all in Consul.
func TestRememberEntitiesFullRestartConsul(t *testing.T) {
	w := newConsulWorld(t)
	w.opts = append(w.opts, rememberOpts(w.consulRememberStore())...)
	a := w.startNode(false)
	w.startNode(false)
	w.cluster.WaitConverged(t, 30*time.Second)
	w.waitRegistered(2)
	ids := entityIDs(40)
	homesOf(t, a, w, ids, 1)
	before := startCounts(w, ids)
	nodes := fullRestart(t, w, 2, w.shards)
	waitRunningAgain(t, w, ids, before, nodes, 90*time.Second)
}

// Changing the number of shards between restarts still starts every
// remembered entity, on its new shard (Akka's
// ClusterShardingRememberEntitiesNewExtractorSpec).
func TestRememberEntitiesNewNumberOfShards(t *testing.T) {
	w := newLocalWorld(t, rememberOpts(shardactor.NewMemoryRememberEntitiesStore())...)
	w.shards = 10
	a := w.startNode(false)
	w.startNode(false)
	w.cluster.WaitConverged(t, 30*time.Second)
	w.waitRegistered(2)
	ids := entityIDs(60)
	homesOf(t, a, w, ids, 1)
	before := startCounts(w, ids)
	nodes := fullRestart(t, w, 2, 7)
	w.waitRegistered(2)
	waitRunningAgain(t, w, ids, before, nodes, 60*time.Second)
	// Each runs in the shard the new extractor names.
	extractor := actorsharding.NewHashCodeMessageExtractor(7)
	want := map[string]int{}
	for _, id := range ids {
		want[extractor.ShardID(id)]++
	}
	got := map[string]int{}
	for _, n := range nodes {
		for shard, count := range regionStats(t, n, w.region(n)).Stats {
			got[shard] += int(count)
		}
	}
	for shard, count := range want {
		if got[shard] != count {
			t.Fatalf("shard %s runs %d entities, want %d (got %v, want %v)", shard, got[shard], count, got, want)
		}
	}
}

// Akka's constant entity-recovery-strategy: the remembered entities of a
// crashed node start again elsewhere a few at a time, all of them.
func TestRememberEntitiesConstantRecovery(t *testing.T) {
	opts := append(rememberOpts(shardactor.NewMemoryRememberEntitiesStore()),
		actorsharding.WithEntityRecoveryConstantRate(2, 50*time.Millisecond))
	w := newLocalWorld(t, opts...)
	w.shards = 3 // several entities per shard, so a shard recovers in several batches
	a, _ := w.startNode(false), w.startNode(false)
	w.cluster.WaitConverged(t, 30*time.Second)
	w.waitRegistered(2)
	b := w.cluster.Running()[1]
	homes := homesOf(t, a, w, entityIDs(30), 1)
	onB := onNode(homes, b)
	if len(onB) < 3 {
		t.Fatalf("only %d entities on the node to crash", len(onB))
	}
	b.Crash()
	waitRestartedElsewhere(t, w, onB, b, 2)
}

// refusingStore refuses for good to remember the entities whose ID starts
// with "refused", as a store refuses an ID it can never hold.
type refusingStore struct {
	shardactor.RememberEntitiesStore
}

func (s refusingStore) Update(ctx context.Context, shardID string, started, stopped []string) error {
	for _, id := range started {
		if strings.HasPrefix(id, "refused") {
			return fmt.Errorf("entity ID %q: %w", id, shardactor.ErrPermanent)
		}
	}
	return s.RememberEntitiesStore.Update(ctx, shardID, started, stopped)
}

// A shard whose store refuses a write for good drops the message with the
// reason and stops; its region starts it again after the shard-failure
// back-off, and its remembered entities run again without a message.
func TestRememberEntitiesShardRestartsAfterStoreFailure(t *testing.T) {
	opts := append(rememberOpts(refusingStore{shardactor.NewMemoryRememberEntitiesStore()}),
		actorsharding.WithShardFailureBackoff(500*time.Millisecond))
	w := newLocalWorld(t, opts...)
	w.shards = 1 // every entity in one shard
	n := w.startNode(false)
	w.waitRegistered(1)
	askEventually(t, n, w.region(n), "kept", 1)

	n.System.Root.Send(w.region(n), pingMsg("refused", 1))
	testkit.WaitFor(t, 30*time.Second, func() bool {
		for _, d := range w.dropped() {
			if strings.Contains(d.Reason, `cannot remember entity "refused"`) && strings.Contains(d.Reason, "permanent") {
				return true
			}
		}
		return false
	}, "the refused entity's message was not dropped with the reason (%v)", testkit.Lazy(func() any { return w.dropped() }))
	testkit.WaitFor(t, 30*time.Second, func() bool { return w.ledger.Starts("kept") == 2 && len(w.ledger.Active("kept")) == 1 },
		"the remembered entity did not start again with its shard (starts %v)", testkit.Lazy(func() any { return w.ledger.Starts("kept") }))
	if got := w.ledger.Starts("refused"); got != 0 {
		t.Fatalf("the refused entity started %d times", got)
	}
	askEventually(t, n, w.region(n), "kept", 2)
}
