package actorsharding_test

import (
	"sync"
	"testing"
	"time"

	"github.com/protoshard/protoshard/testkit"
)

// One node, 1000 entities in 100 shards; every message
// arrives, and request/response through the region works.
func TestOneNodeThousandEntities(t *testing.T) {
	w := newLocalWorld(t)
	n := w.startNode(false)
	region := w.region(n)

	ids := entityIDs(1000)
	var wg sync.WaitGroup
	errs := make(chan error, len(ids))
	for _, id := range ids {
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			p, err := ask(n, region, id, 1, 30*time.Second)
			if err != nil {
				errs <- err
				return
			}
			if p.EntityId != id || p.Seq != 1 || p.Node != n.Address() {
				t.Errorf("wrong answer for %s: %v", id, p)
			}
		}(id)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("request/response failed: %v", err)
	}
	// Fire-and-forget: every message arrives, in order per entity.
	for seq := int64(2); seq <= 5; seq++ {
		for _, id := range ids {
			n.System.Root.Send(region, pingMsg(id, seq))
		}
	}
	testkit.WaitFor(t, 60*time.Second, func() bool { return w.received.total() == 5*len(ids) },
		"received %d of %d", testkit.Lazy(func() any { return w.received.total() }), 5*len(ids))
	for _, id := range ids {
		got := w.received.get(id)
		if len(got) != 5 || got[1] != 2 || got[4] != 5 {
			t.Fatalf("entity %s received %v, want [1 2 3 4 5]", id, got)
		}
	}
	st := regionStats(t, n, region)
	if len(st.Stats) != 100 {
		t.Fatalf("shards hosted = %d, want 100", len(st.Stats))
	}
	total := 0
	for _, c := range st.Stats {
		total += int(c)
	}
	if total != 1000 || len(st.Failed) != 0 {
		t.Fatalf("entities = %d (failed %v), want 1000", total, st.Failed)
	}
	for _, id := range ids[:10] {
		if s := w.ledger.Starts(id); s != 1 {
			t.Fatalf("entity %s started %d times", id, s)
		}
	}
}
