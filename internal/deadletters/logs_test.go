package deadletters

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/deadletter"
)

func lines(b *bytes.Buffer) []string {
	return strings.FieldsFunc(b.String(), func(r rune) bool { return r == '\n' })
}

func TestClassOf(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, classOther},
		{errors.New("free text"), classOther},
		{deadletter.ErrNilMessage, classNilMessage},
		{fmt.Errorf("shard region t: %w", deadletter.ErrMessageTooLarge), classTooLarge},
		{fmt.Errorf("a: %w", fmt.Errorf("b: %w", deadletter.ErrBufferFull)), classBufferFull},
		{fmt.Errorf("x: %w", deadletter.ErrShuttingDown), classShuttingDown},
		{fmt.Errorf("x: %w", deadletter.ErrMemberRemoved), classMemberRemoved},
		{fmt.Errorf("x: %w", deadletter.ErrNotSerializable), classNotSerializable},
		{fmt.Errorf("x: %w", deadletter.ErrEntityStopped), classEntityStopped},
	}
	for _, tt := range tests {
		if got := classOf(tt.err); got != tt.want {
			t.Errorf("classOf(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestDropWarningsAreRateLimitedPerClass(t *testing.T) {
	var out bytes.Buffer
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}))
	defer system.Shutdown()

	now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	var armed []time.Duration
	var flushes []func()
	l := newLogs(system, 10*time.Second, func() time.Time { return now },
		func(d time.Duration, f func()) { armed = append(armed, d); flushes = append(flushes, f) })

	full := &deadletter.Event{Message: "m", Reason: "buffer full", Err: deadletter.ErrBufferFull}
	other := &deadletter.Event{Message: "m", Reason: "unexpected"}
	for range 5 {
		l.warn(full, classBufferFull)
		now = now.Add(time.Second)
	}
	l.warn(other, classOther)
	if got := lines(&out); len(got) != 2 {
		t.Fatalf("logged %d lines, want the first drop of each class:\n%s", len(got), strings.Join(got, "\n"))
	}
	if len(armed) != 1 || armed[0] != 9*time.Second {
		t.Fatalf("flushes armed after %v, want one, at the end of the buffer_full window (9s after its first hold-back)", armed)
	}

	now = now.Add(5 * time.Second) // 10s after the first buffer_full drop
	flushes[0]()
	got := lines(&out)
	if len(got) != 3 || !strings.Contains(got[2], "and 4 more messages dropped in the last 10s") ||
		!strings.Contains(got[2], "class=buffer_full") {
		t.Fatalf("after the flush:\n%s\nwant a third line counting the 4 held-back buffer_full drops", strings.Join(got, "\n"))
	}

	// The window is over: the next drop of the class is logged at once.
	l.warn(full, classBufferFull)
	if got := lines(&out); len(got) != 4 || !strings.Contains(got[3], "message dropped") {
		t.Fatalf("after the window:\n%s\nwant the next drop logged", strings.Join(got, "\n"))
	}
}
