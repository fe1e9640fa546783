package actorsharding_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/coordinator"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/testkit"
)

// refusedOn reports whether the region of node n published the dead-letter
// event of a refused registration (ErrIncompatibleExtractor).
func (w *world) refusedOn(n *testkit.Node) bool {
	for _, d := range w.dropped() {
		reg, ok := d.Message.(*messages.Register)
		if ok && errors.Is(d.Err, actorsharding.ErrIncompatibleExtractor) && reg.GetShardRegion().GetAddress() == n.Address() {
			return true
		}
	}
	return false
}

// A rolling deploy from 100 to 1000 shards: the new node's region would
// put most entities in shards the old nodes do not use, allocated to it
// as the least loaded region, and start them a second time next to the
// old nodes' incarnations. The coordinator refuses it instead: it hosts
// nothing, and what is sent through it waits; the entities stay where
// they are. Once the old nodes have left, it registers and hosts them.
func TestRollingDeployWithAnotherNumberOfShards(t *testing.T) {
	w := newLocalWorld(t, actorsharding.WithRebalanceInterval(time.Hour))
	a, b := w.startNode(false), w.startNode(false)
	w.cluster.WaitConverged(t, 30*time.Second)
	w.waitRegistered(2)
	ids := entityIDs(60)
	for i, id := range ids {
		askEventually(t, a, w.region(a), id, int64(i))
	}

	w.shards = 1000
	c := w.startNode(false)
	w.cluster.WaitConverged(t, 30*time.Second)
	// Sent through the new node: registered, it would start most of them
	// on itself.
	for i, id := range ids {
		c.System.Root.Send(w.region(c), pingMsg(id, int64(1000+i)))
	}
	for i, id := range ids[:5] {
		if p, err := ask(c, w.region(c), id, int64(2000+i), 2*time.Second); err == nil {
			t.Errorf("entity %s answered from %s through the refused region", id, p.Node)
		}
	}
	testkit.WaitFor(t, 30*time.Second, func() bool { return w.refusedOn(c) },
		"no refused registration reported on the node with 1000 shards")
	if st := regionStats(t, c, w.region(c)); len(st.Stats) != 0 {
		t.Fatalf("the refused region hosts shards: %v", st.Stats)
	}
	if st := w.coordinatorState(); st == nil || st.State.IsRegion(w.region(c)) || len(st.State.Regions) != 2 {
		t.Fatalf("coordinator state with the refused region: %+v", st)
	}
	// Through the old nodes and the new one's refusal, the entities run
	// once, where they ran.
	for i, id := range ids {
		for _, n := range []*testkit.Node{a, b} {
			if p := askEventually(t, n, w.region(n), id, int64(3000+i)); p.Node == c.Address() {
				t.Fatalf("entity %s answered from the refused node", id)
			}
		}
		if s := w.ledger.Starts(id); s != 1 {
			t.Fatalf("entity %s started %d times", id, s)
		}
	}

	// The old nodes leave: the new one registers (it keeps trying), with
	// the coordinator that moved to it, and hosts the entities.
	for _, n := range []*testkit.Node{a, b} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if err := n.Leave(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	w.waitRegistered(1)
	for i, id := range ids {
		if p := askEventually(t, c, w.region(c), id, int64(4000+i)); p.Node != c.Address() {
			t.Fatalf("entity %s answered from %s, want the remaining node", id, p.Node)
		}
	}
}

// A full restart with another number of shards: the coordinator starts
// from the stored state, whose regions (with 100 shards) are gone, and
// accepts the new ones.
func TestFullRestartWithAnotherNumberOfShards(t *testing.T) {
	w := newLocalWorld(t, actorsharding.WithRebalanceInterval(time.Hour))
	old := []*testkit.Node{w.startNode(false), w.startNode(false)}
	w.cluster.WaitConverged(t, 30*time.Second)
	w.waitRegistered(2)
	ids := entityIDs(20)
	for i, id := range ids {
		askEventually(t, old[0], w.region(old[0]), id, int64(i))
	}
	stored, _, err := coordinator.LoadState(context.Background(), w.store)
	if err != nil {
		t.Fatal(err)
	}
	hundred := coordinator.ExtractorIdentity{Name: "hash-code", NumberOfShards: 100}
	if len(stored.Regions) != 2 {
		t.Fatalf("stored regions: %+v, want 2", stored.Regions)
	}
	for _, r := range stored.Regions {
		if r.Extractor != hundred {
			t.Fatalf("stored region %s has extractor %v, want %v", r.PID, r.Extractor, hundred)
		}
	}
	for _, n := range old {
		n.Crash()
	}
	// The crashed nodes' regions may have told the coordinator they
	// stopped; a process that dies does not: the state keeps them.
	_, v, err := w.store.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := coordinator.SaveState(context.Background(), w.store, stored, v); err != nil {
		t.Fatal(err)
	}

	w.shards = 1000
	fresh := []*testkit.Node{w.startNode(false), w.startNode(false)}
	w.cluster.WaitConverged(t, 30*time.Second)
	testkit.WaitFor(t, 60*time.Second, func() bool {
		st := w.coordinatorState()
		return st != nil && len(st.State.Regions) == 2 && st.State.IsRegion(w.region(fresh[0])) && st.State.IsRegion(w.region(fresh[1]))
	}, "the regions with 1000 shards never registered (refused on one of them: %v)", func() bool { return w.refusedOn(fresh[0]) || w.refusedOn(fresh[1]) })
	for i, id := range ids {
		for _, n := range fresh {
			askEventually(t, n, w.region(n), id, int64(100+i))
		}
	}
	st := w.coordinatorState()
	for _, r := range st.State.Regions {
		if r.Extractor != (coordinator.ExtractorIdentity{Name: "hash-code", NumberOfShards: 1000}) {
			t.Fatalf("region %s registered with %v", r.PID, r.Extractor)
		}
	}
	for _, n := range fresh {
		if w.refusedOn(n) {
			t.Fatalf("the region of %s was refused", n.Name)
		}
	}
}
