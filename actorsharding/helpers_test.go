package actorsharding_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/actorsharding/consulstore"
	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/coordinator"
	"github.com/protoshard/protoshard/internal/raceflag"
	"github.com/protoshard/protoshard/internal/shardingadmin"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/internal/testsupport"
	"github.com/protoshard/protoshard/membership/consul"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/shardactor"
	"github.com/protoshard/protoshard/singleton"
	"github.com/protoshard/protoshard/testkit"
)

const typeName = "Counter"

// world is one sharding test: a cluster of nodes, the shared coordinator
// state store, the activation ledger and what every entity received.
type world struct {
	t        *testing.T
	cluster  *testkit.Cluster
	consul   bool
	backend  *testkit.ConsulBackend      // consul worlds only
	local    *testkit.LocalBackend       // local worlds only
	store    coordinatoractor.StateStore // nil: the default (no WithStateStore)
	ledger   *testkit.Ledger
	received *received
	shards   int
	opts     []actorsharding.Option
	// extractor: nil for a HashCodeMessageExtractor of shards shards.
	extractor actorsharding.MessageExtractor

	mu      sync.Mutex
	regions map[*testkit.Node]*actor.PID
	drops   []*deadletter.Event

	// nodeOpts are passed to the next nodes startNode starts.
	nodeOpts []testkit.NodeOption

	// stopping and release let a test hold an entity in its stop message.
	stopping chan string
	release  chan struct{}
}

func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceflag.Enabled {
		t.Skip("several proto.actor remotes in one process race on grpc's global logger; runs in the non-race pass")
	}
}

func newLocalWorld(t *testing.T, opts ...actorsharding.Option) *world {
	skipUnderRace(t)
	b := testkit.NewLocalBackend()
	w := &world{t: t, cluster: testkit.NewCluster(t, b), local: b, store: coordinatoractor.NewMemoryStore()}
	return w.init(opts)
}

// newPausableWorld is a local world whose nodes the test can pause
// (testsupport.PausableBackend, with the failure detection timeout timeout).
func newPausableWorld(t *testing.T, timeout time.Duration, opts ...actorsharding.Option) (*world, *testsupport.PausableBackend) {
	skipUnderRace(t)
	b := testsupport.NewPausableBackend(timeout)
	w := &world{t: t, cluster: testkit.NewCluster(t, b), store: coordinatoractor.NewMemoryStore()}
	return w.init(opts), b
}

func newConsulWorld(t *testing.T, opts ...actorsharding.Option) *world {
	skipUnderRace(t)
	b := testkit.NewConsulBackend(t)
	return newConsulWorldOf(t, testkit.NewCluster(t, b), b, opts)
}

// newConsulWorldOf is a world of cluster over Consul backend b: several
// nodes in this process (newConsulWorld), or this child process's one.
func newConsulWorldOf(t *testing.T, cluster *testkit.Cluster, b *testkit.ConsulBackend, opts []actorsharding.Option) *world {
	w := &world{t: t, cluster: cluster, consul: true, backend: b,
		store: consulstore.NewStateStore(b.Client(), consul.DefaultServiceName, typeName)}
	return w.init(opts)
}

func (w *world) init(opts []actorsharding.Option) *world {
	w.ledger = testkit.NewLedger()
	w.received = &received{byEntity: map[string][]int64{}}
	w.shards = 100
	w.regions = map[*testkit.Node]*actor.PID{}
	w.stopping = make(chan string, 16)
	w.release = make(chan struct{})
	coordinatorSingleton := []singleton.Option{singleton.WithHandOverRetryInterval(200 * time.Millisecond)}
	if w.consul {
		// at least the TTL the test kit's Consul backend uses
		coordinatorSingleton = append(coordinatorSingleton, singleton.WithRemovalMargin(3*time.Second))
	}
	w.opts = append([]actorsharding.Option{
		actorsharding.WithRetryInterval(200 * time.Millisecond),
		actorsharding.WithRebalanceInterval(500 * time.Millisecond),
		actorsharding.WithHandOffTimeout(15 * time.Second),
		actorsharding.WithShardStartTimeout(2 * time.Second),
		actorsharding.WithCoordinatorSingleton(coordinatorSingleton...),
	}, opts...)
	if w.store != nil { // nil: the default store
		w.opts = append([]actorsharding.Option{actorsharding.WithStateStore(w.store)}, w.opts...)
	}
	w.t.Cleanup(func() { w.ledger.AssertNoOverlap(w.t) })
	return w
}

// startNode starts a node and its region (proxy: a proxy-only region).
func (w *world) startNode(proxy bool, opts ...actorsharding.Option) *testkit.Node {
	w.t.Helper()
	n := w.cluster.StartNode(w.nodeOpts...)
	n.System.EventStream.Subscribe(func(e any) {
		if d, ok := e.(*deadletter.Event); ok {
			w.mu.Lock()
			w.drops = append(w.drops, d)
			w.mu.Unlock()
		}
	})
	s, err := actorsharding.New(n.System, n.Membership)
	if err != nil {
		w.t.Fatal(err)
	}
	all := append(slices.Clone(w.opts), opts...)
	var extractor actorsharding.MessageExtractor = actorsharding.NewHashCodeMessageExtractor(w.shards)
	if w.extractor != nil {
		extractor = w.extractor
	}
	var pid *actor.PID
	if proxy {
		pid, err = s.StartProxy(typeName, extractor, all...)
	} else {
		pid, err = s.StartRegion(typeName, w.entityProps(n), extractor, all...)
	}
	if err != nil {
		w.t.Fatal(err)
	}
	w.mu.Lock()
	w.regions[n] = pid
	w.mu.Unlock()
	return n
}

func (w *world) region(n *testkit.Node) *actor.PID {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.regions[n]
}

func (w *world) dropped() []*deadletter.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.drops)
}

// entityProps: the test entity records its life in the ledger and every
// Ping in received, and answers it with a Pong naming its node.
func (w *world) entityProps(n *testkit.Node) *actor.Props {
	return actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			w.ledger.Started(entityKey(ctx), incarnation(ctx))
		case *actor.Stopped:
			w.ledger.Stopped(entityKey(ctx), incarnation(ctx))
		case *testpb.Ping:
			switch m.Seq {
			case passivateSeq:
				if err := actorsharding.Passivate(ctx, nil); err != nil {
					w.t.Errorf("Passivate: %v", err)
				}
				return
			case slowPassivateSeq:
				if err := actorsharding.Passivate(ctx, &testpb.Ping{EntityId: m.EntityId, Seq: slowStopSeq}); err != nil {
					w.t.Errorf("Passivate: %v", err)
				}
				return
			case slowStopSeq:
				// The shard sent the stop message: it holds what comes next.
				w.stopping <- m.EntityId
				<-w.release
				ctx.Stop(ctx.Self())
				return
			case stopSeq:
				ctx.Stop(ctx.Self())
				return
			case flushAndStopSeq:
				// A hand-off stop message: "flush" (record it), then stop.
				w.received.add(entityKey(ctx), flushAndStopSeq)
				ctx.Stop(ctx.Self())
				return
			case panicSeq:
				panic("test entity told to fail")
			}
			// An EntityRef's Ping may name no entity: the entity's own ID.
			id := m.EntityId
			if id == "" {
				id = entityKey(ctx)
			}
			w.received.addAt(id, m.Seq, n.Name)
			if ctx.Sender() == nil {
				return // sent, not asked: no answer to dead-letter
			}
			ctx.Respond(&testpb.Pong{EntityId: m.EntityId, Seq: m.Seq, Node: n.Address(), Incarnation: incarnation(ctx)})
		}
	})
}

// incarnation names one live actor for the ledger: its PID and its
// context, since an entity's next incarnation has the same PID (a shard
// and its entities are named by their IDs).
func incarnation(ctx actor.Context) string {
	return fmt.Sprintf("%s@%p", ctx.Self(), ctx)
}

// entityKey is the entity ID as the ledger knows it: the last part of the
// entity's PID is its escaped ID.
func entityKey(ctx actor.Context) string {
	id := ctx.Self().Id
	return id[strings.LastIndex(id, "/")+1:]
}

type received struct {
	mu       sync.Mutex
	byEntity map[string][]int64
	where    map[string][]string // by entity, the node of each of byEntity's
}

func (r *received) add(id string, seq int64) { r.addAt(id, seq, "") }

func (r *received) addAt(id string, seq int64, node string) {
	r.mu.Lock()
	r.byEntity[id] = append(r.byEntity[id], seq)
	if r.where == nil {
		r.where = map[string][]string{}
	}
	r.where[id] = append(r.where[id], node)
	r.mu.Unlock()
}

// trail describes where entity id received its messages: runs of
// sequence numbers per node, in the order received.
func (r *received) trail(id string, only func(int64) bool) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	seqs, nodes := r.byEntity[id], r.where[id]
	for i := 0; i < len(seqs); {
		if !only(seqs[i]) {
			i++
			continue
		}
		j := i
		for j+1 < len(seqs) && nodes[j+1] == nodes[i] && only(seqs[j+1]) && seqs[j+1] == seqs[j]+1 {
			j++
		}
		out = append(out, fmt.Sprintf("%s:%d-%d", nodes[i], seqs[i]&(1<<32-1), seqs[j]&(1<<32-1)))
		i = j + 1
	}
	return strings.Join(out, " ")
}

func (r *received) get(id string) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.byEntity[id])
}

func (r *received) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.byEntity {
		n += len(s)
	}
	return n
}

// ask sends Ping through region and waits for the Pong.
func ask(n *testkit.Node, region *actor.PID, id string, seq int64, timeout time.Duration) (*testpb.Pong, error) {
	res, err := n.System.Root.RequestFuture(region, &testpb.Ping{EntityId: id, Seq: seq}, timeout).Result()
	if err != nil {
		return nil, err
	}
	p, ok := res.(*testpb.Pong)
	if !ok {
		return nil, fmt.Errorf("answer is %T", res)
	}
	return p, nil
}

// askEventually retries until the entity answers (during a hand-off or a
// crash the first tries may be lost: at-most-once).
func askEventually(t *testing.T, n *testkit.Node, region *actor.PID, id string, seq int64) *testpb.Pong {
	t.Helper()
	var pong *testpb.Pong
	testkit.WaitFor(t, 60*time.Second, func() bool {
		p, err := ask(n, region, id, seq, 2*time.Second)
		pong = p
		return err == nil
	}, "entity %s never answered through %s", id, n.Name)
	return pong
}

func entityIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("e-%d", i)
	}
	return out
}

// regionStats asks a region for its per-shard entity counts.
func regionStats(t *testing.T, n *testkit.Node, region *actor.PID) *messages.ShardRegionStats {
	t.Helper()
	res, err := n.System.Root.RequestFuture(region, &messages.GetShardRegionStats{}, 10*time.Second).Result()
	if err != nil {
		t.Fatalf("GetShardRegionStats on %s: %v", n.Name, err)
	}
	return res.(*messages.ShardRegionStats)
}

func clusterStats(t *testing.T, n *testkit.Node, region *actor.PID) *messages.ClusterShardingStats {
	t.Helper()
	res, err := n.System.Root.RequestFuture(region, &messages.GetClusterShardingStats{TimeoutMillis: 5000}, 15*time.Second).Result()
	if err != nil {
		t.Fatalf("GetClusterShardingStats on %s: %v", n.Name, err)
	}
	return res.(*messages.ClusterShardingStats)
}

func currentRegions(t *testing.T, n *testkit.Node, region *actor.PID) []string {
	t.Helper()
	res, err := n.System.Root.RequestFuture(region, &messages.GetCurrentRegions{}, 10*time.Second).Result()
	if err != nil {
		t.Fatalf("GetCurrentRegions on %s: %v", n.Name, err)
	}
	out := slices.Clone(res.(*messages.CurrentRegions).Addresses)
	sort.Strings(out)
	return out
}

// coordinatorState asks the coordinator (on the oldest node) for its state.
func (w *world) coordinatorState() *coordinator.CurrentCoordinatorState {
	w.t.Helper()
	oldest := w.cluster.Oldest("")
	if oldest == nil {
		w.t.Fatal("no oldest node")
	}
	pid := actor.NewPID(oldest.Address(), shardingadmin.CoordinatorManagerName(typeName)+"/singleton/coordinator")
	res, err := oldest.System.Root.RequestFuture(pid, &coordinator.GetCoordinatorState{}, 10*time.Second).Result()
	if err != nil {
		return nil
	}
	st, _ := res.(*coordinator.CurrentCoordinatorState)
	return st
}

func pingMsg(id string, seq int64) *testpb.Ping { return &testpb.Ping{EntityId: id, Seq: seq} }

// regionsAgreeWithCoordinator returns "" when the shards each running
// region hosts are exactly those the coordinator allocated to it, else the
// differences.
func (w *world) regionsAgreeWithCoordinator() string {
	st := w.coordinatorState()
	if st == nil {
		return "no coordinator state"
	}
	var diffs []string
	for _, n := range w.cluster.Running() {
		key := coordinator.RegionKey(w.region(n))
		want := map[string]bool{}
		for _, s := range st.State.Regions[key].Shards {
			want[s] = true
		}
		got := regionStats(w.t, n, w.region(n))
		for s := range got.Stats {
			if !want[s] {
				diffs = append(diffs, fmt.Sprintf("%s hosts %s, allocated to %s", n.Name, s, st.State.Shards[s]))
			}
			delete(want, s)
		}
		for s := range want {
			diffs = append(diffs, fmt.Sprintf("%s does not host its shard %s", n.Name, s))
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs, "; ")
}

// waitRegistered waits until the coordinator has n regions registered:
// membership converges before the regions have registered.
func (w *world) waitRegistered(n int) {
	w.t.Helper()
	testkit.WaitFor(w.t, 60*time.Second, func() bool {
		st := w.coordinatorState()
		return st != nil && len(st.State.Regions) == n
	}, "coordinator never had %d regions registered", n)
}

// consulRememberStore is a remember-entities store in the world's Consul.
func (w *world) consulRememberStore() shardactor.RememberEntitiesStore {
	return consulstore.NewRememberEntitiesStore(w.backend.Client(), consul.DefaultServiceName, typeName)
}

// requestWithin is ref.Request under a context that ends after d.
func requestWithin(ref actorsharding.EntityRef, msg any, d time.Duration) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return ref.Request(ctx, msg)
}
