package actorsharding

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/ask"
	"github.com/protoshard/protoshard/internal/entityrefs"
	"github.com/protoshard/protoshard/internal/shardproto"
	"github.com/protoshard/protoshard/internal/wire"
	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/proto"
)

// EntityRef addresses one entity of an entity type by its ID, as Akka's
// EntityRef: messages need no entity_id of their own, and a request that
// is dropped fails with the reason. Get one with Sharding.EntityRefFor; it
// is a small value, safe to copy and to use from many goroutines.
type EntityRef struct {
	sharding  *Sharding
	typeName  string
	id        string
	region    *actor.PID
	extractor MessageExtractor
	router    *regionProcess
	// cache is shared by the copies of the ref.
	cache *refCache
}

// refCache is what an EntityRef and its copies learn as they send.
type refCache struct {
	// route is the entity's route, while it has one.
	route atomic.Pointer[entityRoute]
	// header carries the entity's ID to another node's region, for the
	// messages that do not name the entity (see entityIDHeaderOf); made on
	// first use.
	header atomic.Pointer[map[string]string]
}

// idHeader is the ref's entityIDHeaderOf(id) (nil for an ID that cannot
// go in a header: its messages go in envelopes).
func (e EntityRef) idHeader() map[string]string {
	if h := e.cache.header.Load(); h != nil {
		return *h
	}
	h := entityIDHeaderOf(e.id)
	e.cache.header.CompareAndSwap(nil, &h)
	return *e.cache.header.Load()
}

// ErrDropped is wrapped by the error of a request whose message protoshard
// dropped (a DeadLetter event was published); the error also wraps the
// typed reason when there is one (ErrBufferFull, ErrShuttingDown,
// ErrMemberRemoved, ...) and actor.ErrDeadLetter.
var ErrDropped = errors.New("message dropped")

// ErrNotStarted is returned by EntityRefFor for an entity type with no
// region or proxy on this node.
var ErrNotStarted = errors.New("no region or proxy of the entity type runs on this node")

// EntityRefFor returns a reference to entity entityID of typeName, whose
// region or proxy was started on this node.
func (s *Sharding) EntityRefFor(typeName, entityID string) (EntityRef, error) {
	if err := wire.CheckEntityID(entityID); err != nil {
		return EntityRef{}, fmt.Errorf("actorsharding: EntityRefFor %s %q: %w", typeName, entityID, err)
	}
	s.mu.Lock()
	r, ok := s.regions[typeName]
	s.mu.Unlock()
	if !ok {
		return EntityRef{}, fmt.Errorf("actorsharding: EntityRefFor %s %q: %w", typeName, entityID, ErrNotStarted)
	}
	return EntityRef{sharding: s, typeName: typeName, id: entityID, region: r.pid, extractor: r.extractor,
		router: r.router, cache: &refCache{}}, nil
}

// EntityID is the entity's ID.
func (e EntityRef) EntityID() string { return e.id }

// TypeName is the entity's type.
func (e EntityRef) TypeName() string { return e.typeName }

// Send sends msg to the entity (Akka's tell). msg goes as it is when the
// extractor finds this entity's ID in it; otherwise the ref's ID goes
// with it, and the entity receives msg itself: such a msg must be a
// protobuf message. A drop after Send is reported as a dead-letter event
// (deadletter.Event).
func (e EntityRef) Send(msg any) error { return e.SendContext(context.Background(), msg) }

// SendContext is Send with the trace context of ctx: the span in ctx, if
// any, goes with msg to the entity, on any node, which reads it with
// TraceContext.
func (e EntityRef) SendContext(ctx context.Context, msg any) error { return e.send(ctx, msg, nil) }

// send is SendContext with sender, if not nil, as the message's sender.
func (e EntityRef) send(ctx context.Context, msg any, sender *actor.PID) error {
	m, own, err := e.pack(msg)
	if err != nil {
		return err
	}
	var env *actor.MessageEnvelope
	if h := e.sharding.tracing.header(ctx, nil); h != nil || sender != nil {
		env = &actor.MessageEnvelope{Header: h, Message: m, Sender: sender}
	}
	if e.direct(env, m, own) {
		return nil
	}
	switch {
	case own && env != nil:
		e.sharding.system.Root.Send(e.region, env) // m with its header and sender
	case own:
		e.sharding.system.Root.Send(e.region, m)
	default:
		e.router.sendFor(e.region, env, e.id, e.idHeader(), m.(proto.Message))
	}
	e.cacheRoute()
	return nil
}

// direct sends m (what pack made) straight to the entity's mailbox, as
// the region's router would, through the route the ref cached; false: m
// must go through the router. The router's rules hold: the route is open,
// and none of the shard's messages is still on the slow way.
func (e EntityRef) direct(env *actor.MessageEnvelope, m any, own bool) bool {
	r := e.cache.route.Load()
	if r == nil || !e.hosted() || !r.shard.open.Load() || !r.shard.drained() || e.router.stale() {
		return false
	}
	um := m
	if own {
		if isRegionMessage(m) {
			return false
		}
		var err error
		if um, err = e.extractor.UnwrapMessage(m); err != nil || um == nil {
			return false
		}
	}
	return r.send(e.sharding.system.Root, env, um)
}

func init() {
	entityrefs.RunsHere = func(ref any) bool {
		e, ok := ref.(*EntityRef)
		return ok && e != nil && e.runsHere()
	}
	entityrefs.SendDirect = func(ref any, msg any) bool {
		e, ok := ref.(*EntityRef)
		return ok && e != nil && e.cache != nil && msg != nil && e.direct(nil, msg, false)
	}
	entityrefs.SendFrom = func(ref any, msg any, sender *actor.PID) error {
		e, ok := ref.(*EntityRef)
		if !ok || e == nil {
			return fmt.Errorf("actorsharding: %T is no *EntityRef: %w", ref, ErrNotStarted)
		}
		return e.send(context.Background(), msg, sender)
	}
}

// runsHere: the entity runs on this node, its shard open.
func (e EntityRef) runsHere() bool {
	if e.cache == nil || !e.hosted() {
		return false
	}
	r := e.cache.route.Load()
	if r == nil {
		e.cacheRoute()
		r = e.cache.route.Load()
	}
	return r != nil && r.shard.open.Load()
}

// hosted: the ref's region hosts entities, so the entity may have a route.
func (e EntityRef) hosted() bool { return e.router != nil && e.router.hosting }

// cacheRoute notes the entity's route, if it has one now, for the next
// sends.
func (e EntityRef) cacheRoute() {
	if !e.hosted() {
		return
	}
	if r := e.router.table.entities.get(e.id); r != nil {
		e.cache.route.Store(r)
	} else if e.cache.route.Load() != nil {
		e.cache.route.Store(nil)
	}
}

// Request sends msg to the entity and waits for its answer (Akka's ask);
// msg goes as Send sends it, with the trace context of ctx as SendContext
// sends it. The request waits until ctx's deadline, or 10 seconds if ctx
// has none, and ends as soon as ctx is cancelled; an ended ctx sends
// nothing. Ask returns the answer as the type the caller expects.
//
// If protoshard dropped the message on this node, the error wraps
// ErrDropped, the typed reason if any, and actor.ErrDeadLetter, and says
// why; a drop on another node gives actor.ErrDeadLetter alone. No answer
// before ctx's deadline gives an error that wraps both
// context.DeadlineExceeded and actor.ErrTimeout (actor.ErrTimeout alone
// after the 10 seconds), and a cancelled ctx one that wraps
// context.Canceled.
func (e EntityRef) Request(ctx context.Context, msg any) (any, error) {
	m, own, err := e.pack(msg)
	if err != nil {
		return nil, err
	}
	system := e.sharding.system
	call, err := ask.Start(ctx, system)
	if err != nil {
		return nil, fmt.Errorf("actorsharding: request to %s %q: %w", e.typeName, e.id, err)
	}
	f := call.Future()
	note := e.sharding.requests.watch(f.PID())
	defer e.sharding.requests.forget(f.PID())
	env := &actor.MessageEnvelope{Sender: f.PID(), Header: e.sharding.tracing.header(ctx, nil)}
	if !e.direct(env, m, own) {
		if own {
			shardproto.Tell(system.Root, e.region, m, f.PID(), env.Header)
		} else {
			e.router.sendFor(e.region, env, e.id, e.idHeader(), m.(proto.Message))
		}
		e.cacheRoute()
	}
	res, err := call.Result()
	if err == nil {
		return res, nil
	}
	if ev := note.Load(); ev != nil {
		if ev.Err != nil {
			return nil, fmt.Errorf("actorsharding: request to %s %q: %w: %s (%w, %w)", e.typeName, e.id, ErrDropped, ev.Reason, ev.Err, err)
		}
		return nil, fmt.Errorf("actorsharding: request to %s %q: %w: %s (%w)", e.typeName, e.id, ErrDropped, ev.Reason, err)
	}
	return nil, fmt.Errorf("actorsharding: request to %s %q: %w", e.typeName, e.id, err)
}

// ErrAnswerType is wrapped by the error of an Ask whose answer is not of
// the type asked for (an *AnswerTypeError).
var ErrAnswerType = errors.New("answer of another type")

// AnswerTypeError is the error of an Ask whose answer came but is not of
// the type asked for. The answer is kept in it: it was received, not
// dropped, so no dead-letter event is published for it.
type AnswerTypeError struct {
	// TypeName and EntityID name the entity that answered.
	TypeName, EntityID string
	// Got is the answer's type (nil for a nil answer), Want the type
	// asked for.
	Got, Want reflect.Type
	// Answer is the answer.
	Answer any
}

// Error names the entity and both types.
func (e *AnswerTypeError) Error() string {
	return fmt.Sprintf("actorsharding: ask %s %q: the answer is a %v, not a %v: %v", e.TypeName, e.EntityID, e.Got, e.Want, ErrAnswerType)
}

// Is makes the error match ErrAnswerType.
func (e *AnswerTypeError) Is(target error) bool { return target == ErrAnswerType }

// Ask is Request that returns the answer as a T. An answer of another
// type gives an *AnswerTypeError, which matches ErrAnswerType; the other
// errors are Request's.
func Ask[T any](ctx context.Context, ref EntityRef, msg any) (T, error) {
	var zero T
	res, err := ref.Request(ctx, msg)
	if err != nil {
		return zero, err
	}
	t, ok := res.(T)
	if !ok {
		return zero, &AnswerTypeError{TypeName: ref.typeName, EntityID: ref.id, Got: reflect.TypeOf(res), Want: reflect.TypeFor[T](), Answer: res}
	}
	return t, nil
}

// pack returns msg as it goes to the router for this entity; own: the
// extractor finds this entity's ID in it (else msg is a protobuf message
// that goes with the ref's ID).
func (e EntityRef) pack(msg any) (m any, own bool, err error) {
	if msg == nil {
		return nil, false, fmt.Errorf("actorsharding: %s %q: %w", e.typeName, e.id, deadletter.ErrNilMessage)
	}
	if e.sharding == nil {
		return nil, false, fmt.Errorf("actorsharding: the zero EntityRef: %w", ErrNotStarted)
	}
	if _, isEnvelope := msg.(*messages.ShardingEnvelope); !isEnvelope {
		if namesEntity(e.extractor, msg, e.id) {
			return msg, true, nil
		}
	}
	if _, ok := msg.(proto.Message); !ok {
		return nil, false, fmt.Errorf("actorsharding: %s %q: %T carries another entity ID or none, and only a protobuf message can go with the ref's: %w",
			e.typeName, e.id, msg, deadletter.ErrNotSerializable)
	}
	return msg, false, nil
}

// dropWatch notes, for requests under way, the dead-letter event of their
// message, keyed by the request's future. deadletter publishes its Event
// before proto.actor answers the future with a DeadLetterResponse, so the
// note is there when the request fails.
type dropWatch struct {
	futures sync.Map // future PID ID -> *atomic.Pointer[deadletter.Event]
}

func (w *dropWatch) watch(future *actor.PID) *atomic.Pointer[deadletter.Event] {
	note := &atomic.Pointer[deadletter.Event]{}
	w.futures.Store(future.Id, note)
	return note
}

func (w *dropWatch) forget(future *actor.PID) { w.futures.Delete(future.Id) }

// observe takes every deadletter.Event of the actor system.
func (w *dropWatch) observe(evt any) {
	e, ok := evt.(*deadletter.Event)
	if !ok || e.Sender == nil {
		return
	}
	if v, ok := w.futures.Load(e.Sender.Id); ok {
		v.(*atomic.Pointer[deadletter.Event]).CompareAndSwap(nil, e)
	}
}
