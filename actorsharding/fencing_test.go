package actorsharding_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/coordinator"
	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/internal/shardingadmin"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/internal/testwait"
	"github.com/protoshard/protoshard/internal/wire"
	"github.com/protoshard/protoshard/lease"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/shardactor"
	"github.com/protoshard/protoshard/testkit"
)

// moveOnce allocates every shard to the region that asks, and rebalances
// one shard once, as soon as there are two regions.
type moveOnce struct {
	shard string
	done  atomic.Bool
}

func (m *moveOnce) AllocateShard(requester *actor.PID, _ string, current []coordinatoractor.RegionAllocation) *actor.PID {
	for _, r := range current {
		if requester != nil && coordinator.RegionKey(r.Region) == coordinator.RegionKey(requester) {
			return r.Region
		}
	}
	if len(current) == 0 {
		return nil
	}
	return current[0].Region
}

func (m *moveOnce) Rebalance(current []coordinatoractor.RegionAllocation, _ map[string]struct{}) []string {
	if len(current) < 2 || m.done.Load() {
		return nil
	}
	for _, r := range current {
		for _, s := range r.Shards {
			if s == m.shard {
				m.done.Store(true)
				return []string{s}
			}
		}
	}
	return nil
}

func (w *world) dropsWith(since int, reason string) []*deadletter.Event {
	var out []*deadletter.Event
	for _, d := range w.dropped()[since:] {
		if strings.Contains(d.Reason, reason) {
			out = append(out, d)
		}
	}
	return out
}

func (w *world) waitDrop(since int, reason string) {
	w.t.Helper()
	testkit.WaitFor(w.t, 20*time.Second, func() bool { return len(w.dropsWith(since, reason)) > 0 },
		"a dead-letter event with %q; got %v", reason, testkit.Lazy(func() any { return w.dropped()[since:] }))
}

// twoNodes starts two nodes with regions and waits until both regions
// registered.
func (w *world) twoNodes() (a, b *testkit.Node) {
	w.t.Helper()
	a, b = w.startNode(false), w.startNode(false)
	w.cluster.WaitConverged(w.t, 30*time.Second)
	w.waitRegistered(2)
	return a, b
}

// entityOn returns an entity, started by asking it through via, that
// lives on node.
func (w *world) entityOn(via, node *testkit.Node) string {
	w.t.Helper()
	for _, id := range entityIDs(200) {
		if askEventually(w.t, via, w.region(via), id, 0).Node == node.Address() {
			return id
		}
	}
	w.t.Fatalf("none of 200 entities lives on %s", node.Name)
	return ""
}

func (w *world) coordinatorPID(n *testkit.Node) *actor.PID {
	return actor.NewPID(n.Address(), shardingadmin.CoordinatorManagerName(typeName)+"/singleton/coordinator")
}

// An entity that takes longer than the hand-off timeout to stop: the
// rebalance times out and the shard stays where it was, but its region
// starts no second child of the shard while the first is alive. The
// messages sent meanwhile wait, and reach the next incarnation in order.
func TestSlowHandOffNeverStartsAShardTwice(t *testing.T) {
	const id = "e-1"
	shard := actorsharding.NewHashCodeMessageExtractor(100).ShardID(id)
	w := newLocalWorld(t,
		actorsharding.WithHandOffTimeout(1500*time.Millisecond),
		actorsharding.WithHandOffStopMessage(&testpb.Ping{EntityId: id, Seq: slowStopSeq}),
		actorsharding.WithAllocationStrategy(&moveOnce{shard: shard}))
	a := w.startNode(false)
	if p := askEventually(t, a, w.region(a), id, 0); p.Node != a.Address() {
		t.Fatalf("%s started on %s, want the only node", id, p.Node)
	}
	w.startNode(false)
	select {
	case <-w.stopping: // the rebalance told it to stop; it holds
	case <-time.After(60 * time.Second):
		t.Fatal("the rebalance never reached the entity")
	}
	const n = 20
	for seq := int64(1); seq <= n; seq++ {
		a.System.Root.Send(w.region(a), pingMsg(id, seq))
		time.Sleep(100 * time.Millisecond) // 2s in all: past the hand-off time-out
	}
	testkit.WaitFor(t, 30*time.Second, func() bool {
		st := w.coordinatorState()
		return st != nil && len(st.RebalanceInProgress) == 0
	}, "the rebalance to time out")
	time.Sleep(time.Second) // room for a second child, if the region started one
	if starts := w.ledger.Starts(id); starts != 1 {
		t.Fatalf("%s started %d times while its first incarnation was still stopping", id, starts)
	}
	close(w.release)
	testkit.WaitFor(t, 30*time.Second, func() bool {
		got := w.received.get(id)
		return len(got) > 0 && got[len(got)-1] == n
	}, "the last message to reach the next incarnation; got %v", testkit.Lazy(func() any { return w.received.get(id) }))
	got := w.received.get(id)[1:] // after the seq-0 ask
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("out of order: %v", got)
		}
	}
	if starts := w.ledger.Starts(id); starts != 2 {
		t.Fatalf("%s started %d times, want twice (before and after the hand-off)", id, starts)
	}
}

// A region obeys coordinator commands only from the coordinator it
// registered with, and its workers, at its epoch: anything else (an
// unrelated actor, a stale coordinator's late command) is dropped with a
// reason, and no shard starts or stops because of it.
func TestRegionObeysOnlyItsCoordinator(t *testing.T) {
	w := newLocalWorld(t)
	a, b := w.twoNodes()
	id := w.entityOn(a, a)
	shard := actorsharding.NewHashCodeMessageExtractor(w.shards).ShardID(id)
	st := w.coordinatorState()
	coord := w.coordinatorPID(w.cluster.Oldest(""))
	stale := st.Epoch - 1
	stranger := b.System.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))

	cases := []struct {
		name   string
		to     *actor.PID
		msg    any
		sender *actor.PID
		reason string
	}{
		{"HostShard without a sender", w.region(b), &messages.HostShard{Shard: shard, Epoch: st.Epoch}, nil, "without a sender"},
		{"HostShard from an unrelated actor", w.region(b), &messages.HostShard{Shard: shard, Epoch: st.Epoch}, stranger, "neither the coordinator"},
		{"HostShard from the coordinator at a stale epoch", w.region(b), &messages.HostShard{Shard: shard, Epoch: stale}, coord, "epoch"},
		{"ShardHome from a stale epoch", w.region(b), &messages.ShardHome{Shard: shard, Ref: w.region(b), Epoch: stale}, coord, "epoch"},
		{"HandOff from a stale epoch", w.region(a), &messages.HandOff{Shard: shard, Epoch: stale}, coord, "epoch"},
		{"BeginHandOff from an unrelated actor", w.region(a), &messages.BeginHandOff{Shard: shard, Epoch: st.Epoch}, stranger, "neither the coordinator"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(w.dropped())
			if c.sender == nil {
				a.System.Root.Send(c.to, c.msg)
			} else {
				a.System.Root.RequestWithCustomSender(c.to, c.msg, c.sender)
			}
			w.waitDrop(before, c.reason)
		})
	}
	if p := askEventually(t, b, w.region(b), id, 1); p.Node != a.Address() {
		t.Fatalf("%s answers from %s, want %s", id, p.Node, a.Address())
	}
	if stats := regionStats(t, b, w.region(b)); stats.Stats[shard] != 0 {
		t.Fatalf("b hosts shard %s after the commands it must not obey: %v", shard, stats.Stats)
	}
	if starts := w.ledger.Starts(id); starts != 1 {
		t.Fatalf("%s started %d times, want once", id, starts)
	}
}

// TestForgedEpochLeavesTheRegionRegistered: a coordinator command at an
// epoch above every one seen, sent by an actor that is not the
// coordinator, is dropped and changes nothing: the region keeps its
// coordinator. The query right behind it is answered by the coordinator;
// a region that had dropped its coordinator would answer it empty at once.
func TestForgedEpochLeavesTheRegionRegistered(t *testing.T) {
	w := newLocalWorld(t)
	a, b := w.twoNodes()
	stranger := b.System.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	for round := range 5 {
		before := len(w.dropped())
		b.System.Root.RequestWithCustomSender(w.region(a), &messages.BeginHandOff{Shard: "1", Epoch: ^uint64(0)}, stranger)
		if regions := currentRegions(t, b, w.region(a)); len(regions) != 2 {
			t.Fatalf("round %d: CurrentRegions right after a forged BeginHandOff = %v, want both regions: the region forgot its coordinator",
				round, regions)
		}
		w.waitDrop(before, "neither the coordinator")
	}
}

// TestRegionChecksTheIncarnationWhereItDelivers: a message forwarded to an
// earlier incarnation of this node, which the router let pass before the
// node joined again as another member, is dropped by the region actor with
// the reason; one forwarded to the current incarnation is delivered.
func TestRegionChecksTheIncarnationWhereItDelivers(t *testing.T) {
	w := newLocalWorld(t)
	a, _ := w.twoNodes()
	id := w.entityOn(a, a)
	before := len(w.dropped())
	if !actorsharding.SendRouted(a.System, typeName, id, pingMsg(id, 77), "an-earlier-incarnation") {
		t.Fatal("no region router")
	}
	w.waitDrop(before, "earlier incarnation")
	if d := w.dropsWith(before, "earlier incarnation")[0]; !errors.Is(d.Err, deadletter.ErrMemberRemoved) {
		t.Fatalf("drop reason %v, want it to wrap ErrMemberRemoved", d.Err)
	}
	actorsharding.SendRouted(a.System, typeName, id, pingMsg(id, 78), a.Membership.Self().ID)
	testkit.WaitFor(t, 20*time.Second, func() bool { return slices.Contains(w.received.get(id), 78) },
		"the message forwarded to the current incarnation never arrived")
	if slices.Contains(w.received.get(id), 77) {
		t.Fatal("the message forwarded to an earlier incarnation was delivered")
	}
}

// A coordinator whose state write meets a version conflict (another
// coordinator claimed the state) stops instead of reloading and claiming
// it again; its supervisor starts a new one, which claims the state under
// a higher epoch, and the regions follow it.
func TestVersionConflictStopsTheCoordinator(t *testing.T) {
	w := newLocalWorld(t, actorsharding.WithCoordinatorFailureBackoff(300*time.Millisecond))
	a, b := w.twoNodes()
	askEventually(t, a, w.region(a), "e-1", 0)
	before := w.coordinatorState()

	// Another coordinator claims the state, as a second one would.
	ctx := context.Background()
	st, v, err := w.store.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.store.Save(ctx, st, v); err != nil {
		t.Fatal(err)
	}
	// The next write of the running coordinator (a new shard) conflicts.
	for _, id := range entityIDs(30)[2:] {
		askEventually(t, b, w.region(b), id, 0)
	}
	after := w.coordinatorState()
	if after == nil || after.Name != coordinator.StateActive || after.Epoch <= v {
		t.Fatalf("coordinator after the conflict: %+v; want a new one, active, at an epoch above %d (the other writer's)", after, v)
	}
	if after.Epoch <= before.Epoch {
		t.Fatalf("epoch %d after the conflict, was %d", after.Epoch, before.Epoch)
	}
	askEventually(t, a, w.region(a), "e-1", 1)
	if starts := w.ledger.Starts("e-1"); starts != 1 {
		t.Fatalf("e-1 started %d times, want once: its shard kept its home", starts)
	}
}

// Malformed protocol messages from any peer are rejected at the
// coordinator's boundary with a dead-letter event; none of them is taken
// for a store failure, so the coordinator stays, with its epoch.
func TestMalformedMessagesDoNotStallTheCoordinator(t *testing.T) {
	w := newLocalWorld(t)
	a, b := w.twoNodes()
	askEventually(t, a, w.region(a), "e-1", 0)
	// A member that was live and is removed: its Register is rejected at
	// once. (One of a member not seen yet waits for it to show up; see
	// the coordinator's tests.)
	c := w.startNode(false)
	w.waitRegistered(3)
	gone := c.MemberID()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := c.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 60*time.Second, func() bool {
		return !slices.ContainsFunc(a.Membership.Members(), func(m membership.Member) bool { return m.ID == gone })
	}, "the removal of %s", gone)
	w.waitRegistered(2)
	before := w.coordinatorState()
	coord := w.coordinatorPID(w.cluster.Oldest(""))
	probe := testwait.NewProbe(a.System)
	cases := []struct {
		name   string
		msg    any
		reason string
	}{
		{"Register with an empty region id", &messages.Register{ShardRegion: &actor.PID{Address: a.Address()}, MemberId: a.MemberID()}, "empty id"},
		{"Register at another member's address", &messages.Register{ShardRegion: actor.NewPID(b.Address(), "fake"), MemberId: a.MemberID()}, "which runs at"},
		{"Register of a member that was removed", &messages.Register{ShardRegion: w.region(a), MemberId: gone}, "not a live member"},
		{"Register listing an oversized shard", &messages.Register{ShardRegion: w.region(a), MemberId: a.MemberID(), Shards: []string{strings.Repeat("s", wire.MaxShardIDLength+1)}}, "bad shard"},
		{"GetShardHome of an oversized shard", &messages.GetShardHome{Shard: strings.Repeat("s", wire.MaxShardIDLength+1)}, "longer than the limit"},
		{"GetShardHome of an empty shard", &messages.GetShardHome{}, "empty shard"},
		{"RegionStopped for another region", &messages.RegionStopped{ShardRegion: w.region(b)}, "not by the region itself"},
		{"GracefulShutdownReq for another region", &messages.GracefulShutdownReq{ShardRegion: w.region(b)}, "not by the region itself"},
		{"RebalanceDone from a stranger", &messages.RebalanceDone{Shard: "1", Ok: true}, "not its rebalance worker"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			since := len(w.dropped())
			a.System.Root.RequestWithCustomSender(coord, c.msg, probe.PID())
			w.waitDrop(since, c.reason)
		})
	}
	after := w.coordinatorState()
	if after.Name != coordinator.StateActive || after.Epoch != before.Epoch || len(after.State.Regions) != 2 {
		t.Fatalf("coordinator after bad input: %s at epoch %d with %d regions; want active at epoch %d with 2",
			after.Name, after.Epoch, len(after.State.Regions), before.Epoch)
	}
	askEventually(t, b, w.region(b), "e-1", 1)
}

// A coordinator that stops (here: poisoned) comes back after the
// coordinator-failure-backoff, as under Akka's backoff supervisor, while
// its node stays the oldest.
func TestStoppedCoordinatorComesBack(t *testing.T) {
	w := newLocalWorld(t, actorsharding.WithCoordinatorFailureBackoff(300*time.Millisecond))
	a := w.startNode(false)
	w.waitRegistered(1)
	askEventually(t, a, w.region(a), "e-1", 0)
	before := w.coordinatorState()
	for range 3 {
		if err := a.System.Root.PoisonFuture(w.coordinatorPID(a)).Wait(); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 30*time.Second, func() bool {
			st := w.coordinatorState()
			return st != nil && st.Name == coordinator.StateActive
		}, "a new coordinator")
	}
	after := w.coordinatorState()
	if after.Epoch <= before.Epoch {
		t.Fatalf("epoch %d after three restarts, was %d", after.Epoch, before.Epoch)
	}
	askEventually(t, a, w.region(a), "e-2", 0)
	if starts := w.ledger.Starts("e-1"); starts != 1 {
		t.Fatalf("e-1 started %d times, want once", starts)
	}
}

// A member removed without leaving (crashed, or cut off) keeps its shards
// for the down-removal margin: they start elsewhere only after it, so a
// member that was only cut off has noticed its removal and stopped them.
func TestCrashedMembersShardsWaitTheRemovalMargin(t *testing.T) {
	const margin = 3 * time.Second
	w := newLocalWorld(t)
	w.nodeOpts = []testkit.NodeOption{testkit.WithMembershipConfig(func(c *membership.Config) { c.DownRemovalMargin = margin })}
	a, b := w.twoNodes()
	id := w.entityOn(a, b)
	crashed := time.Now()
	b.Crash()
	p := askEventually(t, a, w.region(a), id, 1)
	took := time.Since(crashed)
	if p.Node != a.Address() {
		t.Fatalf("%s answers from %s", id, p.Node)
	}
	if took < margin {
		t.Fatalf("%s answered again %v after its node crashed, within the removal margin %v", id, took, margin)
	}
	t.Logf("answered again after %v (margin %v)", took, margin)
}

// A node that finds itself removed (here: failure detection gave up on it
// while it ran) stops its shards, fails fast with dead-letter events
// instead of buffering, then joins again as a new member and hosts again.
func TestRemovedNodeFailsFastThenRejoins(t *testing.T) {
	w := newLocalWorld(t)
	w.nodeOpts = []testkit.NodeOption{testkit.WithMembershipConfig(func(c *membership.Config) { c.RejoinBackoff = 2 * time.Second })}
	a, b := w.twoNodes()
	onA, onB := w.entityOn(a, a), w.entityOn(a, b)
	reg := w.local.Registry
	oldB := b.MemberID()
	since := len(w.dropped())
	reg.Remove(oldB)
	testkit.WaitFor(t, 20*time.Second, func() bool {
		b.System.Root.Send(w.region(b), pingMsg(onA, 100))
		return len(w.dropsWith(since, "removed from the cluster")) > 0
	}, "b to fail fast while removed")
	testkit.WaitFor(t, 30*time.Second, func() bool { return b.MemberID() != oldB && b.MemberID() != "" }, "b to join again")
	w.cluster.WaitConverged(t, 30*time.Second)
	p := askEventually(t, b, w.region(b), onB, 1)
	askEventually(t, b, w.region(b), onA, 2)
	t.Logf("%s answers from %s after b re-joined", onB, p.Node)
}

// A coordinator that starts without its stored state (the store was wiped)
// adopts what each registering region hosts instead of allocating those
// shards afresh: no entity starts a second time anywhere.
func TestCoordinatorAdoptsHostedShardsAfterStoreReset(t *testing.T) {
	store := &resettableStore{}
	w := newLocalWorld(t, actorsharding.WithCoordinatorFailureBackoff(300*time.Millisecond), actorsharding.WithStateStore(store))
	a, b := w.twoNodes()
	ids := entityIDs(100)
	homes := homesOf(t, a, w, ids, 0)

	store.reset()
	if err := a.System.Root.PoisonFuture(w.coordinatorPID(w.cluster.Oldest(""))).Wait(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, func() bool {
		st := w.coordinatorState()
		return st != nil && st.Name == coordinator.StateActive && len(st.State.Regions) == 2 && len(st.State.Shards) > 0
	}, "the new coordinator with both regions")
	for _, id := range ids {
		if p := askEventually(t, b, w.region(b), id, 1); p.Node != homes[id] {
			t.Errorf("%s moved from %s to %s", id, homes[id], p.Node)
		}
		if starts := w.ledger.Starts(id); starts != 1 {
			t.Errorf("%s started %d times, want once", id, starts)
		}
	}
}

// resettableStore is a memory StateStore that a test can wipe, as a Consul
// agent that lost its data.
type resettableStore struct {
	mu    atomic.Pointer[coordinatoractor.MemoryStore]
	wiped atomic.Int32
}

func (s *resettableStore) inner() *coordinatoractor.MemoryStore {
	if m := s.mu.Load(); m != nil {
		return m
	}
	s.mu.CompareAndSwap(nil, coordinatoractor.NewMemoryStore())
	return s.mu.Load()
}

func (s *resettableStore) reset() {
	s.mu.Store(coordinatoractor.NewMemoryStore())
	s.wiped.Add(1)
}

func (s *resettableStore) Load(ctx context.Context) ([]byte, uint64, error) {
	return s.inner().Load(ctx)
}

func (s *resettableStore) Save(ctx context.Context, data []byte, v uint64) (uint64, error) {
	nv, err := s.inner().Save(ctx, data, v)
	if err != nil {
		return 0, fmt.Errorf("resettable store (wiped %d times): %w", s.wiped.Load(), err)
	}
	return nv, nil
}

// The Consul agent restarts empty (a dev agent keeps nothing): every node
// finds itself removed, stops its shards and joins again, in some order;
// the coordinator that starts first, with an empty state, must not start
// a shard that a node which has not noticed its removal yet still hosts.
func TestConsulWipedStartsNoEntityTwice(t *testing.T) {
	w := newConsulWorld(t)
	a := w.startNode(false)
	w.startNode(false)
	w.startNode(false)
	w.cluster.WaitConverged(t, 60*time.Second)
	w.waitRegistered(3)
	ids := entityIDs(60)
	homesOf(t, a, w, ids, 0)

	before := map[*testkit.Node]string{}
	for _, n := range w.cluster.Running() {
		before[n] = n.MemberID()
	}
	// Traffic through every node all along, so that any node that hosts a
	// shard too early gets messages for it.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for seq := int64(100); ; seq++ {
			for _, n := range w.cluster.Running() {
				for _, id := range ids {
					select {
					case <-stop:
						return
					default:
					}
					n.System.Root.Send(w.region(n), pingMsg(id, seq))
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer func() { close(stop); <-done }()
	w.backend.Agent.Restart(t)
	testkit.WaitFor(t, 90*time.Second, func() bool {
		for n, id := range before {
			if n.MemberID() == id || n.MemberID() == "" {
				return false
			}
		}
		return true
	}, "every node to find itself removed and join again")
	w.cluster.WaitConverged(t, 90*time.Second)
	for _, id := range ids {
		askEventually(t, a, w.region(a), id, 1)
	}
	t.Logf("entity starts after the wipe: %d for %d entities", w.ledgerStarts(ids), len(ids))
}

func (w *world) ledgerStarts(ids []string) int {
	n := 0
	for _, id := range ids {
		n += w.ledger.Starts(id)
	}
	return n
}

// Messages a region forwards to a node that crashed, before membership
// removed it, are lost; proto.actor reports them only with its reasonless
// dead letter, and sharding turns that into a dead-letter event with a
// reason, so that no loss is silent. Those still waiting for a connection
// when the removal comes are reported by the quarantine.
func TestMessagesToACrashedNodeAreReported(t *testing.T) {
	w := newLocalWorld(t)
	a, b := w.twoNodes()
	id := w.entityOn(a, b)
	w.local.FailureDetectionDelay = 3 * time.Second
	since := len(w.dropped())
	b.Crash()
	for seq := int64(1); seq <= 20; seq++ {
		a.System.Root.Send(w.region(a), pingMsg(id, seq))
		time.Sleep(50 * time.Millisecond)
	}
	testkit.WaitFor(t, 60*time.Second, func() bool {
		return len(w.dropsWith(since, "could not be reached"))+len(w.dropsWith(since, "quarantine: "+b.Address())) > 0
	},
		"a dead-letter event for a message to the crashed node; got %v", testkit.Lazy(func() any { return w.dropped()[since:] }))
}

// limitedStore is a memory StateStore that holds states up to max bytes,
// as Consul's transaction limit does.
type limitedStore struct {
	*coordinatoractor.MemoryStore
	max int
}

func (s limitedStore) Save(ctx context.Context, data []byte, v uint64) (uint64, error) {
	if len(data) > s.max {
		return 0, fmt.Errorf("limited store: %d bytes: %w", len(data), coordinatoractor.ErrStateTooLarge)
	}
	return s.MemoryStore.Save(ctx, data, v)
}

// A state the store cannot hold rejects the one change that would have
// grown it past the limit, with a clear error; the coordinator stays, at
// its epoch, and keeps serving the shards it placed (before, it retried the
// same write for ever).
func TestStateTooLargeRejectsTheChangeOnly(t *testing.T) {
	store := limitedStore{MemoryStore: coordinatoractor.NewMemoryStore(), max: 200}
	w := newLocalWorld(t, actorsharding.WithStateStore(store))
	a := w.startNode(false)
	w.waitRegistered(1)
	var placed []string
	for _, id := range entityIDs(200) {
		if _, err := ask(a, w.region(a), id, 0, 2*time.Second); err == nil {
			placed = append(placed, id)
		}
		if len(placed) > 0 && len(w.dropsWith(0, "too large")) > 0 {
			break
		}
	}
	st := w.coordinatorState()
	if len(placed) == 0 || st.Name != coordinator.StateActive {
		t.Fatalf("placed %d entities; coordinator %s", len(placed), st.Name)
	}
	testkit.WaitFor(t, 20*time.Second, func() bool { return len(w.dropsWith(0, "too large")) > 0 },
		"a dead-letter event naming the state as too large")
	before := st.Epoch
	for _, id := range placed {
		askEventually(t, a, w.region(a), id, 1)
	}
	if after := w.coordinatorState(); after.Name != coordinator.StateActive || after.Epoch != before {
		t.Fatalf("coordinator %s at epoch %d after the rejected change, was active at %d", after.Name, after.Epoch, before)
	}
}

// When the node's Consul agent cannot be reached past the TTL, the node
// fences itself (the others may have removed it); requests through its
// region then fail at once with a dead letter instead of waiting for the
// caller's time-out.
func TestConsulUnreachableFailsFast(t *testing.T) {
	w := newConsulWorld(t)
	a := w.startNode(false)
	w.waitRegistered(1)
	askEventually(t, a, w.region(a), "e-1", 0)
	w.backend.Agent.Stop()
	testkit.WaitFor(t, 30*time.Second, func() bool {
		_, err := ask(a, w.region(a), "e-1", 1, 10*time.Second)
		return errors.Is(err, actor.ErrDeadLetter)
	}, "a request to fail fast with a dead letter while the node is fenced")
	start := time.Now()
	_, err := ask(a, w.region(a), "e-2", 1, 10*time.Second)
	if !errors.Is(err, actor.ErrDeadLetter) || time.Since(start) > 2*time.Second {
		t.Fatalf("a request while fenced: %v after %v, want a dead letter at once", err, time.Since(start))
	}
}

// With a lease per shard (Akka's sharding use-lease), a shard runs its
// entities only while it holds its lease: a lost lease stops them at once;
// the shard comes back, under a new lease, on its next message.
func TestShardLease(t *testing.T) {
	leases := lease.NewMemoryLeases()
	w := newLocalWorld(t, actorsharding.WithShardLease(leases))
	a := w.startNode(false)
	w.waitRegistered(1)
	const id = "e-1"
	askEventually(t, a, w.region(a), id, 0)
	name := shardactor.LeaseName(typeName, actorsharding.NewHashCodeMessageExtractor(w.shards).ShardID(id))
	if _, _, held := leases.Holder(name); !held {
		t.Fatalf("lease %s is not held while its shard runs", name)
	}
	if _, revoked := leases.Revoke(name); !revoked {
		t.Fatal("nothing to revoke")
	}
	testkit.WaitFor(t, 20*time.Second, func() bool { return len(w.ledger.Active(id)) == 0 }, "the entity to stop with the lease lost")
	askEventually(t, a, w.region(a), id, 1)
	if starts := w.ledger.Starts(id); starts != 2 {
		t.Fatalf("%s started %d times, want twice (before and after the lost lease)", id, starts)
	}
}

// A node whose membership is stale starts no shard, not even on a
// HostShard of its coordinator at its epoch (one that waited in its mailbox
// through a pause, or was sent before the others removed it): the others
// may run the shard by now. Once it confirms its membership again, the next
// HostShard starts the shard.
func TestStaleNodeStartsNoShardOnHostShard(t *testing.T) {
	w, backend := newPausableWorld(t, 300*time.Millisecond)
	_, b := w.twoNodes()
	shard := actorsharding.NewHashCodeMessageExtractor(w.shards).ShardID("never-asked")
	hosts := func() bool { _, ok := regionStats(t, b, w.region(b)).Stats[shard]; return ok }
	if hosts() {
		t.Fatalf("b hosts shard %s before it was told to", shard)
	}
	host := &messages.HostShard{Shard: shard, Epoch: w.coordinatorState().Epoch}
	coord := w.coordinatorPID(w.cluster.Oldest(""))

	backend.Pause(b)
	testkit.WaitFor(t, 20*time.Second, membershiphook.Of(b.Membership).Stale, "b's membership to be stale")
	b.System.Root.RequestWithCustomSender(w.region(b), host, coord)
	// The region handles the stats request after the HostShard.
	if hosts() {
		t.Fatalf("b started shard %s while its membership is stale", shard)
	}

	backend.Resume(b)
	b.System.Root.RequestWithCustomSender(w.region(b), host, coord)
	testkit.WaitFor(t, 20*time.Second, hosts, "b to start shard %s once its membership is confirmed again", shard)
}

// A remembering shard that stopped (its store refused a write for good)
// is started again by its region's shard-failure back-off timer; if the
// node's membership is stale when the timer fires, the shard does not
// start, and the timer is armed again: once the node confirms its
// membership again, the shard and its remembered entity run.
func TestStaleNodeRestartsNoRememberedShard(t *testing.T) {
	const backoff = 2 * time.Second
	opts := append(rememberOpts(refusingStore{shardactor.NewMemoryRememberEntitiesStore()}),
		actorsharding.WithShardFailureBackoff(backoff))
	w, backend := newPausableWorld(t, 300*time.Millisecond, opts...)
	w.shards = 1 // every entity in one shard
	n := w.startNode(false)
	w.waitRegistered(1)
	askEventually(t, n, w.region(n), "kept", 1)

	since := len(w.dropped())
	n.System.Root.Send(w.region(n), pingMsg("refused", 1))
	w.waitDrop(since, `cannot remember entity "refused"`)
	stoppedAt := time.Now()
	backend.Pause(n)
	testkit.WaitFor(t, 20*time.Second, membershiphook.Of(n.Membership).Stale, "the node's membership to be stale")
	// Past the back-off: the timer fired while the membership was stale. A
	// slow timer can only hide a start here, never make one.
	time.Sleep(time.Until(stoppedAt.Add(backoff + time.Second)))
	if stats := regionStats(t, n, w.region(n)); len(stats.Stats) != 0 {
		t.Fatalf("the shard started while the membership is stale: %v", stats.Stats)
	}
	if starts := w.ledger.Starts("kept"); starts != 1 {
		t.Fatalf("the remembered entity started %d times, want once", starts)
	}

	backend.Resume(n)
	testkit.WaitFor(t, 30*time.Second, func() bool { return w.ledger.Starts("kept") == 2 && len(w.ledger.Active("kept")) == 1 },
		"the remembered entity to start again with its shard (starts %v)", testkit.Lazy(func() any { return w.ledger.Starts("kept") }))
	askEventually(t, n, w.region(n), "kept", 2)
}
