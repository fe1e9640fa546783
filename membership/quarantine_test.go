package membership_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
)

// inbox is an actor that keeps the Pings it gets.
type inbox struct {
	mu  sync.Mutex
	got []int64
}

func (b *inbox) Receive(ctx actor.Context) {
	if p, ok := ctx.Message().(*testpb.Ping); ok {
		b.mu.Lock()
		b.got = append(b.got, p.Seq)
		b.mu.Unlock()
	}
}

func (b *inbox) has(seq int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.got {
		if s == seq {
			return true
		}
	}
	return false
}

type quarantinedNode struct {
	system  *actor.ActorSystem
	remote  *remote.Remote
	cluster *membership.Cluster
	inbox   *inbox
	pid     *actor.PID
	q       *membership.Quarantine
	stopped sync.Once
}

// crash stops the node without a goodbye (once; the test's cleanup calls
// it too).
func (n *quarantinedNode) crash() {
	n.stopped.Do(func() {
		n.cluster.Close()
		n.remote.Shutdown(false)
		n.system.Shutdown()
	})
}

func startQuarantinedNode(t *testing.T, reg *local.Registry, cfg membership.Config) *quarantinedNode {
	t.Helper()
	if raceEnabled {
		t.Skip("starts proto.actor remotes, which race on grpc's global logger")
	}
	q := membership.NewQuarantine()
	system := quietSystem()
	r := remote.NewRemote(system, remote.Configure("127.0.0.1", 0, q.RemoteOption()))
	r.Start()
	cfg.Quarantine = q
	c := membership.NewCluster(system, reg.Provider(), cfg)
	n := &quarantinedNode{system: system, remote: r, cluster: c, q: q, inbox: &inbox{}}
	t.Cleanup(n.crash)
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return n.inbox }), "inbox")
	if err != nil {
		t.Fatal(err)
	}
	n.pid = pid
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := c.Join(ctx); err != nil {
		t.Fatalf("join: %v", err)
	}
	return n
}

// A member removed while it still runs (paused, cut off) is quarantined:
// nothing it sends is processed, and it is not dialled; once it has joined
// again as a new member, both ways work again.
func TestQuarantineOfARemovedMember(t *testing.T) {
	reg := local.NewRegistry()
	a := startQuarantinedNode(t, reg, membership.Config{})
	b := startQuarantinedNode(t, reg, membership.Config{RejoinBackoff: 3 * time.Second})
	waitFor(t, func() bool { return len(a.cluster.Members()) == 2 }, "a to see b")

	b.system.Root.Send(a.pid, &testpb.Ping{Seq: 1})
	a.system.Root.Send(b.pid, &testpb.Ping{Seq: 1})
	waitFor(t, func() bool { return a.inbox.has(1) && b.inbox.has(1) }, "both ways before the removal")

	old := b.cluster.Self()
	reg.Remove(old.ID)
	waitFor(t, func() bool { return membership.SystemBlocked(a.q, old.SystemID) }, "a to quarantine b's actor system")
	if !membership.AddressBlocked(a.q, old.Address) {
		t.Fatal("b's address is not blocked")
	}
	// a's connection to b ends (as it does when b's process dies, or the
	// network between them); a must not open a new one. What a sends b
	// now is dropped at a, with a reason, and a watch of b's actors ends
	// at once.
	a.system.EventStream.Publish(&remote.EndpointTerminatedEvent{Address: old.Address})
	dropped := make(chan *deadletter.Event, 10)
	a.system.EventStream.Subscribe(func(e any) {
		if d, ok := e.(*deadletter.Event); ok && strings.Contains(d.Reason, "removed from the cluster") {
			dropped <- d
		}
	})
	b.system.Root.Send(a.pid, &testpb.Ping{Seq: 2})
	a.system.Root.Send(b.pid, &testpb.Ping{Seq: 2})
	select {
	case d := <-dropped:
		if d.Target.GetAddress() != old.Address {
			t.Errorf("dropped %v, want the message to b", d)
		}
	case <-time.After(waitTimeout):
		t.Error("no dead-letter event for the message to the removed member")
	}
	terminated := make(chan *actor.Terminated, 1)
	a.system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			ctx.Watch(b.pid)
		case *actor.Terminated:
			terminated <- m
		}
	}))
	select {
	case m := <-terminated:
		if !m.Who.Equal(b.pid) || m.Why != actor.TerminatedReason_AddressTerminated {
			t.Errorf("watch of the removed member's actor ended with %v", m)
		}
	case <-time.After(waitTimeout):
		t.Error("a watch of the removed member's actor did not end")
	}
	time.Sleep(time.Second)
	if a.inbox.has(2) {
		t.Error("a processed a message from the removed member")
	}
	if b.inbox.has(2) {
		t.Error("a dialled the removed member and delivered a message")
	}

	waitFor(t, func() bool { return b.cluster.Self().ID != old.ID && len(a.cluster.Members()) == 2 }, "b to join again")
	if membership.SystemBlocked(a.q, old.SystemID) || membership.AddressBlocked(a.q, old.Address) {
		t.Fatal("the quarantine outlived the member's re-join")
	}
	waitFor(t, func() bool {
		b.system.Root.Send(a.pid, &testpb.Ping{Seq: 3})
		a.system.Root.Send(b.pid, &testpb.Ping{Seq: 3})
		return a.inbox.has(3) && b.inbox.has(3)
	}, "both ways after the re-join")
}

// A process restarted on its address, or a node that joined again, is a
// new member with the old one's address or actor system; the old one's
// removal may come after the new one's MemberUp (its TTL runs out later).
// The live member must not be quarantined by it.
func TestQuarantineSparesALiveMemberOfTheSameAddressAndSystem(t *testing.T) {
	reg := local.NewRegistry()
	a := startQuarantinedNode(t, reg, membership.Config{})
	ctx := context.Background()
	old, err := reg.Provider().Register(ctx, membership.Member{ID: "old", Address: "127.0.0.1:1", SystemID: "sys-1"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(a.cluster.Members()) == 2 }, "a to see the old member")
	if _, err := reg.Provider().Register(ctx, membership.Member{ID: "new", Address: old.Address, SystemID: old.SystemID}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(a.cluster.Members()) == 3 }, "a to see the new member")
	reg.Remove(old.ID)
	waitFor(t, func() bool { _, seen := membershiphook.Of(a.cluster).Removal(old.ID); return seen }, "a to see the old member removed")
	if membership.SystemBlocked(a.q, old.SystemID) || membership.AddressBlocked(a.q, old.Address) {
		t.Fatal("the live member that shares the removed one's address and actor system is quarantined")
	}
}

// The remote opens an endpoint by itself to pass on the Terminated of an
// actor it watched on a member that has left: to a quarantined address it
// connects at once to a sink that ends soon, so the Terminated arrives and
// the node's graceful remote shutdown does not wait. (proto.actor's
// endpoint writer retried the refused connection for ten seconds, and
// the shutdown waited for it.)
func TestQuarantinedAddressHoldsNothingUp(t *testing.T) {
	reg := local.NewRegistry()
	a := startQuarantinedNode(t, reg, membership.Config{})
	b := startQuarantinedNode(t, reg, membership.Config{})
	waitFor(t, func() bool { return len(a.cluster.Members()) == 2 }, "a to see b")
	terminated := make(chan *actor.Terminated, 1)
	bInbox := actor.NewPID(b.pid.Address, b.pid.Id) // a PID caches its process: not b's own
	a.system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			ctx.Watch(bInbox)
			ctx.Send(bInbox, &testpb.Ping{Seq: 1})
		case *actor.Terminated:
			terminated <- m
		}
	}))
	waitFor(t, func() bool { return b.inbox.has(1) }, "the watcher's ping to reach b (after its watch)")

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := b.cluster.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return membership.AddressBlocked(a.q, b.system.Address()) }, "a to quarantine b's address")
	// a's endpoint to b ends; then b's actor stops, and its Terminated
	// reaches a, whose remote opens an endpoint to b's address for it.
	a.system.EventStream.Publish(&remote.EndpointTerminatedEvent{Address: b.system.Address()})
	select {
	case m := <-terminated:
		if m.Why != actor.TerminatedReason_AddressTerminated {
			t.Fatalf("the endpoint's end told the watcher %v", m)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the watcher was not told that b's endpoint ended")
	}
	if err := b.system.Root.StopFuture(b.pid).Wait(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the Terminated crosses; a's remote opens the endpoint
	start := time.Now()
	a.remote.Shutdown(true)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("a's graceful remote shutdown took %v", took)
	}
}
