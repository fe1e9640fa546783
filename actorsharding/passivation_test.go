package actorsharding_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/shardactor"
	"github.com/protoshard/protoshard/testkit"
)

// Test entity commands (Ping.Seq values).
const (
	stopSeq          = -2 // the entity stops itself
	panicSeq         = -3 // the entity panics
	slowPassivateSeq = -4 // the entity passivates with stop message slowStopSeq
	slowStopSeq      = -5 // the entity stops once the test releases it
	flushAndStopSeq  = -6 // the entity records it, then stops (a custom hand-off stop message)
)

// A custom hand-off stop message: every entity of a region that shuts down
// gets it (and can flush its state) before it stops.
func TestCustomHandOffStopMessage(t *testing.T) {
	w := newLocalWorld(t, actorsharding.WithHandOffStopMessage(&testpb.Ping{Seq: flushAndStopSeq}),
		actorsharding.WithRebalanceInterval(time.Hour))
	a, b := w.startNode(false), w.startNode(false)
	w.cluster.WaitConverged(t, 30*time.Second)
	w.waitRegistered(2)
	homes := homesOf(t, a, w, entityIDs(40), 1)
	onB := onNode(homes, b)
	if len(onB) == 0 {
		t.Fatal("no entity on the node that leaves")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := b.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range onB {
		got := w.received.get(id)
		if len(got) == 0 || got[len(got)-1] != flushAndStopSeq {
			t.Fatalf("entity %s did not get the hand-off stop message before stopping: %v", id, got)
		}
		if p := askEventually(t, a, w.region(a), id, 2); p.Node != a.Address() {
			t.Fatalf("entity %s answers from %s", id, p.Node)
		}
	}
}

// Passivate through a region: the messages sent while the entity stops
// reach its next incarnation, all of them, in order.
func TestPassivateKeepsMessages(t *testing.T) {
	w := newLocalWorld(t)
	n := w.startNode(false)
	w.waitRegistered(1)
	askEventually(t, n, w.region(n), "p", 0)
	n.System.Root.Send(w.region(n), pingMsg("p", slowPassivateSeq))
	select {
	case <-w.stopping: // the shard has taken the Passivate
	case <-time.After(30 * time.Second):
		t.Fatal("the entity never got its stop message")
	}
	for seq := int64(1); seq <= 200; seq++ {
		n.System.Root.Send(w.region(n), pingMsg("p", seq))
	}
	close(w.release)
	testkit.WaitFor(t, 30*time.Second, func() bool { return len(w.received.get("p")) == 201 },
		"received %v of 201", testkit.Lazy(func() any { return len(w.received.get("p")) }))
	got := w.received.get("p")
	if !slices.IsSorted(got) {
		t.Fatalf("out of order: %v", got)
	}
	if s := w.ledger.Starts("p"); s != 2 {
		t.Fatalf("starts = %d, want 2: the held messages go to a new incarnation", s)
	}
}

// Idle passivation fires after the set time, and again for later
// incarnations.
func TestIdlePassivation(t *testing.T) {
	w := newLocalWorld(t, actorsharding.WithPassivationIdleTimeout(300*time.Millisecond))
	n := w.startNode(false)
	w.waitRegistered(1)
	for round := 1; round <= 3; round++ {
		askEventually(t, n, w.region(n), "idle", int64(round))
		testkit.WaitFor(t, 30*time.Second, func() bool { return len(w.ledger.Active("idle")) == 0 },
			"round %d: the idle entity was not passivated", round)
		if s := w.ledger.Starts("idle"); s != round {
			t.Fatalf("round %d: %d starts", round, s)
		}
	}
}

// The active-entity limit passivates the least recently used entity, and a
// limit changed at run time applies at once.
func TestActiveEntityLimit(t *testing.T) {
	w := newLocalWorld(t, actorsharding.WithActiveEntityLimit(3, ""), actorsharding.WithPassivationIdleTimeout(-1))
	w.shards = 1 // one shard: it gets the whole region limit
	n := w.startNode(false)
	w.waitRegistered(1)
	for _, id := range []string{"a", "b", "c"} {
		askEventually(t, n, w.region(n), id, 1)
	}
	askEventually(t, n, w.region(n), "a", 2) // a is now the most recently used
	askEventually(t, n, w.region(n), "d", 1) // over the limit: b goes
	testkit.WaitFor(t, 30*time.Second, func() bool { return len(w.ledger.Active("b")) == 0 }, "b was not passivated")
	for _, id := range []string{"a", "c", "d"} {
		if len(w.ledger.Active(id)) != 1 {
			t.Fatalf("%s was passivated; only b should be", id)
		}
	}
	n.System.Root.Send(w.region(n), &actorsharding.SetActiveEntityLimit{Limit: 1})
	testkit.WaitFor(t, 30*time.Second, func() bool {
		return len(w.ledger.Active("a")) == 0 && len(w.ledger.Active("c")) == 0 && len(w.ledger.Active("d")) == 1
	}, "the lowered limit did not keep only the most recent entity (d)")
}

// A remembered entity that stops on its own, or fails under a stopping
// supervisor strategy, starts again after entity-restart-backoff without
// any message.
func TestRememberedEntityRestartBackoff(t *testing.T) {
	stop := actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })
	w := newLocalWorld(t, actorsharding.WithRememberEntities(shardactor.NewMemoryRememberEntitiesStore()),
		actorsharding.WithEntityRestartBackoff(300*time.Millisecond), actorsharding.WithEntitySupervisorStrategy(stop))
	n := w.startNode(false)
	w.waitRegistered(1)
	askEventually(t, n, w.region(n), "r", 1)
	n.System.Root.Send(w.region(n), pingMsg("r", stopSeq))
	testkit.WaitFor(t, 30*time.Second, func() bool { return w.ledger.Starts("r") == 2 && len(w.ledger.Active("r")) == 1 },
		"the stopped entity did not start again (starts %v)", testkit.Lazy(func() any { return w.ledger.Starts("r") }))
	n.System.Root.Send(w.region(n), pingMsg("r", panicSeq))
	testkit.WaitFor(t, 30*time.Second, func() bool { return w.ledger.Starts("r") == 3 && len(w.ledger.Active("r")) == 1 },
		"the failed entity did not start again (starts %v)", testkit.Lazy(func() any { return w.ledger.Starts("r") }))
}
