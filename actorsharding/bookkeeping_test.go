package actorsharding_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/testkit"
)

// shardPerEntity is an extractor whose shard ID is the entity ID.
type shardPerEntity struct {
	actorsharding.HashCodeMessageExtractor
}

func (shardPerEntity) ShardID(entityID string) string { return entityID }

// With a shard per entity, thousands of entities used once leave a shard
// home and a route each in the region of every node that sent to them.
// Once idle, the sending node forgets those homes and retires the routes;
// the hosting node's entity routes close as its entities passivate. Its
// shards stay, as in Akka: the coordinator allocated them there.
func TestShardPerEntityBookkeepingShrinks(t *testing.T) {
	w := newLocalWorld(t, actorsharding.WithPassivationIdleTimeout(time.Second), actorsharding.WithRebalanceInterval(time.Hour))
	w.extractor = shardPerEntity{actorsharding.NewHashCodeMessageExtractor(1)}
	host := w.startNode(false)
	proxy := w.startNode(true)
	w.cluster.WaitConverged(t, 30*time.Second)
	w.waitRegistered(1)

	const entities = 2000
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for part := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := part; i < entities; i += 8 {
				id := fmt.Sprintf("once-%d", i)
				// The first starts the entity; the second reaches it
				// through the shard while it runs (which opens the
				// entity's route), the third through that route.
				for seq, n := range []*testkit.Node{proxy, host, host} {
					if err := askRetrying(n, w.region(n), id, int64(seq)); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	counts := func(n *testkit.Node) (routes, entityRoutes, homes int) {
		t.Helper()
		routes, entityRoutes, homes, err := actorsharding.RouteCounts(n.System, typeName)
		if err != nil {
			t.Fatalf("route counts of %s: %v", n.Name, err)
		}
		return routes, entityRoutes, homes
	}
	pr, _, ph := counts(proxy)
	hr, he, hh := counts(host)
	t.Logf("after %d entities used: proxy %d routes, %d homes; host %d routes, %d entity routes, %d homes", entities, pr, ph, hr, he, hh)
	if pr < entities || ph < entities {
		t.Fatalf("the proxy has %d routes and %d homes for %d shards used", pr, ph, entities)
	}

	start := time.Now()
	testkit.WaitFor(t, 2*time.Minute, func() bool {
		pr, _, ph = counts(proxy)
		_, he, _ = counts(host)
		return pr == 0 && ph == 0 && he == 0
	}, "the idle bookkeeping to go: %v", lazy(func() string {
		return fmt.Sprintf("proxy %d routes, %d homes; host %d entity routes", pr, ph, he)
	}))
	hr, _, hh = counts(host)
	t.Logf("idle %v later: proxy %d routes, %d homes; host %d routes, %d entity routes, %d homes (its shards run on)",
		time.Since(start).Round(time.Second), pr, ph, hr, he, hh)

	// An entity whose home was forgotten is found again.
	if p := askEventually(t, proxy, w.region(proxy), "once-7", 4); p.Node != host.Address() {
		t.Fatalf("once-7 answered from %s, want the host %s", p.Node, host.Address())
	}
}

// askRetrying asks until the entity answers, for a minute at most: what
// askEventually does, for goroutines other than the test's.
func askRetrying(n *testkit.Node, region *actor.PID, id string, seq int64) error {
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := ask(n, region, id, seq, 2*time.Second)
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}

// lazy formats when printed, so a message shows what was seen last.
type lazy func() string

func (l lazy) String() string { return l() }
