package actorsharding_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/testpb"
	"google.golang.org/protobuf/proto"
)

// silentSeq is the Seq of a Ping the asked entity does not answer.
const silentSeq = -1

// TestAskAndRequestUnderContext: Ask returns the answer as the type asked
// for, or an error naming both types that publishes no dead letter; a
// request waits until its context's deadline, ends when its context is
// cancelled, and sends nothing under a context that has already ended.
func TestAskAndRequestUnderContext(t *testing.T) {
	w := newLocalWorld(t)
	n := w.startNode(false)
	sharding, err := actorsharding.New(n.System, n.Membership)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan int64, 64)
	if _, err := sharding.StartRegion("Asked", actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*testpb.Ping); ok {
			got <- m.Seq
			if m.Seq != silentSeq {
				ctx.Respond(&testpb.Pong{Seq: m.Seq})
			}
		}
	}), actorsharding.NewHashCodeMessageExtractor(w.shards)); err != nil {
		t.Fatal(err)
	}
	ref, err := sharding.EntityRefFor("Asked", "e-1")
	if err != nil {
		t.Fatal(err)
	}
	received := func(want int64) {
		t.Helper()
		select {
		case seq := <-got:
			if seq != want {
				t.Fatalf("the entity got Ping %d, want %d", seq, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the entity never got Ping %d", want)
		}
	}

	pong, err := actorsharding.Ask[*testpb.Pong](t.Context(), ref, &testpb.Ping{Seq: 1})
	if err != nil || pong.Seq != 1 {
		t.Fatalf("Ask for a Pong: %v %v", pong, err)
	}
	received(1)
	msg, err := actorsharding.Ask[proto.Message](t.Context(), ref, &testpb.Ping{Seq: 2})
	if p, ok := msg.(*testpb.Pong); err != nil || !ok || p.Seq != 2 {
		t.Fatalf("Ask for a proto.Message: %v %v", msg, err)
	}
	received(2)

	dropsBefore := len(w.dropped())
	ping, err := actorsharding.Ask[*testpb.Ping](t.Context(), ref, &testpb.Ping{Seq: 3})
	var wrong *actorsharding.AnswerTypeError
	if ping != nil || !errors.Is(err, actorsharding.ErrAnswerType) || !errors.As(err, &wrong) {
		t.Fatalf("Ask for a Ping answered with a Pong: %v %v, want an AnswerTypeError", ping, err)
	}
	if wrong.Got != reflect.TypeFor[*testpb.Pong]() || wrong.Want != reflect.TypeFor[*testpb.Ping]() ||
		wrong.Answer.(*testpb.Pong).Seq != 3 || wrong.TypeName != "Asked" || wrong.EntityID != "e-1" {
		t.Fatalf("AnswerTypeError %+v", wrong)
	}
	for _, name := range []string{"*testpb.Pong", "*testpb.Ping", `"e-1"`} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("%q does not name %s", err, name)
		}
	}
	received(3)

	// A deadline: the request ends at it, well before the default.
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = ref.Request(ctx, &testpb.Ping{Seq: silentSeq})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, actor.ErrTimeout) || !strings.Contains(err.Error(), "e-1") {
		t.Fatalf("request past its deadline: %v, want context.DeadlineExceeded and actor.ErrTimeout", err)
	}
	if waited := time.Since(start); waited > 8*time.Second {
		t.Fatalf("request past a 200ms deadline waited %v", waited)
	}
	received(silentSeq)

	// Cancelled while it waits, without a deadline: it ends then.
	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	start = time.Now()
	go func() {
		_, err := ref.Request(ctx, &testpb.Ping{Seq: silentSeq})
		done <- err
	}()
	received(silentSeq)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || errors.Is(err, actor.ErrTimeout) {
			t.Fatalf("cancelled request: %v, want context.Canceled alone", err)
		}
		if waited := time.Since(start); waited > 8*time.Second {
			t.Fatalf("cancelled request waited %v", waited)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a cancelled request still waits")
	}

	// An ended context sends nothing: the entity's next message is the
	// one sent after.
	_, err = ref.Request(ctx, &testpb.Ping{Seq: 4})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("request under a cancelled context: %v", err)
	}
	past, cancelPast := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancelPast()
	if _, err = actorsharding.Ask[*testpb.Pong](past, ref, &testpb.Ping{Seq: 5}); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, actor.ErrTimeout) {
		t.Fatalf("request under an expired context: %v", err)
	}
	if pong, err := actorsharding.Ask[*testpb.Pong](t.Context(), ref, &testpb.Ping{Seq: 6}); err != nil || pong.Seq != 6 {
		t.Fatalf("request after: %v %v", pong, err)
	}
	received(6)

	if drops := w.dropped(); len(drops) != dropsBefore {
		t.Fatalf("dead letters after a wrong answer type: %v", drops[dropsBefore:])
	}
}
