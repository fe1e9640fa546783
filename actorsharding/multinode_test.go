package actorsharding_test

import (
	"testing"

	"time"

	"github.com/protoshard/protoshard/actorsharding"

	"github.com/protoshard/protoshard/testkit"
)

// backends runs a test over local membership and over a real Consul.
func backends(t *testing.T, fn func(t *testing.T, newWorld func(t *testing.T, opts ...actorsharding.Option) *world)) {
	t.Run("local", func(t *testing.T) { fn(t, newLocalWorld) })
	t.Run("consul", func(t *testing.T) { fn(t, newConsulWorld) })
}

// With two and three nodes, entities live on every node, a
// message sent to any node's region reaches the one entity, and a
// proxy-only node routes but hosts nothing.
func TestTwoAndThreeNodes(t *testing.T) {
	backends(t, func(t *testing.T, newWorld func(t *testing.T, opts ...actorsharding.Option) *world) {
		// No rebalancing here: it would move (and so restart) entities
		// while the test counts them; TestRebalanceOnJoin covers it.
		w := newWorld(t, actorsharding.WithRebalanceInterval(time.Hour))
		nodes := []*testkit.Node{w.startNode(false), w.startNode(false)}
		w.cluster.WaitConverged(t, 30*time.Second)
		w.waitRegistered(2)
		ids := entityIDs(200)
		check := func(want int) {
			t.Helper()
			homes := map[string]string{} // entity -> node address
			for i, id := range ids {
				for j, n := range w.cluster.Running() {
					p := askEventually(t, n, w.region(n), id, int64(i*10+j))
					if h, ok := homes[id]; ok && h != p.Node {
						t.Fatalf("entity %s answered from %s and from %s", id, h, p.Node)
					}
					homes[id] = p.Node
				}
			}
			perNode := map[string]int{}
			for _, h := range homes {
				perNode[h]++
			}
			if len(perNode) != want {
				t.Fatalf("entities live on %d nodes (%v), want %d", len(perNode), perNode, want)
			}
			for _, id := range ids {
				if s := w.ledger.Starts(id); s != 1 {
					t.Fatalf("entity %s started %d times", id, s)
				}
			}
		}
		check(2)
		nodes = append(nodes, w.startNode(false))
		w.cluster.WaitConverged(t, 30*time.Second)
		w.waitRegistered(3)
		// New entities spread over all three (the new node takes the new
		// shards as the least loaded region).
		ids = append(ids, entityIDs(400)[200:]...)
		check(3)

		proxy := w.startNode(true)
		w.cluster.WaitConverged(t, 30*time.Second)
		for i, id := range ids[:100] {
			p := askEventually(t, proxy, w.region(proxy), id, int64(10000+i))
			if p.Node == proxy.Address() {
				t.Fatalf("entity %s runs on the proxy node", id)
			}
		}
		if st := regionStats(t, proxy, w.region(proxy)); len(st.Stats) != 0 {
			t.Fatalf("proxy hosts shards: %v", st.Stats)
		}
		regions := currentRegions(t, nodes[0], w.region(nodes[0]))
		if len(regions) != 3 {
			t.Fatalf("CurrentRegions = %v, want the 3 region nodes", regions)
		}
		cs := clusterStats(t, proxy, w.region(proxy))
		total := 0
		for addr, st := range cs.Regions {
			if len(st.Failed) != 0 {
				t.Fatalf("region %s failed shards %v", addr, st.Failed)
			}
			for _, c := range st.Stats {
				total += int(c)
			}
		}
		if len(cs.Regions) != 3 || total != len(ids) {
			t.Fatalf("ClusterShardingStats: %d regions, %d entities; want 3, %d", len(cs.Regions), total, len(ids))
		}
	})
}
