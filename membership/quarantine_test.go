package membership_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"

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
	cluster *membership.Cluster
	inbox   *inbox
	pid     *actor.PID
	q       *membership.Quarantine
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
	t.Cleanup(func() {
		c.Close()
		r.Shutdown(false)
		system.Shutdown()
	})
	box := &inbox{}
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return box }), "inbox")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := c.Join(ctx); err != nil {
		t.Fatalf("join: %v", err)
	}
	return &quarantinedNode{system: system, cluster: c, inbox: box, pid: pid, q: q}
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
	waitFor(t, func() bool { return a.q.SystemBlocked(old.SystemID) }, "a to quarantine b's actor system")
	if !a.q.AddressBlocked(old.Address) {
		t.Fatal("b's address is not blocked")
	}
	// a's connection to b ends (as it does when b's process dies, or the
	// network between them); a must not open a new one.
	a.system.EventStream.Publish(&remote.EndpointTerminatedEvent{Address: old.Address})
	b.system.Root.Send(a.pid, &testpb.Ping{Seq: 2})
	a.system.Root.Send(b.pid, &testpb.Ping{Seq: 2})
	time.Sleep(time.Second)
	if a.inbox.has(2) {
		t.Error("a processed a message from the removed member")
	}
	if b.inbox.has(2) {
		t.Error("a dialled the removed member and delivered a message")
	}

	waitFor(t, func() bool { return b.cluster.Self().ID != old.ID && len(a.cluster.Members()) == 2 }, "b to join again")
	if a.q.SystemBlocked(old.SystemID) || a.q.AddressBlocked(old.Address) {
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
	waitFor(t, func() bool { _, seen := a.cluster.Removal(old.ID); return seen }, "a to see the old member removed")
	if a.q.SystemBlocked(old.SystemID) || a.q.AddressBlocked(old.Address) {
		t.Fatal("the live member that shares the removed one's address and actor system is quarantined")
	}
}
