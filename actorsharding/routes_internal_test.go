package actorsharding

import (
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/shardproto"
)

type countingProcess struct{ n atomic.Int64 }

func (p *countingProcess) SendUserMessage(*actor.PID, any)   { p.n.Add(1) }
func (p *countingProcess) SendSystemMessage(*actor.PID, any) {}
func (p *countingProcess) Stop(*actor.PID)                   {}

// TestEntityRoutes drives a shard's routes as the shard and the router
// use them: open, send, use, close, reopen.
func TestEntityRoutes(t *testing.T) {
	system := actor.NewActorSystem()
	table := newRouteTable(system, "T")
	sr := table.shard("7")
	if sr != table.shard("7") {
		t.Fatal("a shard's route is made twice")
	}
	target := &countingProcess{}
	pid, _ := system.ProcessRegistry.Add(target, "entity-a")
	send := func() bool {
		e := table.entities.get("a")
		return e != nil && e.send(system.Root, nil, "m")
	}

	if send() {
		t.Fatal("sent to an entity never opened")
	}
	sr.Open("a", pid)
	first := table.entities.get("a")
	sr.Open("a", pid) // already open to pid: kept
	if table.entities.get("a") != first {
		t.Fatal("opening an open route again replaced it")
	}
	if sr.TakeUsed("a") {
		t.Fatal("used before any send")
	}
	if !send() || !send() || target.n.Load() != 2 {
		t.Fatalf("sends through an open route: %d arrived, want 2", target.n.Load())
	}
	if !sr.TakeUsed("a") || sr.TakeUsed("a") {
		t.Fatal("TakeUsed: want true once after sends, then false")
	}
	sr.Close("a")
	if send() || first.send(system.Root, nil, "late") {
		t.Fatal("sent through a closed route")
	}
	if target.n.Load() != 2 {
		t.Fatalf("%d arrived after the close, want 2", target.n.Load())
	}
	sr.Close("a") // closing a closed route does nothing

	// A new incarnation replaces the route; the old one is closed.
	other, _ := system.ProcessRegistry.Add(&countingProcess{}, "entity-a2")
	sr.Open("a", pid)
	old := table.entities.get("a")
	sr.Open("a", other)
	if old.send(system.Root, nil, "x") {
		t.Fatal("the replaced route still sends")
	}
	if table.entities.get("a").pid != other {
		t.Fatal("the route does not lead to the new incarnation")
	}
}

// TestPending: each mark counts once, however often it is released.
func TestPending(t *testing.T) {
	var count atomic.Int64
	p1, p2 := shardproto.NewPending(&count), shardproto.NewPending(&count)
	if count.Load() != 2 {
		t.Fatalf("pending %d, want 2", count.Load())
	}
	p1.Release()
	p1.Release()
	if count.Load() != 1 {
		t.Fatalf("pending %d after releasing one twice, want 1", count.Load())
	}
	p2.Release()
	var none *shardproto.Pending
	none.Release()
	if count.Load() != 0 {
		t.Fatalf("pending %d, want 0", count.Load())
	}
}
