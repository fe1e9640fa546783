package membership_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
)

// waitTimeout is generous on purpose: the tests run on slow shared machines
// and only assert that events happen, and in which order, never how fast.
const waitTimeout = 20 * time.Second

// recorder is an actor that keeps every message it receives, in order.
type recorder struct {
	mu   sync.Mutex
	msgs []any
}

func (r *recorder) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
		return
	}
	r.mu.Lock()
	r.msgs = append(r.msgs, ctx.Message())
	r.mu.Unlock()
}

func (r *recorder) all() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs)
}

// index returns the position of the first message matching pred, or -1.
func (r *recorder) index(pred func(any) bool) int {
	return slices.IndexFunc(r.all(), pred)
}

// waitIndex waits for a message matching pred and returns its position.
func (r *recorder) waitIndex(t *testing.T, what string, pred func(any) bool) int {
	t.Helper()
	waitFor(t, func() bool { return r.index(pred) >= 0 }, "%s; got %v", what, lazyMsgs{r})
	return r.index(pred)
}

type lazyMsgs struct{ r *recorder }

func (l lazyMsgs) String() string { return fmt.Sprintf("%+v", l.r.all()) }

// hookRan is the marker a leave hook sends to the recorders, to place the
// hook among the membership events they received.
type hookRan struct{}

func isUp(id string) func(any) bool {
	return func(m any) bool { e, ok := m.(membership.MemberUp); return ok && e.Member.ID == id }
}

func isLeft(id string) func(any) bool {
	return func(m any) bool { e, ok := m.(membership.MemberLeft); return ok && e.Member.ID == id }
}

func isRemoved(id string) func(any) bool {
	return func(m any) bool { e, ok := m.(membership.MemberRemoved); return ok && e.Member.ID == id }
}

func isState(m any) bool { _, ok := m.(*membership.CurrentClusterState); return ok }

func isHookRan(m any) bool { _, ok := m.(hookRan); return ok }

func waitFor(t *testing.T, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for "+format, args...)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func quietSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
}

// node is one actor system with a remote on loopback, its membership, and a
// recorder subscribed before the join.
type node struct {
	system  *actor.ActorSystem
	cluster *membership.Cluster
	rec     *recorder
	pid     *actor.PID
}

func (n *node) id() string { return n.cluster.Self().ID }

func (n *node) index(pred func(any) bool) int { return n.rec.index(pred) }

func (n *node) memberIDs() []string {
	var out []string
	for _, m := range n.cluster.Members() {
		out = append(out, m.ID)
	}
	slices.Sort(out)
	return out
}

func startNode(t *testing.T, reg *local.Registry, cfg membership.Config) *node {
	t.Helper()
	if raceEnabled {
		t.Skip("starts proto.actor remotes, which race on grpc's global logger")
	}
	system := quietSystem()
	r := remote.NewRemote(system, remote.Configure("127.0.0.1", 0))
	r.Start()
	c := membership.NewCluster(system, reg.Provider(), cfg)
	t.Cleanup(func() {
		c.Close()
		r.Shutdown(false)
		system.Shutdown()
	})
	rec := &recorder{}
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return rec }))
	c.Subscribe(pid)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := c.Join(ctx); err != nil {
		t.Fatalf("join: %v", err)
	}
	return &node{system: system, cluster: c, rec: rec, pid: pid}
}

func sorted(ids ...string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

func TestJoinRefusesSystemWithoutRemote(t *testing.T) {
	c := membership.NewCluster(quietSystem(), local.NewRegistry().Provider(), membership.Config{})
	if err := c.Join(context.Background()); err == nil {
		t.Fatal("Join of a system without a started remote succeeded")
	}
}

// The cluster's name is its provider's.
func TestClusterName(t *testing.T) {
	for _, reg := range []*local.Registry{local.NewRegistry(), local.NewNamedRegistry("app-a")} {
		c := membership.NewCluster(quietSystem(), reg.Provider(), membership.Config{})
		if c.Name() != reg.Provider().Name() {
			t.Errorf("cluster name %q, want the registry's %q", c.Name(), reg.Provider().Name())
		}
	}
}

func TestJoinTwiceFails(t *testing.T) {
	n := startNode(t, local.NewRegistry(), membership.Config{})
	if err := n.cluster.Join(context.Background()); err == nil {
		t.Fatal("second Join succeeded")
	}
}

func TestCurrentStateThenMemberUp(t *testing.T) {
	reg := local.NewRegistry()
	a := startNode(t, reg, membership.Config{Roles: []string{"r"}})

	waitFor(t, func() bool { return len(a.rec.all()) > 0 }, "a's first message")
	first := a.rec.all()
	st, ok := first[0].(*membership.CurrentClusterState)
	if !ok {
		t.Fatalf("first message is %T, want *CurrentClusterState", first[0])
	}
	if st.Self.ID != a.id() || st.Self.Age == 0 || !slices.Equal(st.Self.Roles, []string{"r"}) {
		t.Errorf("Self = %+v, want a (%s) with an age and roles [r]", st.Self, a.id())
	}
	if len(st.Members) != 1 || st.Members[0].ID != a.id() {
		t.Errorf("Members = %+v, want only a", st.Members)
	}

	// A subscriber that comes later also starts with the state.
	late := &recorder{}
	latePID := a.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return late }))
	a.cluster.Subscribe(latePID)

	b := startNode(t, reg, membership.Config{})
	for name, r := range map[string]*recorder{"a": a.rec, "late": late} {
		up := r.waitIndex(t, name+" sees b up", isUp(b.id()))
		if st := r.index(isState); st < 0 || st > up {
			t.Errorf("%s: CurrentClusterState at %d, MemberUp at %d: %v", name, st, up, r.all())
		}
		if msgs := r.all(); msgs[up].(membership.MemberUp).Member.Age <= a.cluster.Self().Age {
			t.Errorf("%s: b is not younger than a: %+v", name, msgs[up])
		}
	}

	waitFor(t, func() bool { return len(b.rec.all()) > 0 }, "b's first message")
	bs, ok := b.rec.all()[0].(*membership.CurrentClusterState)
	if !ok {
		t.Fatalf("b's first message is %T", b.rec.all()[0])
	}
	if bs.Self.ID != b.id() || len(bs.Members) != 2 || bs.Members[0].ID != a.id() || bs.Members[1].ID != b.id() {
		t.Errorf("b's state = %+v, want members [a b] oldest first and self b", bs)
	}
	if got, want := a.memberIDs(), sorted(a.id(), b.id()); !slices.Equal(got, want) {
		t.Errorf("a.Members = %v, want %v", got, want)
	}
	if a.index(isUp(a.id())) >= 0 {
		t.Error("a got MemberUp of itself; its own join is in CurrentClusterState")
	}
}

func TestGracefulLeaveRunsHookBetweenLeftAndRemoved(t *testing.T) {
	reg := local.NewRegistry()
	a := startNode(t, reg, membership.Config{})
	b := startNode(t, reg, membership.Config{})
	c := startNode(t, reg, membership.Config{})
	bID := b.id()
	for _, n := range []*node{a, b} {
		n.rec.waitIndex(t, "c up", isUp(c.id()))
	}

	if b.cluster.Leaving() {
		t.Fatal("b is leaving before Leave")
	}
	leavingInFirstHook := false // read after Leave, which waits for the hooks
	membershiphook.Of(b.cluster).RegisterLeaveHookIn(membershiphook.LeavePhaseShardingShutdownRegion, "first", func(context.Context) error {
		leavingInFirstHook = b.cluster.Leaving()
		return nil
	})
	hookErr := make(chan error, 1)
	b.cluster.RegisterLeaveHook("test", func(ctx context.Context) error {
		// The others must be told first: wait until they saw MemberLeft.
		for _, n := range []*node{a, c} {
			for n.index(isLeft(bID)) < 0 {
				select {
				case <-ctx.Done():
					hookErr <- fmt.Errorf("others did not see b leaving: %w", ctx.Err())
					return ctx.Err()
				case <-time.After(10 * time.Millisecond):
				}
			}
			if n.index(isRemoved(bID)) >= 0 {
				hookErr <- errors.New("b was removed before its leave hook finished")
			}
			// Marker, enqueued before anything Leave does after the hook.
			n.system.Root.Send(n.pid, hookRan{})
		}
		b.system.Root.Send(b.pid, hookRan{})
		hookErr <- nil
		return nil
	})

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := b.cluster.Leave(ctx); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if err := <-hookErr; err != nil {
		t.Fatal(err)
	}
	if !leavingInFirstHook {
		t.Error("b is not leaving in its first leave hook")
	}

	for name, n := range map[string]*node{"a": a, "c": c} {
		removed := n.rec.waitIndex(t, name+" sees b removed", isRemoved(bID))
		left, hook := n.index(isLeft(bID)), n.index(isHookRan)
		if !(left < hook && hook < removed) {
			t.Errorf("%s: MemberLeft at %d, hook at %d, MemberRemoved at %d; want that order: %v", name, left, hook, removed, n.rec.all())
		}
		if ev := n.rec.all()[removed].(membership.MemberRemoved); !ev.Graceful {
			t.Errorf("%s: %+v, want Graceful", name, ev)
		}
		waitFor(t, func() bool { return slices.Equal(n.memberIDs(), sorted(a.id(), c.id())) }, "%s's members to be [a c]", name)
	}

	// The leaving node itself is told it is gone, gracefully, after the hook.
	removed := b.rec.waitIndex(t, "b sees itself removed", isRemoved(bID))
	if hook := b.index(isHookRan); hook < 0 || hook > removed {
		t.Errorf("b: hook at %d, own MemberRemoved at %d: %v", hook, removed, b.rec.all())
	}
	if ev := b.rec.all()[removed].(membership.MemberRemoved); !ev.Graceful {
		t.Errorf("b: %+v, want Graceful", ev)
	}
	if len(b.cluster.Members()) != 0 {
		t.Errorf("b still lists members after leaving: %v", b.memberIDs())
	}
	if !b.cluster.Leaving() {
		t.Error("b is not leaving after Leave")
	}

	// A graceful leave is final.
	if err := b.cluster.Join(ctx); !errors.Is(err, membership.ErrRemoved) {
		t.Errorf("Join after Leave = %v, want ErrRemoved", err)
	}
	if err := b.cluster.Leave(ctx); !errors.Is(err, membership.ErrRemoved) {
		t.Errorf("second Leave = %v, want ErrRemoved", err)
	}
	for _, m := range reg.Members() {
		if m.ID == bID {
			t.Errorf("b is still registered: %+v", m)
		}
	}
}

func TestLeaveHookErrorIsReturned(t *testing.T) {
	reg := local.NewRegistry()
	a := startNode(t, reg, membership.Config{})
	boom := errors.New("boom")
	a.cluster.RegisterLeaveHook("failing", func(context.Context) error { return boom })
	a.cluster.RegisterLeaveHook("fine", func(context.Context) error { return nil })
	err := a.cluster.Leave(context.Background())
	if !errors.Is(err, boom) {
		t.Fatalf("Leave = %v, want it to wrap the hook's error", err)
	}
	if len(reg.Members()) != 0 {
		t.Errorf("a failed hook must not keep the member registered: %v", reg.Members())
	}
}

func TestRemovalIsFinal(t *testing.T) {
	reg := local.NewRegistry()
	a := startNode(t, reg, membership.Config{})
	terminated := make(chan struct{})
	b := startNode(t, reg, membership.Config{AfterRemoval: membership.Terminate, OnTerminate: func() { close(terminated) }})
	bSelf := b.cluster.Self()
	a.rec.waitIndex(t, "a sees b up", isUp(bSelf.ID))

	if !reg.Remove(bSelf.ID) {
		t.Fatal("b was not registered")
	}
	i := a.rec.waitIndex(t, "a sees b removed", isRemoved(bSelf.ID))
	if ev := a.rec.all()[i].(membership.MemberRemoved); ev.Graceful {
		t.Errorf("a: %+v, want not graceful", ev)
	}
	i = b.rec.waitIndex(t, "b sees itself removed", isRemoved(bSelf.ID))
	select {
	case <-terminated:
	case <-time.After(waitTimeout):
		t.Fatal("b's OnTerminate was not called")
	}
	if ev := b.rec.all()[i].(membership.MemberRemoved); ev.Graceful {
		t.Errorf("b: %+v, want not graceful", ev)
	}
	if len(b.cluster.Members()) != 0 {
		t.Errorf("removed b still lists members: %v", b.memberIDs())
	}
	// Both saw the removal, as a crash, and say so when asked.
	for name, n := range map[string]*node{"a": a, "b": b} {
		rm, ok := membershiphook.Of(n.cluster).Removal(bSelf.ID)
		if !ok || rm.Graceful || rm.At.IsZero() {
			t.Errorf("%s: Removal(b) = %+v, %v; want a crash with its time", name, rm, ok)
		}
	}
	if _, ok := membershiphook.Of(a.cluster).Removal(a.id()); ok {
		t.Errorf("a: Removal of itself, a live member, is known")
	}
	if rm, ok := membershiphook.Of(b.cluster).SelfRemoval(); !ok || rm.Graceful {
		t.Errorf("b: SelfRemoval = %+v, %v; want its crash", rm, ok)
	}
	if _, ok := membershiphook.Of(a.cluster).SelfRemoval(); ok {
		t.Errorf("a: SelfRemoval known, but a was never removed")
	}

	// b's id comes back (a zombie registration, a TTL check healthy again),
	// then an unrelated member joins: by the time a sees that one, it has
	// read a snapshot with the zombie too.
	ctx := context.Background()
	if _, err := reg.Provider().Register(ctx, bSelf); err != nil {
		t.Fatal(err)
	}
	probe, err := reg.Provider().Register(ctx, membership.Member{ID: "probe", Address: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	a.rec.waitIndex(t, "a sees the probe up", isUp(probe.ID))
	ups := 0
	for _, m := range a.rec.all() {
		if isUp(bSelf.ID)(m) {
			ups++
		}
	}
	if ups != 1 {
		t.Errorf("a saw b up %d times, want once (before its removal): %v", ups, a.rec.all())
	}
	if got, want := a.memberIDs(), sorted(a.id(), probe.ID); !slices.Equal(got, want) {
		t.Errorf("a.Members = %v, want %v (b's id is not accepted again)", got, want)
	}
	// b, which terminates after a removal, stays out: only a, the zombie and the
	// probe are registered, and b got nothing after its removal.
	if got := len(reg.Members()); got != 3 {
		t.Errorf("registry holds %d members, want 3: %+v", got, reg.Members())
	}
	if msgs := b.rec.all(); !isRemoved(bSelf.ID)(msgs[len(msgs)-1]) {
		t.Errorf("b got events after its removal: %v", msgs)
	}
}

func TestRejoinAfterRemoval(t *testing.T) {
	reg := local.NewRegistry()
	a := startNode(t, reg, membership.Config{})
	b := startNode(t, reg, membership.Config{RejoinBackoff: 50 * time.Millisecond})
	old := b.cluster.Self()
	a.rec.waitIndex(t, "a sees b up", isUp(old.ID))

	reg.Remove(old.ID)

	removed := b.rec.waitIndex(t, "b sees itself removed", isRemoved(old.ID))
	var st *membership.CurrentClusterState
	b.rec.waitIndex(t, "b's new CurrentClusterState", func(m any) bool {
		s, ok := m.(*membership.CurrentClusterState)
		if ok && s.Self.ID != old.ID {
			st = s
		}
		return st != nil
	})
	if newState := b.rec.index(func(m any) bool { return m == any(st) }); newState < removed {
		t.Errorf("new state at %d before the removal at %d: %v", newState, removed, b.rec.all())
	}
	if st.Self.Age <= old.Age {
		t.Errorf("new member age %d, want larger than the old %d", st.Self.Age, old.Age)
	}
	if len(st.Members) != 2 || st.Members[0].ID != a.id() || st.Members[1].ID != st.Self.ID {
		t.Errorf("new state members = %+v, want [a, new b]", st.Members)
	}
	if b.id() != st.Self.ID {
		t.Errorf("Self = %s, want the new member %s", b.id(), st.Self.ID)
	}

	oldRemoved := a.rec.waitIndex(t, "a sees old b removed", isRemoved(old.ID))
	newUp := a.rec.waitIndex(t, "a sees new b up", isUp(st.Self.ID))
	if oldRemoved > newUp {
		t.Errorf("a: new b up at %d before old b removed at %d", newUp, oldRemoved)
	}
	if oldest, _ := membership.Oldest(a.cluster.Members(), ""); oldest.ID != a.id() {
		t.Errorf("oldest = %s, want a (b re-joined as the youngest)", oldest.ID)
	}
	if got, want := a.memberIDs(), sorted(a.id(), st.Self.ID); !slices.Equal(got, want) {
		t.Errorf("a.Members = %v, want %v", got, want)
	}
	if got := len(reg.Members()); got != 2 {
		t.Errorf("registry holds %d members, want 2: %+v", got, reg.Members())
	}
}
