package actorsharding_test

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/shardproto"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/testkit"
)

// An entity that stops itself (ctx.Stop, not Passivate) while one sender
// keeps sending: each message after the stop either reaches an
// incarnation of the entity, in the order sent, or is dropped with a
// dead-letter event whose reason says the entity stopped; none vanishes.
// With routes (the default) the region's router sends straight into the
// stopped entity's mailbox until the shard hears of the termination; with
// an active-entity limit there are no routes and the shard sends.
//
// Before, proto.actor discarded what reached the stopped mailbox without
// any event: 2,691 and 6,177 of 20,000 with routes, 300 without.
func TestSelfStoppingEntityLosesNothingSilently(t *testing.T) {
	cases := []struct {
		name string
		opts []actorsharding.Option
	}{
		{"routes", nil},
		{"no routes", []actorsharding.Option{actorsharding.WithActiveEntityLimit(1000, "")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for run := range 3 {
				w := newLocalWorld(t, tc.opts...)
				n := w.startNode(false)
				w.waitRegistered(1)
				stopAndSend(t, w, n, fmt.Sprintf("stopper-%d", run))
			}
		})
	}
}

// stopAndSend tells entity id to stop, then sends it 20,000 Pings with
// another stop every 5,000, and checks what became of each Ping.
func stopAndSend(t *testing.T, w *world, n *testkit.Node, id string) {
	t.Helper()
	const first, sent, stopEvery = 3, 20_000, 5_000
	region := w.region(n)
	askEventually(t, n, region, id, 1)
	askEventually(t, n, region, id, 2) // its second message opens its route
	for i := range sent {
		if i%stopEvery == 0 {
			n.System.Root.Send(region, pingMsg(id, stopSeq))
		}
		n.System.Root.Send(region, pingMsg(id, int64(first+i)))
	}
	var got outcome
	testkit.WaitFor(t, 30*time.Second, func() bool {
		got = outcomeOf(w, id, first)
		return got.delivered+got.dropped >= sent
	}, "entity %s: %s", id, testkit.Lazy(func() any { return got.describe(sent) }))
	// A moment more: nothing may be counted twice.
	time.Sleep(200 * time.Millisecond)
	got = outcomeOf(w, id, first)
	if got.delivered+got.dropped != sent || got.twice > 0 || got.outOfOrder > 0 || len(got.otherReasons) > 0 {
		t.Fatalf("entity %s: %s", id, got.describe(sent))
	}
	t.Logf("entity %s: %s", id, got.describe(sent))
}

// outcome is what became of the Pings sent to one entity.
type outcome struct {
	delivered, dropped int
	twice              int      // seqs both delivered and dropped, or either twice
	outOfOrder         int      // delivered after a later seq of the same sender
	otherReasons       []string // drops without ErrEntityStopped
}

func (o outcome) describe(sent int) string {
	sort.Strings(o.otherReasons)
	return fmt.Sprintf("%d sent, %d delivered, %d dropped with an event, %d vanished, %d counted twice, %d out of order, other reasons %q",
		sent, o.delivered, o.dropped, sent-o.delivered-o.dropped, o.twice, o.outOfOrder, o.otherReasons)
}

// outcomeOf counts the Pings of seq from on that entity id received, and
// those dropped with an event.
func outcomeOf(w *world, id string, from int64) outcome {
	var o outcome
	seen := map[int64]bool{}
	last := int64(0)
	for _, seq := range w.received.get(id) {
		if seq < from {
			continue
		}
		if seen[seq] {
			o.twice++
		}
		if seq < last {
			o.outOfOrder++
		}
		seen[seq], last = true, seq
		o.delivered++
	}
	for _, d := range w.dropped() {
		p := droppedPing(d)
		if p == nil || p.EntityId != id || p.Seq < from {
			continue
		}
		if seen[p.Seq] {
			o.twice++
		}
		seen[p.Seq] = true
		o.dropped++
		if !errors.Is(d.Err, actorsharding.ErrEntityStopped) {
			o.otherReasons = append(o.otherReasons, d.Reason)
		}
	}
	return o
}

// droppedPing is the Ping a dead-letter event reports, if any.
func droppedPing(d *deadletter.Event) *testpb.Ping {
	switch m := d.Message.(type) {
	case *testpb.Ping:
		return m
	case *shardproto.Deliver:
		p, _ := m.Message.(*testpb.Ping)
		return p
	}
	return nil
}

// A request whose message reaches an entity that has stopped itself fails
// at once, with the reason, instead of waiting for its timeout.
func TestRequestToSelfStoppedEntityFailsFast(t *testing.T) {
	w := newLocalWorld(t)
	n := w.startNode(false)
	w.waitRegistered(1)
	s, err := actorsharding.New(n.System, n.Membership)
	if err != nil {
		t.Fatal(err)
	}
	const id, rounds, concurrent, timeout = "stopper", 20, 20, 10 * time.Second
	ref, err := s.EntityRefFor(typeName, id)
	if err != nil {
		t.Fatal(err)
	}
	askEventually(t, n, w.region(n), id, 1)
	askEventually(t, n, w.region(n), id, 2) // its second message opens its route
	var mu sync.Mutex
	answered, dropped, slow := 0, 0, []string{}
	for round := range rounds {
		if err := ref.Send(pingMsg(id, stopSeq)); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := range concurrent {
			wg.Add(1)
			go func(seq int64) {
				defer wg.Done()
				start := time.Now()
				res, err := requestWithin(ref, pingMsg(id, seq), timeout)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					if _, ok := res.(*testpb.Pong); !ok {
						t.Errorf("request %d: answer %T", seq, res)
					}
					answered++
				case errors.Is(err, actorsharding.ErrEntityStopped) && errors.Is(err, actor.ErrDeadLetter):
					dropped++
				default:
					slow = append(slow, fmt.Sprintf("request %d: %v after %v", seq, err, time.Since(start).Round(time.Millisecond)))
				}
			}(int64(3 + round*concurrent + i))
		}
		wg.Wait()
	}
	t.Logf("%d answered, %d dropped with the entity's stop, %d otherwise", answered, dropped, len(slow))
	if len(slow) > 0 {
		t.Fatalf("%d of %d requests did not fail fast with ErrEntityStopped:\n%v", len(slow), rounds*concurrent, slow)
	}
}
