package actorsharding_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/hashicorp/consul/api"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/actorsharding/consulstore"
	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/coordinator"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
	"github.com/protoshard/protoshard/testkit"
)

// role: StartRegion on a member without the role starts a proxy (Akka):
// it routes to the entities on the members with the role, hosting none.
func TestRegionsOnlyOnMembersWithTheRole(t *testing.T) {
	w := newLocalWorld(t, actorsharding.WithRole("hosts"))
	w.nodeOpts = []testkit.NodeOption{testkit.WithRoles("hosts")}
	host := w.startNode(false)
	w.nodeOpts = nil
	other := w.startNode(false) // StartRegion, but without the role
	w.cluster.WaitConverged(t, 30*time.Second)
	w.waitRegistered(1)
	for _, id := range entityIDs(30) {
		if p := askEventually(t, other, w.region(other), id, 1); p.Node != host.Address() {
			t.Fatalf("entity %s runs on %s, which lacks the role", id, p.Node)
		}
	}
	if st := regionStats(t, other, w.region(other)); len(st.Stats) != 0 {
		t.Fatalf("the member without the role hosts shards: %v", st.Stats)
	}
}

// buffer-size: messages for shards whose home is unknown are buffered up
// to BufferSize; beyond it each is dropped with "Buffer is full", and the
// buffered ones arrive once a home is known.
func TestBufferSize(t *testing.T) {
	// With min-nr-of-members 2 and one node nothing is allocated, so every
	// message waits in the buffer.
	w := newLocalWorld(t, actorsharding.WithBufferSize(5), actorsharding.WithMinNrOfMembers(2))
	a := w.startNode(false)
	w.waitRegistered(1)
	for seq := int64(1); seq <= 8; seq++ {
		a.System.Root.Send(w.region(a), pingMsg("buffered", seq))
	}
	testkit.WaitFor(t, 20*time.Second, func() bool {
		full := 0
		for _, d := range w.dropped() {
			if isPing(d.Message) && strings.Contains(d.Reason, "Buffer is full") && errors.Is(d.Err, deadletter.ErrBufferFull) {
				full++
			}
		}
		return full == 3
	}, "want 3 drops with \"Buffer is full\", got %v", testkit.Lazy(func() any { return w.dropped() }))
	w.startNode(false)
	testkit.WaitFor(t, 30*time.Second, func() bool { return len(w.received.get("buffered")) == 5 },
		"the 5 buffered messages did not arrive: %v", testkit.Lazy(func() any { return w.received.get("buffered") }))
	if got := w.received.get("buffered"); got[0] != 1 || got[4] != 5 {
		t.Fatalf("received %v, want 1..5", got)
	}
}

// Without WithStateStore, the nodes of one in-process member list share a
// store: the coordinator that takes over when the oldest node leaves
// recovers the shard homes of the node that stays, instead of starting
// empty (and possibly allocating a shard that still runs there).
func TestDefaultStateStoreIsSharedInProcess(t *testing.T) {
	w := &world{t: t, cluster: testkit.NewCluster(t, testkit.NewLocalBackend())}
	skipUnderRace(t)
	w.init([]actorsharding.Option{actorsharding.WithRebalanceInterval(time.Hour)})
	a, b := w.startNode(false), w.startNode(false)
	w.cluster.WaitConverged(t, 30*time.Second)
	w.waitRegistered(2)
	homesOf(t, b, w, entityIDs(200), 1)
	before := w.coordinatorState()
	onB := before.State.Regions[coordinator.RegionKey(w.region(b))].Shards
	if len(onB) == 0 {
		t.Fatal("no shard on b")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := a.Leave(ctx); err != nil { // a is the oldest: the coordinator moves to b
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, func() bool {
		st := w.coordinatorState()
		if st == nil || st.Name != coordinator.StateActive {
			return false
		}
		after := st.State.Regions[coordinator.RegionKey(w.region(b))].Shards
		for _, s := range onB {
			if !slices.Contains(after, s) {
				return false
			}
		}
		return true
	}, "the new coordinator on b does not know the %d shards b hosts", len(onB))
}

// With membership whose nodes may be in other processes there is no safe
// default store: starting a region or a proxy without one fails clearly.
func TestNoDefaultStateStoreAcrossProcesses(t *testing.T) {
	s := joinedSharding(t, notInProcess{local.NewRegistry().Provider()})
	props := actor.PropsFromFunc(func(actor.Context) {})
	if _, err := s.StartRegion("NoStore", props, nil); !errors.Is(err, actorsharding.ErrNoStateStore) {
		t.Errorf("StartRegion without a store: %v, want ErrNoStateStore", err)
	}
	if _, err := s.StartProxy("NoStore", nil); !errors.Is(err, actorsharding.ErrNoStateStore) {
		t.Errorf("StartProxy without a store: %v, want ErrNoStateStore", err)
	}
	if _, err := s.StartRegion("WithStore", props, nil, actorsharding.WithStateStore(coordinatoractor.NewMemoryStore())); err != nil {
		t.Errorf("StartRegion with a store: %v", err)
	}
}

// A store made for another cluster (or entity type) would share that
// cluster's keys: StartRegion and StartProxy refuse it.
func TestStartRefusesAStoreOfAnotherCluster(t *testing.T) {
	s := joinedSharding(t, local.NewNamedRegistry("app-a").Provider())
	// Refused before any request: nothing listens at this address.
	client, err := api.NewClient(&api.Config{Address: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	props := actor.PropsFromFunc(func(actor.Context) {})
	for name, opts := range map[string][]actorsharding.Option{
		"state store of another cluster": {actorsharding.WithStateStore(consulstore.NewStateStore(client, "app-b", "Counter"))},
		"state store of another type":    {actorsharding.WithStateStore(consulstore.NewStateStore(client, "app-a", "Account"))},
		"state store, names swapped":     {actorsharding.WithStateStore(consulstore.NewStateStore(client, "Counter", "app-a"))},
		"remember store of another cluster": {
			actorsharding.WithRememberEntities(consulstore.NewRememberEntitiesStore(client, "app-b", "Counter")),
			actorsharding.WithStateStore(coordinatoractor.NewMemoryStore()),
		},
	} {
		if _, err := s.StartRegion("Counter", props, nil, opts...); !errors.Is(err, actorsharding.ErrStoreMismatch) ||
			!strings.Contains(err.Error(), `this is cluster "app-a", entity type "Counter"`) {
			t.Errorf("StartRegion with a %s: %v, want ErrStoreMismatch", name, err)
		}
		if _, err := s.StartProxy("Counter", nil, opts...); !errors.Is(err, actorsharding.ErrStoreMismatch) {
			t.Errorf("StartProxy with a %s: %v, want ErrStoreMismatch", name, err)
		}
	}
	if _, ok := s.Region("Counter"); ok {
		t.Fatal("a refused start left a region")
	}
}

// joinedSharding is the Sharding of a one-node cluster over provider,
// joined; everything stops when the test ends.
func joinedSharding(t *testing.T, provider membership.Provider) *actorsharding.Sharding {
	t.Helper()
	system := actor.NewActorSystem()
	quarantine := membership.NewQuarantine()
	r := remote.NewRemote(system, remote.Configure("127.0.0.1", 0, quarantine.RemoteOption()))
	r.Start()
	cluster := membership.NewCluster(system, provider, membership.Config{Quarantine: quarantine})
	t.Cleanup(func() {
		cluster.Close()
		r.Shutdown(false)
		system.Shutdown()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cluster.Join(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := actorsharding.New(system, cluster)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// notInProcess hides the local provider's SharedValue, as a provider of
// another process's members (Consul) has none.
type notInProcess struct{ membership.Provider }
