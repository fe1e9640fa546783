package testkit

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/protoshard/protoshard/internal/raceflag"
	"github.com/protoshard/protoshard/internal/testwait"
	"github.com/protoshard/protoshard/messages"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/protoshard/protoshard/membership"
)

// timeout is generous: tests assert that events happen, not how fast.
const timeout = 30 * time.Second

func removedOf(id string) func(any) bool {
	return func(m any) bool { e, ok := m.(membership.MemberRemoved); return ok && e.Member.ID == id }
}

func leftOf(id string) func(any) bool {
	return func(m any) bool { e, ok := m.(membership.MemberLeft); return ok && e.Member.ID == id }
}

// subscribed starts a probe on n subscribed to its membership events.
func subscribed(n *Node) *testwait.Probe {
	p := testwait.NewProbe(n.System)
	n.Membership.Subscribe(p.PID())
	return p
}

func memberIDsOf(n *Node) []string { return memberIDs(n.Membership.Members()) }

func TestClusterConverges(t *testing.T) {
	c := NewCluster(t, nil)
	n1 := c.StartNode(WithName("first"))
	n2 := c.StartNode(WithRoles("r"))
	n3 := c.StartNode(WithRoles("r", "s"))
	c.WaitConverged(t, timeout)

	want := memberIDs([]membership.Member{n1.Membership.Self(), n2.Membership.Self(), n3.Membership.Self()})
	for _, n := range c.Running() {
		if got := memberIDsOf(n); !slices.Equal(got, want) {
			t.Errorf("%s sees %v, want %v", n, got, want)
		}
	}
	if n1.Name != "first" || n2.Name != "node-2" {
		t.Errorf("names %q, %q", n1.Name, n2.Name)
	}
	addrs := map[string]bool{}
	for _, n := range c.Nodes() {
		if n.Address() == "" || n.Address() == "nonhost" || addrs[n.Address()] {
			t.Errorf("%s: bad or duplicate address %q", n.Name, n.Address())
		}
		addrs[n.Address()] = true
	}
	if got := c.Oldest(""); got != n1 {
		t.Errorf("Oldest(\"\") = %v, want %v", got, n1)
	}
	if got := c.Oldest("r"); got != n2 {
		t.Errorf("Oldest(r) = %v, want %v", got, n2)
	}
	if got := c.Oldest("s"); got != n3 {
		t.Errorf("Oldest(s) = %v, want %v", got, n3)
	}
	if got := c.Oldest("none"); got != nil {
		t.Errorf("Oldest(none) = %v, want nil", got)
	}
	if !slices.Equal(n3.Membership.Self().Roles, []string{"r", "s"}) {
		t.Errorf("roles of n3 = %v", n3.Membership.Self().Roles)
	}
}

func TestCrashIsSeenByTheOthers(t *testing.T) {
	c := NewCluster(t, nil)
	n1 := c.StartNode()
	n2 := c.StartNode()
	n3 := c.StartNode()
	c.WaitConverged(t, timeout)
	p1, p2, p3 := subscribed(n1), subscribed(n2), subscribed(n3)

	// An actor on the node that crashes ends with it, and says so.
	ledger := NewLedger()
	n1.System.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *actor.Started:
			ledger.Started("victim", n1.MemberID())
		case *actor.Stopped:
			ledger.Stopped("victim", n1.MemberID())
		}
	}))
	ledger.WaitActive(t, "victim", timeout)

	crashed := n1.MemberID()
	n1.Crash()
	n1.Crash() // idempotent
	if !n1.isStopped() || n2.isStopped() {
		t.Fatalf("Stopped: n1 %v, n2 %v", n1.isStopped(), n2.isStopped())
	}
	if got := ledger.Active("victim"); len(got) != 0 {
		t.Errorf("actors of the crashed node still active: %v", got)
	}
	for _, p := range []*testwait.Probe{p2, p3} {
		_, ev := p.Wait(t, timeout, "the crash seen", removedOf(crashed))
		if ev.(membership.MemberRemoved).Graceful {
			t.Errorf("a crash was reported graceful: %+v", ev)
		}
	}
	c.WaitConverged(t, timeout)
	if got := len(c.Running()); got != 2 {
		t.Errorf("%d running, want 2", got)
	}
	if got := memberIDsOf(n2); len(got) != 2 || slices.Contains(got, crashed) {
		t.Errorf("n2 sees %v", got)
	}
	if got := c.Oldest(""); got != n2 {
		t.Errorf("Oldest = %v, want %v (the next oldest)", got, n2)
	}
	if p1.Index(removedOf(crashed)) >= 0 {
		t.Error("the crashed node published its own removal; a crash says nothing")
	}
	if len(c.Nodes()) != 3 {
		t.Errorf("Nodes() = %d, want 3 (stopped ones included)", len(c.Nodes()))
	}
}

func TestCrashWithFailureDetectionDelay(t *testing.T) {
	b := NewLocalBackend()
	b.FailureDetectionDelay = 200 * time.Millisecond
	c := NewCluster(t, b)
	n1, n2 := c.StartNode(), c.StartNode()
	p := subscribed(n1)
	id := n2.MemberID()
	n2.Crash()
	p.Wait(t, timeout, "the delayed removal", removedOf(id))
	c.WaitConverged(t, timeout)
}

func TestGracefulLeaveIsSeen(t *testing.T) {
	c := NewCluster(t, nil)
	n1 := c.StartNode()
	n2 := c.StartNode()
	n3 := c.StartNode()
	c.WaitConverged(t, timeout)
	p2, p3 := subscribed(n2), subscribed(n3)

	left := n1.MemberID()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := n1.Leave(ctx); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if err := n1.Leave(ctx); err == nil {
		t.Error("second Leave succeeded")
	}
	for _, p := range []*testwait.Probe{p2, p3} {
		r, ev := p.Wait(t, timeout, "the leave seen", removedOf(left))
		if !ev.(membership.MemberRemoved).Graceful {
			t.Errorf("a graceful leave was reported as a crash: %+v", ev)
		}
		if l := p.Index(leftOf(left)); l < 0 || l > r {
			t.Errorf("MemberLeft at %d, MemberRemoved at %d: %+v", l, r, p.Messages())
		}
	}
	c.WaitConverged(t, timeout)
	if got := c.Oldest(""); got != n2 {
		t.Errorf("Oldest = %v, want %v", got, n2)
	}
	if !n1.isStopped() || !n1.System.IsStopped() {
		t.Error("the node that left is not stopped")
	}
}

func TestRemovedNodeRejoinsOrStaysOut(t *testing.T) {
	b := NewLocalBackend()
	c := NewCluster(t, b)
	n1 := c.StartNode()
	n2 := c.StartNode()
	n3 := c.StartNode(WithStayOutAfterRemoval())
	c.WaitConverged(t, timeout)

	old2, old3 := n2.Membership.Self(), n3.MemberID()
	b.Registry.Remove(old2.ID)
	b.Registry.Remove(old3)
	// n2 comes back as a new, youngest member; n3 stays out and no longer
	// counts, though its actor system still runs.
	WaitFor(t, timeout, func() bool { return n2.MemberID() != old2.ID }, "n2 to re-join")
	c.WaitConverged(t, timeout)
	if got, want := memberIDsOf(n1), memberIDs([]membership.Member{n1.Membership.Self(), n2.Membership.Self()}); !slices.Equal(got, want) {
		t.Errorf("n1 sees %v, want %v", got, want)
	}
	if n2.Membership.Self().Age <= old2.Age {
		t.Errorf("re-joined age %d, want larger than %d", n2.Membership.Self().Age, old2.Age)
	}
	if n3.isStopped() || len(c.Running()) != 3 {
		t.Error("n3 is still running, only out of the cluster")
	}
	n1.Crash()
	if got := c.Oldest(""); got != n2 {
		t.Errorf("Oldest = %v, want the re-joined n2 (n3 is out)", got)
	}
}

func TestWithBeforeJoinAndMembershipConfig(t *testing.T) {
	c := NewCluster(t, nil)
	var probe *testwait.Probe
	var cfgSeen bool
	n := c.StartNode(
		WithMembershipConfig(func(cfg *membership.Config) { cfgSeen = cfg.RejoinBackoff > 0 }),
		WithBeforeJoin(func(n *Node) { probe = subscribed(n) }),
	)
	if !cfgSeen {
		t.Error("WithMembershipConfig did not see the harness's defaults")
	}
	// Subscribed before the join: the very first state has the node.
	_, msg := probe.Wait(t, timeout, "the first state", func(m any) bool {
		_, ok := m.(*membership.CurrentClusterState)
		return ok
	})
	if st := msg.(*membership.CurrentClusterState); st.Self.ID != n.MemberID() {
		t.Errorf("first state's self %s, want %s", st.Self.ID, n.MemberID())
	}
}

// A crashed node's actors all finish stopping before Crash returns, even
// one watched from another node: stopping it notifies its remote watcher,
// which needs the remote's own actors to still be there.
func TestCrashStopsRemotelyWatchedActors(t *testing.T) {
	c := NewCluster(t, nil)
	n1, n2 := c.StartNode(), c.StartNode()
	ledger := NewLedger()
	lifecycle := func(key string) func(actor.Context) {
		return func(ctx actor.Context) {
			switch ctx.Message().(type) {
			case *actor.Started:
				ledger.Started(key, "n1")
			case *actor.Stopped:
				ledger.Stopped(key, "n1")
			case *wrapperspb.StringValue:
				ledger.Started("pinged", "n1")
			}
		}
	}
	parent, err := n1.System.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*actor.Started); ok {
			if _, err := ctx.SpawnNamed(actor.PropsFromFunc(lifecycle("child")), "child"); err != nil {
				panic(err)
			}
		}
		lifecycle("parent")(ctx)
	}), "parent")
	if err != nil {
		t.Fatal(err)
	}
	child := actor.NewPID(n1.Address(), parent.Id+"/child")
	ledger.WaitActive(t, "child", timeout)
	n2.System.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*actor.Started); ok {
			ctx.Watch(child)
			ctx.Send(child, wrapperspb.String("ping")) // after the watch, on the same connection
		}
	}))
	ledger.WaitActive(t, "pinged", timeout)

	n1.Crash()
	for _, key := range []string{"parent", "child"} {
		if a := ledger.Active(key); len(a) != 0 {
			t.Errorf("%s still active after Crash returned", key)
		}
	}
}

// A crashed node sends nothing: not even the Terminated or goodbye messages
// of the actors that Crash stops.
func TestCrashSendsNothing(t *testing.T) {
	if raceflag.Enabled {
		t.Skip("several remotes in one process race on grpc's global logger")
	}
	c := NewCluster(t, NewLocalBackend())
	a, b := c.StartNode(), c.StartNode()
	probe := testwait.NewProbe(a.System)
	stopping := make(chan struct{})
	pid := b.System.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *actor.Started:
			ctx.Send(probe.PID(), &messages.GetCurrentRegions{}) // any proto message: "started"
		case *actor.Stopping:
			ctx.Send(probe.PID(), &messages.GracefulShutdown{}) // "goodbye"
			close(stopping)
		}
	}))
	a.System.Root.Send(pid, &actor.Watch{Watcher: probe.PID()}) // a remote watch, as Watch() from a's actor would
	probe.Wait(t, 10*time.Second, "started", func(m any) bool { _, ok := m.(*messages.GetCurrentRegions); return ok })
	b.Crash()
	<-stopping
	// A positive answer would arrive within milliseconds; this only bounds
	// how long the absence is checked.
	time.Sleep(2 * time.Second)
	for _, m := range probe.Messages() {
		if _, ok := m.(*messages.GracefulShutdown); ok {
			t.Fatal("the crashed node sent a message after its crash")
		}
		if term, ok := m.(*actor.Terminated); ok && term.Why != actor.TerminatedReason_AddressTerminated {
			t.Fatalf("the crashed node sent %v", term)
		}
	}
}
