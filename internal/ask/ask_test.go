package ask_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/ask"
)

// pastDeadline is a context whose deadline has passed before its own
// timer marked it done, as a context.WithDeadline is for a moment.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

func TestCall(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	echo := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if s, ok := ctx.Message().(string); ok && s != "silent" {
			ctx.Respond(s)
		}
	}))
	gone := system.NewLocalPID("gone")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, func())
		to   *actor.PID
		msg  string
		// cancelAfter cancels ctx this long after the request was sent.
		cancelAfter time.Duration
		want        any
		errs        []error
		notErrs     []error
	}{
		{name: "answered", ctx: withTimeout(5 * time.Second), to: echo, msg: "hi", want: "hi"},
		{name: "answered without a deadline", ctx: background, to: echo, msg: "hi", want: "hi"},
		{name: "dropped", ctx: withTimeout(5 * time.Second), to: gone, msg: "hi", errs: []error{actor.ErrDeadLetter},
			notErrs: []error{actor.ErrTimeout, context.DeadlineExceeded}},
		{name: "deadline", ctx: withTimeout(100 * time.Millisecond), to: echo, msg: "silent",
			errs: []error{context.DeadlineExceeded, actor.ErrTimeout}},
		{name: "cancelled while waiting", ctx: background, to: echo, msg: "silent", cancelAfter: 100 * time.Millisecond,
			errs: []error{context.Canceled}, notErrs: []error{actor.ErrTimeout}},
		{name: "cancelled before", ctx: func() (context.Context, func()) { return cancelled, func() {} }, to: echo, msg: "hi",
			errs: []error{context.Canceled}},
		{name: "deadline passed, ctx not yet done", ctx: func() (context.Context, func()) {
			return pastDeadline{context.Background()}, func() {}
		}, to: echo, msg: "hi", errs: []error{context.DeadlineExceeded, actor.ErrTimeout}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, release := tc.ctx()
			defer release()
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			type result struct {
				res any
				err error
			}
			done := make(chan result, 1)
			start := time.Now()
			go func() {
				res, err := ask.Request(ctx, system, tc.to, tc.msg)
				done <- result{res, err}
			}()
			if tc.cancelAfter > 0 {
				time.Sleep(tc.cancelAfter)
				cancel()
			}
			var r result
			select {
			case r = <-done:
			case <-time.After(ask.DefaultTimeout * 2):
				t.Fatal("the call never ended")
			}
			if waited := time.Since(start); waited > ask.DefaultTimeout*3/4 {
				t.Errorf("the call took %v", waited)
			}
			if r.res != tc.want {
				t.Errorf("answer %v, want %v", r.res, tc.want)
			}
			for _, want := range tc.errs {
				if !errors.Is(r.err, want) {
					t.Errorf("error %v, want it to wrap %v", r.err, want)
				}
			}
			for _, not := range tc.notErrs {
				if errors.Is(r.err, not) {
					t.Errorf("error %v wraps %v", r.err, not)
				}
			}
			if len(tc.errs) == 0 && r.err != nil {
				t.Errorf("error %v", r.err)
			}
		})
	}
}

func background() (context.Context, func()) { return context.Background(), func() {} }

func withTimeout(d time.Duration) func() (context.Context, func()) {
	return func() (context.Context, func()) { return context.WithTimeout(context.Background(), d) }
}

// TestNilContext: a nil context is refused with an error, never a panic.
func TestNilContext(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	//lint:ignore SA1012 the nil context is what this test sends
	if _, err := ask.Start(nil, system); !errors.Is(err, ask.ErrNilContext) {
		t.Fatalf("Start(nil): %v, want ErrNilContext", err)
	}
}
