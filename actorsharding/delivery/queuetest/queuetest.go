// Package queuetest holds the contract tests of delivery.DurableProducerQueue:
// every implementation runs them (the memory and file queues in package
// delivery, the Consul queue in actorsharding/consulstore) through Run with
// a Harness of its own.
package queuetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/protoshard/protoshard/actorsharding/delivery"
	"github.com/protoshard/protoshard/internal/testsupport"
	"github.com/protoshard/protoshard/messages"
)

// Harness adapts one queue implementation to the contract tests.
type Harness struct {
	// Open returns a new holder of the queue name: the same name is the
	// same stored queue, each call a holder of its own (for a queue that is
	// its own holder, such as NewMemoryQueue's, the same value). It
	// may fail with delivery.ErrQueueFenced while another holder claims
	// the queue; any other error fails the test.
	Open func(t *testing.T, name string) (delivery.DurableProducerQueue, error)
}

// Run runs every contract test against h, each as a subtest with a queue
// name of its own.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		run  func(t *testing.T, h Harness, name string)
	}{
		{"LoadEmpty", loadEmpty},
		{"SentThenLoad", sentThenLoad},
		{"ConfirmedTrims", confirmedTrims},
		{"RetriedWritesAreIdempotent", retriedWrites},
		{"RefusedWriteChangesNothing", refusedWrite},
		{"NewIncarnationReplacesTheNumbering", newIncarnation},
		{"ConfirmationOfAnotherIncarnationIsIgnored", otherIncarnation},
		{"CleanupForgetsEntities", cleanup},
		{"SecondHolderIsFenced", secondHolder},
		{"SecondLoadStateOfTheHolderIsFenced", secondLoadState},
		{"CloseAfterAFailedLoadStateKeepsTheClaim", closeAfterFailedLoad},
		{"OversizeRefusedBeforeWriting", oversize},
		{"CanceledContextWritesNothing", canceledContext},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, h, testsupport.NameOf(t))
		})
	}
}

// Sent is a MessageSent of entity with a string payload.
func Sent(entity string, incarnation uint64, seq int64, payload string) *messages.MessageSent {
	a, err := anypb.New(wrapperspb.String(payload))
	if err != nil {
		panic(err) // a wrapper always marshals
	}
	return &messages.MessageSent{EntityId: entity, ProducerIncarnation: incarnation, SeqNr: seq,
		Ack: seq%2 == 0, TimestampMs: 1_700_000_000_000 + seq, Message: a}
}

// Confirmed is a Confirmed of entity up to seq.
func Confirmed(entity string, incarnation uint64, seq int64) *messages.Confirmed {
	return &messages.Confirmed{EntityId: entity, ProducerIncarnation: incarnation, SeqNr: seq, TimestampMs: 1_700_000_100_000 + seq}
}

// open opens and claims the queue name; the holder is closed at the end.
func open(t *testing.T, h Harness, name string) (delivery.DurableProducerQueue, *messages.DurableProducerQueueState) {
	t.Helper()
	q, err := h.Open(t, name)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	st, err := q.LoadState(context.Background())
	if err != nil {
		_ = q.Close()
		t.Fatalf("LoadState of %s: %v", name, err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q, st
}

// reload closes q and returns the content a new holder loads.
func reload(t *testing.T, h Harness, name string, q delivery.DurableProducerQueue) (delivery.DurableProducerQueue, *messages.DurableProducerQueueState) {
	t.Helper()
	if err := q.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return open(t, h, name)
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// entityState is a DurableProducerQueueEntity, for expected states.
func entityState(id string, incarnation uint64, confirmed int64) *messages.DurableProducerQueueEntity {
	var at int64
	if confirmed > 0 {
		at = Confirmed(id, incarnation, confirmed).GetTimestampMs()
	}
	return &messages.DurableProducerQueueEntity{EntityId: id, ProducerIncarnation: incarnation, ConfirmedSeqNr: confirmed, ConfirmedTimestampMs: at}
}

// assertState fails t unless got holds exactly the entities and the
// unconfirmed messages of want, in order.
func assertState(t *testing.T, want, got *messages.DurableProducerQueueState) {
	t.Helper()
	if len(got.GetEntities()) != len(want.GetEntities()) || len(got.GetUnconfirmed()) != len(want.GetUnconfirmed()) {
		t.Fatalf("state:\n got  %v\n want %v", describe(got), describe(want))
	}
	for i, e := range want.GetEntities() {
		if !proto.Equal(e, got.GetEntities()[i]) {
			t.Fatalf("entity %d:\n got  %v\n want %v\n(state %v)", i, got.GetEntities()[i], e, describe(got))
		}
	}
	for i, m := range want.GetUnconfirmed() {
		if !proto.Equal(m, got.GetUnconfirmed()[i]) {
			t.Fatalf("unconfirmed %d:\n got  %v\n want %v", i, got.GetUnconfirmed()[i], m)
		}
	}
}

func describe(st *messages.DurableProducerQueueState) string {
	var b strings.Builder
	for _, e := range st.GetEntities() {
		fmt.Fprintf(&b, "[%s inc %d confirmed %d] ", e.GetEntityId(), e.GetProducerIncarnation(), e.GetConfirmedSeqNr())
	}
	for _, m := range st.GetUnconfirmed() {
		fmt.Fprintf(&b, "%s/%d/%d ", m.GetEntityId(), m.GetProducerIncarnation(), m.GetSeqNr())
	}
	return b.String()
}

func state(entities []*messages.DurableProducerQueueEntity, unconfirmed ...*messages.MessageSent) *messages.DurableProducerQueueState {
	return &messages.DurableProducerQueueState{Entities: entities, Unconfirmed: unconfirmed}
}

func loadEmpty(t *testing.T, h Harness, name string) {
	_, st := open(t, h, name)
	assertState(t, state(nil), st)
}

func sentThenLoad(t *testing.T, h Harness, name string) {
	ctx := context.Background()
	q, _ := open(t, h, name)
	// Entity IDs that need escaping in keys and file names.
	a, b := "b/1 ü", ".a%2F"
	must(t, "StoreMessageSent", q.StoreMessageSent(ctx, []*messages.MessageSent{Sent(a, 7, 1, "a1"), Sent(b, 9, 1, "b1"), Sent(a, 7, 2, "a2")}))
	must(t, "StoreMessageSent", q.StoreMessageSent(ctx, []*messages.MessageSent{Sent(a, 7, 3, "a3")}))
	_, st := reload(t, h, name, q)
	assertState(t, state([]*messages.DurableProducerQueueEntity{entityState(b, 9, 0), entityState(a, 7, 0)},
		Sent(b, 9, 1, "b1"), Sent(a, 7, 1, "a1"), Sent(a, 7, 2, "a2"), Sent(a, 7, 3, "a3")), st)
}

func confirmedTrims(t *testing.T, h Harness, name string) {
	ctx := context.Background()
	q, _ := open(t, h, name)
	must(t, "StoreMessageSent", q.StoreMessageSent(ctx, []*messages.MessageSent{Sent("e1", 7, 1, "1"), Sent("e1", 7, 2, "2"), Sent("e1", 7, 3, "3"), Sent("e2", 8, 1, "x")}))
	must(t, "StoreMessageConfirmed", q.StoreMessageConfirmed(ctx, []*messages.Confirmed{Confirmed("e1", 7, 2)}))
	q, st := reload(t, h, name, q)
	assertState(t, state([]*messages.DurableProducerQueueEntity{entityState("e1", 7, 2), entityState("e2", 8, 0)},
		Sent("e1", 7, 3, "3"), Sent("e2", 8, 1, "x")), st)
	// Confirming everything keeps the entity: its numbering continues.
	must(t, "StoreMessageConfirmed", q.StoreMessageConfirmed(ctx, []*messages.Confirmed{Confirmed("e1", 7, 3), Confirmed("e2", 8, 1)}))
	must(t, "StoreMessageSent", q.StoreMessageSent(ctx, []*messages.MessageSent{Sent("e1", 7, 4, "4")}))
	_, st = reload(t, h, name, q)
	assertState(t, state([]*messages.DurableProducerQueueEntity{entityState("e1", 7, 3), entityState("e2", 8, 1)}, Sent("e1", 7, 4, "4")), st)
}

func retriedWrites(t *testing.T, h Harness, name string) {
	ctx := context.Background()
	q, _ := open(t, h, name)
	batch := []*messages.MessageSent{Sent("e1", 7, 1, "1"), Sent("e1", 7, 2, "2")}
	must(t, "StoreMessageSent", q.StoreMessageSent(ctx, batch))
	must(t, "StoreMessageSent again", q.StoreMessageSent(ctx, batch))
	// A retry that overlaps what is stored and adds one.
	must(t, "StoreMessageSent overlapping", q.StoreMessageSent(ctx, []*messages.MessageSent{Sent("e1", 7, 2, "2"), Sent("e1", 7, 3, "3")}))
	must(t, "StoreMessageConfirmed", q.StoreMessageConfirmed(ctx, []*messages.Confirmed{Confirmed("e1", 7, 1)}))
	must(t, "StoreMessageConfirmed again", q.StoreMessageConfirmed(ctx, []*messages.Confirmed{Confirmed("e1", 7, 1)}))
	// A confirmation that comes late is no step back.
	must(t, "StoreMessageConfirmed", q.StoreMessageConfirmed(ctx, []*messages.Confirmed{Confirmed("e1", 7, 2), Confirmed("e1", 7, 1)}))
	// The first batch once more, after it was confirmed.
	must(t, "StoreMessageSent of confirmed messages", q.StoreMessageSent(ctx, batch))
	_, st := reload(t, h, name, q)
	assertState(t, state([]*messages.DurableProducerQueueEntity{entityState("e1", 7, 2)}, Sent("e1", 7, 3, "3")), st)
}

func refusedWrite(t *testing.T, h Harness, name string) {
	ctx := context.Background()
	q, _ := open(t, h, name)
	must(t, "StoreMessageSent", q.StoreMessageSent(ctx, []*messages.MessageSent{Sent("e1", 7, 1, "1")}))
	refused := map[string][]*messages.MessageSent{
		"another content under a stored seqNr": {Sent("e2", 8, 1, "x"), Sent("e1", 7, 1, "other")},
		"a gap in the numbering":               {Sent("e2", 8, 1, "x"), Sent("e1", 7, 3, "3")},
		"a new incarnation not from 1":         {Sent("e2", 8, 1, "x"), Sent("e3", 9, 2, "2")},
		"no incarnation":                       {Sent("e2", 8, 1, "x"), Sent("e3", 0, 1, "1")},
		"no entity":                            {Sent("e2", 8, 1, "x"), Sent("", 9, 1, "1")},
	}
	for why, batch := range refused {
		if err := q.StoreMessageSent(ctx, batch); err == nil {
			t.Errorf("StoreMessageSent with %s: no error", why)
		}
	}
	if err := q.StoreMessageConfirmed(ctx, []*messages.Confirmed{Confirmed("e1", 7, 5)}); err == nil {
		t.Errorf("StoreMessageConfirmed beyond what is stored: no error")
	}
	_, st := reload(t, h, name, q)
	assertState(t, state([]*messages.DurableProducerQueueEntity{entityState("e1", 7, 0)}, Sent("e1", 7, 1, "1")), st)
}

func newIncarnation(t *testing.T, h Harness, name string) {
	ctx := context.Background()
	q, _ := open(t, h, name)
	must(t, "StoreMessageSent", q.StoreMessageSent(ctx, []*messages.MessageSent{Sent("e1", 7, 1, "1"), Sent("e1", 7, 2, "2")}))
	must(t, "StoreMessageConfirmed", q.StoreMessageConfirmed(ctx, []*messages.Confirmed{Confirmed("e1", 7, 1)}))
	must(t, "StoreMessageSent", q.StoreMessageSent(ctx, []*messages.MessageSent{Sent("e1", 8, 1, "new")}))
	_, st := reload(t, h, name, q)
	assertState(t, state([]*messages.DurableProducerQueueEntity{entityState("e1", 8, 0)}, Sent("e1", 8, 1, "new")), st)
}

func otherIncarnation(t *testing.T, h Harness, name string) {
	ctx := context.Background()
	q, _ := open(t, h, name)
	must(t, "StoreMessageSent", q.StoreMessageSent(ctx, []*messages.MessageSent{Sent("e1", 7, 1, "1")}))
	must(t, "StoreMessageConfirmed", q.StoreMessageConfirmed(ctx, []*messages.Confirmed{Confirmed("e1", 6, 1), Confirmed("e9", 6, 3)}))
	_, st := reload(t, h, name, q)
	assertState(t, state([]*messages.DurableProducerQueueEntity{entityState("e1", 7, 0)}, Sent("e1", 7, 1, "1")), st)
}

func cleanup(t *testing.T, h Harness, name string) {
	ctx := context.Background()
	q, _ := open(t, h, name)
	must(t, "StoreMessageSent", q.StoreMessageSent(ctx, []*messages.MessageSent{Sent("e1", 7, 1, "1"), Sent("e2", 8, 1, "1"), Sent("e3", 9, 1, "1")}))
	must(t, "StoreMessageConfirmed", q.StoreMessageConfirmed(ctx, []*messages.Confirmed{Confirmed("e1", 7, 1), Confirmed("e2", 8, 1)}))
	must(t, "Cleanup", q.Cleanup(ctx, []string{"e1", "e2", "never"}))
	must(t, "Cleanup again", q.Cleanup(ctx, []string{"e1"}))
	q, st := reload(t, h, name, q)
	assertState(t, state([]*messages.DurableProducerQueueEntity{entityState("e3", 9, 0)}, Sent("e3", 9, 1, "1")), st)
	// A forgotten entity starts again with a new incarnation.
	must(t, "StoreMessageSent", q.StoreMessageSent(ctx, []*messages.MessageSent{Sent("e1", 10, 1, "again")}))
	_, st = reload(t, h, name, q)
	assertState(t, state([]*messages.DurableProducerQueueEntity{entityState("e1", 10, 0), entityState("e3", 9, 0)},
		Sent("e1", 10, 1, "again"), Sent("e3", 9, 1, "1")), st)
}

// secondHolder: while one holder has the queue, a second is refused, or
// takes it over and the first can write no more. Either way exactly one
// writes, and what it wrote is what the next holder loads.
func secondHolder(t *testing.T, h Harness, name string) {
	ctx := context.Background()
	first, _ := open(t, h, name)
	must(t, "StoreMessageSent", first.StoreMessageSent(ctx, []*messages.MessageSent{Sent("e1", 7, 1, "1")}))
	second, err := h.Open(t, name)
	if err == nil {
		t.Cleanup(func() { _ = second.Close() })
		_, err = second.LoadState(ctx)
	}
	var writer delivery.DurableProducerQueue
	switch {
	case errors.Is(err, delivery.ErrQueueFenced):
		writer = first
	case err != nil:
		t.Fatalf("second holder: %v, want nil or ErrQueueFenced", err)
	default:
		// Taken over: the first holder is fenced from now on.
		if err := first.StoreMessageSent(ctx, []*messages.MessageSent{Sent("e1", 7, 2, "2")}); !errors.Is(err, delivery.ErrQueueFenced) {
			t.Fatalf("first holder's StoreMessageSent after a takeover: %v, want ErrQueueFenced", err)
		}
		if err := first.StoreMessageConfirmed(ctx, []*messages.Confirmed{Confirmed("e1", 7, 1)}); !errors.Is(err, delivery.ErrQueueFenced) {
			t.Fatalf("first holder's StoreMessageConfirmed after a takeover: %v, want ErrQueueFenced", err)
		}
		if err := first.Cleanup(ctx, []string{"e1"}); !errors.Is(err, delivery.ErrQueueFenced) {
			t.Fatalf("first holder's Cleanup after a takeover: %v, want ErrQueueFenced", err)
		}
		writer = second
	}
	must(t, "the claiming holder's StoreMessageSent", writer.StoreMessageSent(ctx, []*messages.MessageSent{Sent("e1", 7, 2, "two")}))
	must(t, "Close", first.Close())
	if writer == second {
		must(t, "Close", second.Close())
	}
	_, st := open(t, h, name)
	assertState(t, state([]*messages.DurableProducerQueueEntity{entityState("e1", 7, 0)}, Sent("e1", 7, 1, "1"), Sent("e1", 7, 2, "two")), st)
}

// secondLoadState: a holder that has the claim and loads again is
// refused with ErrQueueFenced, and keeps its claim and its content.
func secondLoadState(t *testing.T, h Harness, name string) {
	ctx := context.Background()
	q, _ := open(t, h, name)
	must(t, "StoreMessageSent", q.StoreMessageSent(ctx, []*messages.MessageSent{Sent("e1", 7, 1, "1")}))
	if st, err := q.LoadState(ctx); !errors.Is(err, delivery.ErrQueueFenced) {
		t.Fatalf("second LoadState of the holder: %v, %v; want ErrQueueFenced", describe(st), err)
	}
	must(t, "the holder's StoreMessageSent after its second LoadState", q.StoreMessageSent(ctx, []*messages.MessageSent{Sent("e1", 7, 2, "2")}))
	_, st := reload(t, h, name, q)
	assertState(t, state([]*messages.DurableProducerQueueEntity{entityState("e1", 7, 0)}, Sent("e1", 7, 1, "1"), Sent("e1", 7, 2, "2")), st)
}

// closeAfterFailedLoad: a holder whose LoadState was fenced holds no
// claim, so its Close leaves the claiming holder's: that one still
// writes, and a third holder is still fenced.
func closeAfterFailedLoad(t *testing.T, h Harness, name string) {
	ctx := context.Background()
	first, _ := open(t, h, name)
	must(t, "StoreMessageSent", first.StoreMessageSent(ctx, []*messages.MessageSent{Sent("e1", 7, 1, "1")}))
	second, err := h.Open(t, name)
	if errors.Is(err, delivery.ErrQueueFenced) {
		t.Skip("the queue fences a holder at Open")
	}
	must(t, "open a second holder", err)
	if second == first {
		t.Skip("the queue is its own holder: its Close cannot tell the fenced caller from the holder")
	}
	_, err = second.LoadState(ctx)
	if err == nil {
		t.Skip("the second holder took the claim over (SecondHolderIsFenced covers a takeover)")
	}
	if !errors.Is(err, delivery.ErrQueueFenced) {
		t.Fatalf("second holder's LoadState: %v, want ErrQueueFenced", err)
	}
	must(t, "the fenced holder's Close", second.Close())
	must(t, "the claiming holder's StoreMessageSent", first.StoreMessageSent(ctx, []*messages.MessageSent{Sent("e1", 7, 2, "2")}))
	third, err := h.Open(t, name)
	if err == nil {
		t.Cleanup(func() { _ = third.Close() })
		_, err = third.LoadState(ctx)
	}
	if !errors.Is(err, delivery.ErrQueueFenced) {
		t.Fatalf("a third holder after the fenced one closed: %v, want ErrQueueFenced", err)
	}
	_, st := reload(t, h, name, first)
	assertState(t, state([]*messages.DurableProducerQueueEntity{entityState("e1", 7, 0)}, Sent("e1", 7, 1, "1"), Sent("e1", 7, 2, "2")), st)
}

// oversize: a queue with a size limit refuses a batch holding a message
// over it, with ErrMessageTooLarge, and writes none of the batch.
func oversize(t *testing.T, h Harness, name string) {
	ctx := context.Background()
	q, _ := open(t, h, name)
	limited, ok := q.(interface{ MaxMessageSentBytes() int })
	if !ok || limited.MaxMessageSentBytes() <= 0 {
		t.Skip("the queue has no size limit of its own")
	}
	limit := limited.MaxMessageSentBytes()
	// The payload's length prefix grows with it: shorten until it fits.
	n := limit - proto.Size(Sent("e2", 8, 1, ""))
	fits := Sent("e2", 8, 1, strings.Repeat("f", n))
	for proto.Size(fits) > limit {
		n--
		fits = Sent("e2", 8, 1, strings.Repeat("f", n))
	}
	if proto.Size(fits) < limit-2 {
		t.Fatalf("test message of %d bytes, want %d", proto.Size(fits), limit)
	}
	big := Sent("e1", 7, 1, strings.Repeat("x", limit))
	if err := q.StoreMessageSent(ctx, []*messages.MessageSent{Sent("e3", 9, 1, "small"), big}); !errors.Is(err, delivery.ErrMessageTooLarge) {
		t.Fatalf("StoreMessageSent of %d bytes over a limit of %d: %v, want ErrMessageTooLarge", proto.Size(big), limit, err)
	}
	must(t, "StoreMessageSent at the limit", q.StoreMessageSent(ctx, []*messages.MessageSent{fits}))
	_, st := reload(t, h, name, q)
	assertState(t, state([]*messages.DurableProducerQueueEntity{entityState("e2", 8, 0)}, fits), st)
}

func canceledContext(t *testing.T, h Harness, name string) {
	q, _ := open(t, h, name)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := q.StoreMessageSent(ctx, []*messages.MessageSent{Sent("e1", 7, 1, "1")}); err == nil {
		t.Errorf("StoreMessageSent with a canceled context: no error")
	}
	_, st := reload(t, h, name, q)
	assertState(t, state(nil), st)
}
