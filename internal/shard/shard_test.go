package shard_test

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/shard"
	"github.com/protoshard/protoshard/internal/shardproto"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/shardactor"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// deadline is generous: the machine is slow and shared. Tests wait for
// events, so a fast run stays fast.
const deadline = 10 * time.Second

const shardID = "7"

// event is something a test entity did.
type event struct {
	kind  string // started, stopped, received, stopping, ignored
	id    string
	inc   int64 // incarnation: unique per entity actor started
	value string
}

type recorder struct {
	mu      sync.Mutex
	events  []event
	nextInc atomic.Int64
}

func (r *recorder) add(e event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) all() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func (r *recorder) count(kind, id string) int {
	n := 0
	for _, e := range r.all() {
		if e.kind == kind && (id == "" || e.id == id) {
			n++
		}
	}
	return n
}

// received returns the values received by entity id, by incarnation.
func (r *recorder) received(id string) map[int64][]string {
	out := map[int64][]string{}
	for _, e := range r.all() {
		if e.kind == "received" && e.id == id {
			out[e.inc] = append(out[e.inc], e.value)
		}
	}
	return out
}

// testEntity records its life. Its commands (StringValue):
//
//	passivate          Passivate with stop message "graceful-stop"
//	passivate-poison   Passivate with no stop message
//	passivate-unknown  Passivate with a stop message of an unknown type
//	graceful-stop      record "stopping", wait for release (if any), stop
//	handoff-stop       like graceful-stop without waiting, except for IDs
//	                   starting with "stubborn", which ignore it
//	stop-self          stop at once, without passivating
//	anything else      record "received" and answer "<id>#<inc>:<value>"
type testEntity struct {
	rec     *recorder
	release <-chan struct{}
	id      string
	inc     int64
}

func (e *testEntity) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		self := ctx.Self().Id
		id, err := shard.EntityID(self[strings.LastIndexByte(self, '/')+1:])
		if err != nil {
			id = "!bad name " + self
		}
		e.id, e.inc = id, e.rec.nextInc.Add(1)
		e.rec.add(event{kind: "started", id: e.id, inc: e.inc})
	case *actor.Stopped:
		e.rec.add(event{kind: "stopped", id: e.id, inc: e.inc})
	case *wrapperspb.StringValue:
		switch v := msg.GetValue(); v {
		case "passivate":
			stop, _ := anypb.New(wrapperspb.String("graceful-stop"))
			ctx.Request(ctx.Parent(), &messages.Passivate{StopMessage: stop})
		case "passivate-poison":
			ctx.Request(ctx.Parent(), &messages.Passivate{})
		case "passivate-unknown":
			ctx.Request(ctx.Parent(), &messages.Passivate{StopMessage: &anypb.Any{TypeUrl: "type.googleapis.com/nope.Nope", Value: []byte{1}}})
		case "graceful-stop":
			e.rec.add(event{kind: "stopping", id: e.id, inc: e.inc, value: v})
			if e.release != nil {
				<-e.release
			}
			ctx.Stop(ctx.Self())
		case "handoff-stop":
			if strings.HasPrefix(e.id, "stubborn") {
				e.rec.add(event{kind: "ignored", id: e.id, inc: e.inc, value: v})
				return
			}
			e.rec.add(event{kind: "stopping", id: e.id, inc: e.inc, value: v})
			ctx.Stop(ctx.Self())
		case "stop-self":
			ctx.Stop(ctx.Self())
		default:
			e.rec.add(event{kind: "received", id: e.id, inc: e.inc, value: v})
			if ctx.Sender() != nil {
				ctx.Respond(wrapperspb.String(fmt.Sprintf("%s#%d:%s", e.id, e.inc, v)))
			}
		}
	}
}

type fixture struct {
	t           *testing.T
	system      *actor.ActorSystem
	rec         *recorder
	release     chan struct{}
	releaseFn   func() // lets entities held in "graceful-stop" stop
	shard       *actor.PID
	mu          sync.Mutex
	deadLetters []*deadletter.Event
}

func newFixture(t *testing.T, settings shardactor.Settings) *fixture {
	t.Helper()
	f := newBareFixture(t)
	f.shard = f.system.Root.Spawn(shard.Props("Counter", shardID, f.entityProps(), settings, nil))
	return f
}

// newBareFixture is a fixture without its shard: the actor system, the
// recorder, the dead-letter subscription and the release of held entities.
func newBareFixture(t *testing.T) *fixture {
	t.Helper()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	f := &fixture{t: t, system: system, rec: &recorder{}, release: make(chan struct{})}
	sub := system.EventStream.Subscribe(func(evt any) {
		if d, ok := evt.(*deadletter.Event); ok {
			f.mu.Lock()
			f.deadLetters = append(f.deadLetters, d)
			f.mu.Unlock()
		}
	})
	var releaseOnce sync.Once
	f.releaseFn = func() { releaseOnce.Do(func() { close(f.release) }) }
	t.Cleanup(func() {
		f.releaseFn()
		system.EventStream.Unsubscribe(sub)
		system.Shutdown()
	})
	return f
}

// entityProps are the props of the fixture's test entities.
func (f *fixture) entityProps() *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &testEntity{rec: f.rec, release: f.release} })
}

// deliver sends msg to entity id the way the region does, with sender as
// the original sender (nil: none).
func (f *fixture) deliver(id string, msg any, sender *actor.PID) {
	f.system.Root.RequestWithCustomSender(f.shard, &shardproto.Deliver{EntityID: id, Message: msg}, sender)
}

func (f *fixture) ask(msg any) any {
	f.t.Helper()
	res, err := f.system.Root.RequestFuture(f.shard, msg, deadline).Result()
	require.NoError(f.t, err, "asking %T", msg)
	return res
}

func (f *fixture) stats() *shardproto.ShardStats {
	f.t.Helper()
	res := f.ask(&shardproto.GetShardStats{})
	require.IsType(f.t, &shardproto.ShardStats{}, res)
	return res.(*shardproto.ShardStats)
}

func (f *fixture) state() *shardproto.CurrentShardState {
	f.t.Helper()
	res := f.ask(&shardproto.GetCurrentShardState{})
	require.IsType(f.t, &shardproto.CurrentShardState{}, res)
	return res.(*shardproto.CurrentShardState)
}

func (f *fixture) deadLetterCount(contains string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, d := range f.deadLetters {
		if strings.Contains(d.Reason, contains) {
			n++
		}
	}
	return n
}

func (f *fixture) deadLetterReasons() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, d := range f.deadLetters {
		out = append(out, d.Reason)
	}
	return out
}

func (f *fixture) waitDeadLetter(contains string) {
	f.t.Helper()
	waitFor(f.t, "dead letter containing "+contains, func() bool { return f.deadLetterCount(contains) > 0 },
		func() any { return f.deadLetterReasons() })
}

func (f *fixture) waitEvents(kind, id string, n int) {
	f.t.Helper()
	waitFor(f.t, fmt.Sprintf("%d %s events of %q", n, kind, id), func() bool { return f.rec.count(kind, id) >= n },
		func() any { return f.rec.all() })
}

// watchStopped returns a channel closed when pid terminates.
func (f *fixture) watchStopped(pid *actor.PID) <-chan struct{} {
	done := make(chan struct{})
	var once sync.Once
	f.system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch msg := ctx.Message().(type) {
		case *actor.Started:
			ctx.Watch(pid)
		case *actor.Terminated:
			if msg.Who.Equal(pid) {
				once.Do(func() { close(done) })
			}
		}
	}))
	return done
}

func waitFor(t *testing.T, what string, cond func() bool, state func() any) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s; state: %+v", what, state())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(deadline):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func TestEntitiesStartedOnDemandOnePerID(t *testing.T) {
	f := newFixture(t, shard.DefaultSettings())

	require.Equal(t, 0, f.stats().EntityCount)
	f.deliver("a", wrapperspb.String("1"), nil)
	f.deliver("b/x", wrapperspb.String("1"), nil)
	f.deliver("a", wrapperspb.String("2"), nil)

	// Request/response through the shard reaches the original sender.
	res, err := f.system.Root.RequestFuture(f.shard, &shardproto.Deliver{EntityID: "a", Message: wrapperspb.String("3")}, deadline).Result()
	require.NoError(t, err)
	require.Equal(t, "a#", res.(*wrapperspb.StringValue).GetValue()[:2])
	require.True(t, strings.HasSuffix(res.(*wrapperspb.StringValue).GetValue(), ":3"))

	f.waitEvents("received", "b/x", 1)
	require.Equal(t, 1, f.rec.count("started", "a"), "one entity per ID")
	require.Equal(t, 1, f.rec.count("started", "b/x"))
	got := f.rec.received("a")
	require.Len(t, got, 1)
	for _, values := range got {
		require.Equal(t, []string{"1", "2", "3"}, values, "in order")
	}

	require.Equal(t, &shardproto.ShardStats{ShardID: shardID, EntityCount: 2}, f.stats())
	require.Equal(t, &shardproto.CurrentShardState{ShardID: shardID, EntityIDs: []string{"a", "b/x"}}, f.state())

	// The children are named EntityName(id) under the shard.
	_, ok := f.system.ProcessRegistry.GetLocal(f.shard.Id + "/" + shard.EntityName("b/x"))
	require.True(t, ok, "entity child b/x is registered under its escaped name")

	// Value-typed queries work too.
	require.IsType(t, &shardproto.ShardStats{}, f.ask(shardproto.GetShardStats{}))

	// An entity that stops without passivating is forgotten; the next
	// message starts a new incarnation.
	f.deliver("a", wrapperspb.String("stop-self"), nil)
	f.waitEvents("stopped", "a", 1)
	waitFor(t, "entity a forgotten", func() bool { return f.stats().EntityCount == 1 }, func() any { return f.state() })
	f.deliver("a", wrapperspb.String("4"), nil)
	f.waitEvents("started", "a", 2)
	f.waitEvents("received", "a", 4)
	require.Len(t, f.rec.received("a"), 2, "two incarnations of a")
	require.Empty(t, f.deadLetterReasons())
}

func TestStartEntityAck(t *testing.T) {
	f := newFixture(t, shard.DefaultSettings())

	res := f.ask(&messages.StartEntity{EntityId: "x"})
	require.IsType(t, &messages.StartEntityAck{}, res)
	require.Equal(t, "x", res.(*messages.StartEntityAck).GetEntityId())
	require.Equal(t, shardID, res.(*messages.StartEntityAck).GetShardId())
	f.waitEvents("started", "x", 1)

	// Already running: acknowledged, not started again.
	res = f.ask(&messages.StartEntity{EntityId: "x"})
	require.Equal(t, "x", res.(*messages.StartEntityAck).GetEntityId())
	// Inside a Deliver, as Akka accepts it inside an envelope.
	res = f.ask(&shardproto.Deliver{EntityID: "y", Message: &messages.StartEntity{EntityId: "y"}})
	require.Equal(t, "y", res.(*messages.StartEntityAck).GetEntityId())
	f.waitEvents("started", "y", 1)

	require.Equal(t, []string{"x", "y"}, f.state().EntityIDs)
	require.Equal(t, 1, f.rec.count("started", "x"))
	require.Empty(t, f.deadLetterReasons())
}

func TestHandOffStopsEntities(t *testing.T) {
	f := newFixture(t, shard.DefaultSettings())
	for _, id := range []string{"a", "b", "c"} {
		f.deliver(id, wrapperspb.String("hello"), nil)
	}
	f.waitEvents("received", "", 3)
	stopped := f.watchStopped(f.shard)

	res := f.ask(&messages.HandOff{Shard: shardID})
	require.Equal(t, &messages.ShardStopped{Shard: shardID}, res)
	require.Equal(t, 3, f.rec.count("stopped", ""), "ShardStopped only after every entity stopped")
	waitClosed(t, stopped, "the shard to stop itself")
	require.Empty(t, f.deadLetterReasons())
}

func TestHandOffWithCustomStopMessage(t *testing.T) {
	f := newFixture(t, shardactor.Settings{HandOffStopMessage: wrapperspb.String("handoff-stop")})
	for _, id := range []string{"a", "b"} {
		f.deliver(id, wrapperspb.String("hello"), nil)
	}
	f.waitEvents("received", "", 2)

	res := f.ask(&messages.HandOff{Shard: shardID})
	require.Equal(t, &messages.ShardStopped{Shard: shardID}, res)
	require.Equal(t, 2, f.rec.count("stopping", ""), "each entity got the stop message and stopped itself")
	require.Equal(t, 2, f.rec.count("stopped", ""))
}

func TestHandOffForceStopsEntitiesIgnoringTheStopMessage(t *testing.T) {
	// Force-stop after max(1ms-5s, 1s) = 1s.
	f := newFixture(t, shardactor.Settings{HandOffTimeout: time.Millisecond, HandOffStopMessage: wrapperspb.String("handoff-stop")})
	f.deliver("stubborn-1", wrapperspb.String("hello"), nil)
	f.deliver("polite", wrapperspb.String("hello"), nil)
	f.waitEvents("received", "", 2)
	stopped := f.watchStopped(f.shard)

	answer := f.system.Root.RequestFuture(f.shard, &messages.HandOff{Shard: shardID}, deadline)
	// Both handled in handingOff (same mailbox, after the HandOff, before the
	// force-stop timer can fire): the message is dropped with a reason, the
	// query is answered.
	f.deliver("polite", wrapperspb.String("late"), nil)
	statsDuring := f.system.Root.RequestFuture(f.shard, &shardproto.GetShardStats{}, deadline)
	f.waitDeadLetter("is handing off")
	f.waitEvents("ignored", "stubborn-1", 1)
	st, err := statsDuring.Result()
	require.NoError(t, err)
	require.Equal(t, shardID, st.(*shardproto.ShardStats).ShardID)
	require.GreaterOrEqual(t, st.(*shardproto.ShardStats).EntityCount, 1, "the stubborn entity still runs")

	res, err := answer.Result()
	require.NoError(t, err)
	require.Equal(t, &messages.ShardStopped{Shard: shardID}, res)
	require.Equal(t, 1, f.rec.count("stopped", "stubborn-1"), "force-stopped")
	require.Equal(t, 2, f.rec.count("received", ""), "the late message did not reach an entity")
	waitClosed(t, stopped, "the shard to stop itself")
}

func TestHandOffWithNoEntities(t *testing.T) {
	f := newFixture(t, shard.DefaultSettings())
	stopped := f.watchStopped(f.shard)
	res := f.ask(&messages.HandOff{Shard: shardID})
	require.Equal(t, &messages.ShardStopped{Shard: shardID}, res)
	waitClosed(t, stopped, "the shard to stop itself")
}

func TestHandOffForAnotherShardIsDropped(t *testing.T) {
	f := newFixture(t, shard.DefaultSettings())
	f.deliver("a", wrapperspb.String("hello"), nil)
	f.system.Root.Send(f.shard, &messages.HandOff{Shard: "other"})
	f.waitDeadLetter(`HandOff for shard "other"`)
	require.Equal(t, 1, f.stats().EntityCount, "still active")
}

func TestPassivateBuffersUntilTerminatedThenRestarts(t *testing.T) {
	f := newFixture(t, shard.DefaultSettings())
	f.deliver("p", wrapperspb.String("m0"), nil)
	f.waitEvents("received", "p", 1)

	f.deliver("p", wrapperspb.String("passivate"), nil)
	// The entity got the stop message from the shard (so the shard marked it
	// passivating) and is held in its stop until released.
	f.waitEvents("stopping", "p", 1)

	const n = 50
	for i := 1; i <= n; i++ {
		f.deliver("p", wrapperspb.String(fmt.Sprint("m", i)), nil)
	}
	ack := f.system.Root.RequestFuture(f.shard, &messages.StartEntity{EntityId: "p"}, deadline)
	reply := f.system.Root.RequestFuture(f.shard, &shardproto.Deliver{EntityID: "p", Message: wrapperspb.String("last")}, deadline)
	// Queries are answered meanwhile; the passivating entity still counts.
	require.Equal(t, []string{"p"}, f.state().EntityIDs)
	require.Equal(t, 1, f.rec.count("started", "p"), "nothing started while the old incarnation stops")

	f.releaseFn()
	f.waitEvents("received", "p", n+2)

	res, err := ack.Result()
	require.NoError(t, err)
	require.Equal(t, "p", res.(*messages.StartEntityAck).GetEntityId())
	res, err = reply.Result()
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(res.(*wrapperspb.StringValue).GetValue(), ":last"))

	require.Equal(t, 2, f.rec.count("started", "p"))
	got := f.rec.received("p")
	require.Len(t, got, 2)
	var want []string
	for i := 1; i <= n; i++ {
		want = append(want, fmt.Sprint("m", i))
	}
	want = append(want, "last")
	require.Equal(t, []string{"m0"}, got[1], "first incarnation")
	require.Equal(t, want, got[2], "second incarnation got every buffered message, in order")
	require.Empty(t, f.deadLetterReasons())
}

func TestPassivateWithoutStopMessagePoisons(t *testing.T) {
	f := newFixture(t, shard.DefaultSettings())
	for _, cmd := range []string{"passivate-poison", "passivate-unknown"} {
		id := "e-" + cmd
		f.deliver(id, wrapperspb.String("hello"), nil)
		f.deliver(id, wrapperspb.String(cmd), nil)
		f.waitEvents("stopped", id, 1)
		require.Equal(t, 0, f.rec.count("stopping", id), "stopped by poison, not by a stop message")
		f.deliver(id, wrapperspb.String("again"), nil)
		f.waitEvents("started", id, 2)
		f.waitEvents("received", id, 2)
	}
	require.Empty(t, f.deadLetterReasons())
}

func TestBadInputIsDroppedWithAReason(t *testing.T) {
	f := newFixture(t, shard.DefaultSettings())

	f.deliver("", wrapperspb.String("x"), nil)
	f.waitDeadLetter("empty entity ID")

	f.deliver("a", nil, nil)
	f.waitDeadLetter(`nil message for entity "a"`)

	f.system.Root.Send(f.shard, (*shardproto.Deliver)(nil))
	f.waitDeadLetter("nil Deliver")

	f.system.Root.Send(f.shard, &messages.StartEntity{})
	f.waitDeadLetter("StartEntity with an empty entity ID")

	// Passivate from a stranger (here a future) and from nobody.
	_ = f.system.Root.RequestFuture(f.shard, &messages.Passivate{}, time.Second)
	f.system.Root.Send(f.shard, &messages.Passivate{})
	waitFor(t, "two Passivate drops", func() bool { return f.deadLetterCount("which is not an entity") == 2 },
		func() any { return f.deadLetterReasons() })

	f.system.Root.Send(f.shard, wrapperspb.String("what"))
	f.waitDeadLetter("unexpected message")

	// A query without a sender.
	f.system.Root.Send(f.shard, &shardproto.GetShardStats{})
	f.waitDeadLetter("has no sender")

	// Still alive, no entity started by any of it.
	require.Equal(t, 0, f.stats().EntityCount)
	require.Equal(t, 0, f.rec.count("started", ""))
}

func TestEntityProducerPanicIsDropped(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	t.Cleanup(system.Shutdown)
	var mu sync.Mutex
	var reasons []string
	system.EventStream.Subscribe(func(evt any) {
		if d, ok := evt.(*deadletter.Event); ok {
			mu.Lock()
			reasons = append(reasons, d.Reason)
			mu.Unlock()
		}
	})
	props := actor.PropsFromProducer(func() actor.Actor { panic("bad entity") })
	shard := system.Root.Spawn(shard.Props("T", "1", props, shard.DefaultSettings(), nil))
	system.Root.Send(shard, &shardproto.Deliver{EntityID: "a", Message: wrapperspb.String("x")})
	waitFor(t, "drop", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(reasons) > 0
	}, func() any { return reasons })
	mu.Lock()
	require.Contains(t, reasons[0], "cannot start entity")
	mu.Unlock()
	res, err := system.Root.RequestFuture(shard, &shardproto.GetShardStats{}, deadline).Result()
	require.NoError(t, err)
	require.Equal(t, 0, res.(*shardproto.ShardStats).EntityCount)
}

// While the node may have been removed without knowing it yet (it was
// paused past its TTL: MemberStale), a message that waited in the shard's
// mailbox neither starts an entity nor reaches a running one; each is a
// dead letter with the reason. Once the node knows again, delivery goes on.
func TestMemberStaleDeliversNothing(t *testing.T) {
	settings := shard.DefaultSettings()
	stale := staleCheck(&settings)
	f := newFixture(t, settings)
	f.deliver("a", wrapperspb.String("1"), nil)
	f.waitEvents("received", "a", 1)

	stale.Store(true)
	f.deliver("a", wrapperspb.String("2"), nil)
	f.deliver("b", wrapperspb.String("1"), nil)
	_, err := f.system.Root.RequestFuture(f.shard, &messages.StartEntity{EntityId: "c"}, deadline).Result()
	require.ErrorIs(t, err, actor.ErrDeadLetter)
	waitFor(t, "three dead letters", func() bool { return f.deadLetterCount("confirmed its membership") == 3 },
		func() any { return f.deadLetterReasons() })
	require.Equal(t, 1, f.rec.count("received", "a"), "nothing reached the running entity")
	require.Equal(t, 0, f.rec.count("started", "b"), "no entity started")
	require.Equal(t, 0, f.rec.count("started", "c"), "no entity started")

	stale.Store(false)
	f.deliver("b", wrapperspb.String("2"), nil)
	f.waitEvents("received", "b", 1)
}
