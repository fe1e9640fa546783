package guard_test

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/guard"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/internal/testsupport"
	"github.com/protoshard/protoshard/testkit"
)

type batch []any

func (b batch) GetMessages() []any { return b }

func TestCheck(t *testing.T) {
	var nilPing *testpb.Ping
	cases := []struct {
		name string
		msg  any
		nil  bool
	}{
		{"nil", nil, true},
		{"nil pointer of a message type", nilPing, false},
		{"envelope of nil", &actor.MessageEnvelope{}, true},
		{"nil envelope", (*actor.MessageEnvelope)(nil), true},
		{"batch holding nil", batch{&testpb.Ping{}, nil}, true},
		{"envelope of a batch holding nil", &actor.MessageEnvelope{Message: batch{nil}}, true},
		{"message", &testpb.Ping{}, false},
		{"empty message", &testpb.Pong{}, false},
		{"value", "text", false},
		{"zero value", 0, false},
		{"envelope", &actor.MessageEnvelope{Message: &testpb.Ping{}}, false},
		{"batch", batch{&testpb.Ping{}, "x"}, false},
	}
	for _, c := range cases {
		err := guard.Check(c.msg)
		if got := errors.Is(err, deadletter.ErrNilMessage); got != c.nil {
			t.Errorf("%s: Check = %v, want nil message %v", c.name, err, c.nil)
		}
		if !c.nil && err != nil {
			t.Errorf("%s: Check = %v", c.name, err)
		}
	}
}

func TestCheckSize(t *testing.T) {
	small := &testpb.Ping{EntityId: "e", From: strings.Repeat("x", 100)}
	n := len(small.EntityId) + len(small.From) + 4 // two tags and two lengths
	cases := []struct {
		name  string
		msg   any
		limit int
		large bool
	}{
		{"at the limit", small, n, false},
		{"one byte over", small, n - 1, true},
		{"no limit", small, 0, false},
		{"not protobuf", strings.Repeat("x", 1000), 10, false},
		{"default limit", &testpb.Ping{From: strings.Repeat("x", guard.DefaultMaxMessageSize)}, guard.DefaultMaxMessageSize, true},
	}
	for _, c := range cases {
		err := guard.CheckSize(c.msg, c.limit)
		if got := errors.Is(err, deadletter.ErrMessageTooLarge); got != c.large || (!c.large && err != nil) {
			t.Errorf("%s: CheckSize = %v, want too large %v", c.name, err, c.large)
		}
	}
	if guard.DefaultMaxMessageSize+guard.EnvelopeOverhead != guard.FrameLimit || guard.FrameLimit != 4<<20 {
		t.Errorf("default %d + overhead %d is not gRPC's 4 MiB", guard.DefaultMaxMessageSize, guard.EnvelopeOverhead)
	}
}

type events struct {
	mu   sync.Mutex
	list []*deadletter.Event
}

func (e *events) with(target error) []*deadletter.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*deadletter.Event
	for _, ev := range e.list {
		if errors.Is(ev.Err, target) {
			out = append(out, ev)
		}
	}
	return out
}

func newSystem(t *testing.T) (*actor.ActorSystem, *events) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	t.Cleanup(system.Shutdown)
	ev := &events{}
	system.EventStream.Subscribe(func(m any) {
		if e, ok := m.(*deadletter.Event); ok {
			ev.mu.Lock()
			ev.list = append(ev.list, e)
			ev.mu.Unlock()
		}
	})
	return system, ev
}

// echo answers every Ping with a Pong of the same seq.
func echo(ctx actor.Context) {
	if p, ok := ctx.Message().(*testpb.Ping); ok {
		ctx.Respond(&testpb.Pong{Seq: p.Seq})
	}
}

// A nil sent, requested or batched to an actor with the guarded mailbox is
// a dead-letter event naming the actor; a requester fails at once; the
// actor goes on answering, and nothing spins.
func TestMailboxRefusesNil(t *testing.T) {
	system, ev := newSystem(t)
	pid, err := system.Root.SpawnNamed(actor.PropsFromFunc(echo, guard.WithMailbox()), "guarded")
	if err != nil {
		t.Fatal(err)
	}
	system.Root.Send(pid, nil)
	system.Root.Send(pid, (*actor.MessageEnvelope)(nil))
	system.Root.Send(pid, batch{&testpb.Ping{Seq: 1}, nil})
	start := time.Now()
	if _, err := system.Root.RequestFuture(pid, nil, 10*time.Second).Result(); !errors.Is(err, actor.ErrDeadLetter) {
		t.Fatalf("request of nil: %v, want a dead letter", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the request of nil failed after %v, not at once", took)
	}
	testkit.WaitFor(t, 10*time.Second, func() bool { return len(ev.with(deadletter.ErrNilMessage)) == 4 },
		"four nil-message events; got %v", testkit.Lazy(func() any { return ev.with(deadletter.ErrNilMessage) }))
	for _, e := range ev.with(deadletter.ErrNilMessage) {
		if !e.Target.Equal(pid) || !strings.Contains(e.Reason, "guarded") {
			t.Errorf("event %v does not name the actor", e)
		}
	}
	for seq := int64(1); seq <= 3; seq++ {
		res, err := system.Root.RequestFuture(pid, &testpb.Ping{Seq: seq}, 10*time.Second).Result()
		if err != nil || res.(*testpb.Pong).Seq != seq {
			t.Fatalf("ping %d after the nils: %v %v", seq, res, err)
		}
	}
	testsupport.AssertNotSpinning(t, time.Second)
}

// An actor with WithSizeLimit does not send a message over the limit to
// another node: a dead-letter event instead. Local targets have no limit.
func TestSizeLimitOnRemoteSends(t *testing.T) {
	system, ev := newSystem(t)
	local, err := system.Root.SpawnNamed(actor.PropsFromFunc(echo), "local")
	if err != nil {
		t.Fatal(err)
	}
	remote := actor.NewPID("10.0.0.1:4000", "elsewhere")
	big := &testpb.Ping{Seq: 7, From: strings.Repeat("x", 2000)}
	sender := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case string:
			ctx.Send(remote, big)
			ctx.Request(local, big)
		case *testpb.Pong:
			ctx.Send(remote, &testpb.Ping{Seq: m.Seq}) // small: no event
		}
	}, guard.WithSizeLimit(1000)))
	system.Root.Send(sender, "go")
	testkit.WaitFor(t, 10*time.Second, func() bool { return len(ev.with(deadletter.ErrMessageTooLarge)) > 0 },
		"a too-large event for the remote send")
	time.Sleep(200 * time.Millisecond)
	got := ev.with(deadletter.ErrMessageTooLarge)
	if len(got) != 1 || !got[0].Target.Equal(remote) || got[0].Message != big {
		t.Fatalf("too-large events %v, want one for the remote send of the big ping", got)
	}
	if !guard.IsRemote(system, remote) || guard.IsRemote(system, local) {
		t.Error("IsRemote got local and remote wrong")
	}
}

// A size-limited actor whose timers send through its context (from their
// own goroutine, as scheduler.TimerScheduler does) while it sends itself:
// under the race detector this fails if the sender middleware's context is
// created lazily.
func TestSizeLimitWithTimers(t *testing.T) {
	system, _ := newSystem(t)
	sink, err := system.Root.SpawnNamed(actor.PropsFromFunc(func(actor.Context) {}), "sink")
	if err != nil {
		t.Fatal(err)
	}
	ticks := make(chan struct{}, 100)
	pid := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *actor.Started:
			scheduler.NewTimerScheduler(ctx).SendRepeatedly(time.Millisecond, time.Millisecond, ctx.Self(), "tick")
			ctx.Send(sink, &testpb.Ping{})
		case string:
			ctx.Send(sink, &testpb.Ping{})
			select {
			case ticks <- struct{}{}:
			default:
			}
		}
	}, guard.WithSizeLimit(1000)))
	for i := 0; i < 20; i++ {
		select {
		case <-ticks:
		case <-time.After(10 * time.Second):
			t.Fatal("no timer ticks")
		}
	}
	if err := system.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
}

// What waits in a guarded actor's mailbox when a Stop overtakes it, and
// what reaches the mailbox afterwards, is a dead-letter event each
// (deadletter.ErrStopped), where proto.actor discards it without a trace.
func TestMailboxReportsWhatReachesAStoppedActor(t *testing.T) {
	system, ev := newSystem(t)
	busy, release := make(chan struct{}), make(chan struct{})
	var got sync.Map
	pid, err := system.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		if p, ok := ctx.Message().(*testpb.Ping); ok {
			got.Store(p.Seq, true)
			if p.Seq == 0 {
				close(busy)
				<-release // the rest queue up behind it
			}
		}
	}, guard.WithMailbox()), "stopping")
	if err != nil {
		t.Fatal(err)
	}
	system.Root.Send(pid, &testpb.Ping{Seq: 0})
	<-busy
	const queued = 100
	for seq := int64(1); seq <= queued; seq++ {
		system.Root.Send(pid, &testpb.Ping{Seq: seq})
	}
	system.Root.Stop(pid) // a system message: it goes ahead of the queued pings
	close(release)
	testkit.WaitFor(t, 10*time.Second, func() bool { return len(ev.with(deadletter.ErrStopped)) >= queued },
		"%d stopped-actor events; got %d", queued, testkit.Lazy(func() any { return len(ev.with(deadletter.ErrStopped)) }))
	for _, e := range ev.with(deadletter.ErrStopped) {
		if p, ok := e.Message.(*testpb.Ping); !ok || p.Seq < 1 {
			t.Errorf("stopped-actor event for %T %v", e.Message, e.Message)
		}
	}
	for seq := int64(1); seq <= queued; seq++ {
		if _, ok := got.Load(seq); ok {
			t.Fatalf("ping %d reached the actor after its stop", seq)
		}
	}
}

// An actor with a process of its own in front of it in the registry (as a
// region's router) is not taken for stopped when a child of its terminates:
// it goes on taking messages.
func TestMailboxOfAnActorBehindAFrontStaysOpen(t *testing.T) {
	system, ev := newSystem(t)
	child := make(chan *actor.PID, 1)
	pid, err := system.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *actor.Started:
			child <- ctx.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
		default:
			echo(ctx)
		}
	}, guard.WithMailbox()), "fronted")
	if err != nil {
		t.Fatal(err)
	}
	own, _ := system.ProcessRegistry.GetLocal(pid.Id)
	system.ProcessRegistry.LocalPIDs.GetBucket(pid.Id).Set(pid.Id, front{own})
	system.Root.Stop(<-child) // the parent handles its Terminated
	for seq := int64(1); seq <= 3; seq++ {
		res, err := system.Root.RequestFuture(actor.NewPID(pid.Address, pid.Id), &testpb.Ping{Seq: seq}, 10*time.Second).Result()
		if err != nil || res.(*testpb.Pong).Seq != seq {
			t.Fatalf("ping %d after the child's termination: %v %v", seq, res, err)
		}
	}
	if n := len(ev.with(deadletter.ErrStopped)); n != 0 {
		t.Fatalf("%d stopped-actor events for a running actor", n)
	}
}

// front is a process put in front of an actor's own, as a region's router.
type front struct{ actor.Process }

// notice is a guard.Notice.
type notice struct{ seq int64 }

func (notice) Notice() {}

// A notice that reaches a stopped actor is no drop: the pings queued
// behind the stop are reported, the notices among them are not.
func TestMailboxReportsNoNoticeThatReachesAStoppedActor(t *testing.T) {
	system, ev := newSystem(t)
	busy, release := make(chan struct{}), make(chan struct{})
	pid, err := system.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		if p, ok := ctx.Message().(*testpb.Ping); ok && p.Seq == 0 {
			close(busy)
			<-release
		}
	}, guard.WithMailbox()), "noticed")
	if err != nil {
		t.Fatal(err)
	}
	system.Root.Send(pid, &testpb.Ping{Seq: 0})
	<-busy
	const queued = 50
	for seq := int64(1); seq <= queued; seq++ {
		system.Root.Send(pid, notice{seq: seq})
		system.Root.Send(pid, &actor.DeadLetterResponse{Target: pid})
		system.Root.Send(pid, &testpb.Ping{Seq: seq})
	}
	system.Root.Stop(pid)
	close(release)
	testkit.WaitFor(t, 10*time.Second, func() bool { return len(ev.with(deadletter.ErrStopped)) >= queued },
		"%d stopped-actor events; got %d", queued, testkit.Lazy(func() any { return len(ev.with(deadletter.ErrStopped)) }))
	time.Sleep(100 * time.Millisecond) // a notice reported late would show now
	for _, e := range ev.with(deadletter.ErrStopped) {
		if _, ok := e.Message.(*testpb.Ping); !ok {
			t.Errorf("stopped-actor event for %T %v", e.Message, e.Message)
		}
	}
	if n := len(ev.with(deadletter.ErrStopped)); n != queued {
		t.Errorf("%d stopped-actor events, want %d", n, queued)
	}
}
