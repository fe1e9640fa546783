package deadletters

import (
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/messages"
)

type undeliverable struct{ n int }

func TestReportUndelivered(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	defer system.Shutdown()
	var mu sync.Mutex
	var events []*deadletter.Event
	system.EventStream.Subscribe(func(e any) {
		if ev, ok := e.(*deadletter.Event); ok {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		}
	})
	ReportUndelivered(system, func(dl *actor.DeadLetterEvent) string {
		if _, ok := dl.Message.(*undeliverable); ok {
			return "gone"
		}
		return ""
	})
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(events) }

	// proto.actor's own dead letter, of a message the reporter takes: one Event.
	gone := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	if err := system.Root.StopFuture(gone).Wait(); err != nil {
		t.Fatal(err)
	}
	system.Root.Send(gone, &undeliverable{n: 1})
	// One it does not take: none.
	system.Root.Send(gone, "other")
	// Publish's own: its Event only, not a second one from the reporter.
	Publish(system, gone, &undeliverable{n: 2}, nil, "full")

	deadline := time.Now().Add(5 * time.Second)
	for count() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 2 {
		t.Fatalf("events %v, want two: the undelivered message, and Publish's own once", events)
	}
	reasons := map[string]int{}
	for _, e := range events {
		reasons[e.Reason]++
	}
	if reasons["gone"] != 1 || reasons["full"] != 1 {
		t.Fatalf("reasons %v, want gone and full once each", reasons)
	}
}

// A reliable-delivery batch that proto.actor could not deliver is
// reported message by message.
func TestReportUndeliveredBatchPerMessage(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	defer system.Shutdown()
	got := make(chan *deadletter.Event, 10)
	system.EventStream.Subscribe(func(e any) {
		if ev, ok := e.(*deadletter.Event); ok {
			got <- ev
		}
	})
	ReportUndelivered(system, func(dl *actor.DeadLetterEvent) string {
		if _, ok := dl.Message.(*messages.SequencedMessages); ok {
			return "gone"
		}
		return ""
	})
	gone := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	if err := system.Root.StopFuture(gone).Wait(); err != nil {
		t.Fatal(err)
	}
	a, b := &messages.SequencedMessage{EntityId: "a", SeqNr: 1}, &messages.SequencedMessage{EntityId: "b", SeqNr: 7}
	system.Root.Send(gone, &messages.SequencedMessages{Messages: []*messages.SequencedMessage{a, b}})
	for _, want := range []*messages.SequencedMessage{a, b} {
		select {
		case ev := <-got:
			if ev.Message != want || ev.Reason != "gone" {
				t.Fatalf("event %v, want %v with reason gone", ev, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no event for %v", want)
		}
	}
	select {
	case ev := <-got:
		t.Fatalf("a third event: %v", ev)
	case <-time.After(50 * time.Millisecond):
	}
}
