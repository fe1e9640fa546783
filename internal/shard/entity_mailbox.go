package shard

import (
	"fmt"
	"reflect"
	"sync/atomic"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/deadletters"
	"github.com/protoshard/protoshard/internal/dispatch"
)

// entityMailbox is an entity's mailbox (the one its props ask for, or
// proto.actor's default) and, in the process registry, the entity's
// process. It reports with a dead-letter event (deadletter.ErrEntityStopped)
// what reaches the entity after it stopped, where proto.actor discards it
// without a trace.
//
// proto.actor stops an actor on its Stop system message, which overtakes
// the user messages queued: once it has finalized the stop (removed the
// actor from the process registry, told its parent), it drops every user
// message still queued or posted later. An entity that stops itself
// (ctx.Stop, not Passivate) keeps receiving: the region's router sends
// straight into its mailbox until the shard handles its termination and
// closes its route, and the shard sends its own until then. Akka sends a
// stopped actor's mailbox to dead letters; so does this mailbox, as the
// entity's invoker: after each Stop or Terminated it handles it checks
// whether the stop is final, and from then on turns each user message into
// an event.
//
// As the entity's process it also takes what is sent after the registry
// removal: a PID keeps the process it first resolved, and proto.actor's
// own process marks itself dead to make its PIDs resolve again, while this
// one stays. The router's and the shard's PIDs of the entity so reach it
// until they stop sending, and their messages are reported as stopped, not
// as proto.actor's reasonless dead letters. A PID that still holds it once
// the entity runs again (a PID has no incarnation) reaches the next
// incarnation through it, as it would through proto.actor's process.
type entityMailbox struct {
	actor.Mailbox
	// entity is the entity's context, its invoker; set at
	// RegisterHandlers, before anything reads it.
	entity actor.MessageInvoker
	shard  *entityShard
	state  atomic.Uint32 // mailboxRegistered | mailboxStopped
}

// entityShard names the shard of an entity, for the reasons of its drops.
type entityShard struct{ typeName, shardID string }

const (
	// mailboxRegistered: the mailbox is the entity's process in the
	// registry (proto.actor's process was replaced).
	mailboxRegistered = 1 << iota
	// mailboxStopped: the entity's stop is final.
	mailboxStopped
)

// entityMailboxes returns props that spawn entities of shard sh as props
// does, each in an entityMailbox around the mailbox props ask for. ok is
// false, and props are returned as they are, if that mailbox cannot be
// found (proto.actor's Props changed shape).
func entityMailboxes(props *actor.Props, sh *entityShard) (_ *actor.Props, ok bool) {
	if props == nil {
		return nil, true
	}
	inner, ok := mailboxProducerOf(props)
	if !ok {
		return props, false
	}
	if inner == nil {
		inner = defaultMailbox
	}
	opts := []actor.PropsOption{actor.WithMailbox(func() actor.Mailbox {
		return &entityMailbox{Mailbox: inner(), shard: sh}
	})}
	if d, ok := unexportedField[actor.Dispatcher](props, "dispatcher"); ok && d == nil {
		// An entity that receives one message at a time would otherwise
		// start a goroutine, and grow its stack, for each.
		opts = append(opts, actor.WithDispatcher(dispatch.Mailboxes))
	}
	return props.Clone(opts...), true
}

// defaultMailbox is proto.actor's default mailbox, as Props without
// actor.WithMailbox get it.
var defaultMailbox = actor.Unbounded()

// mailboxProducerOf returns the mailbox producer props were given with
// actor.WithMailbox, nil if none (proto.actor's default). proto.actor keeps
// it unexported and has no getter, and wrapping the mailbox must keep the
// user's own. ok is false if Props has no such field any more.
func mailboxProducerOf(props *actor.Props) (_ actor.MailboxProducer, ok bool) {
	return unexportedField[actor.MailboxProducer](props, "mailboxProducer")
}

// unexportedField reads props' unexported field name, of type T; ok is
// false if Props has no such field any more.
func unexportedField[T any](props *actor.Props, name string) (_ T, ok bool) {
	var zero T
	f := reflect.ValueOf(props).Elem().FieldByName(name)
	if !f.IsValid() || f.Type() != reflect.TypeFor[T]() {
		return zero, false
	}
	return *(*T)(unsafe.Pointer(f.UnsafeAddr())), true
}

// RegisterHandlers implements actor.Mailbox: the mailbox invokes the
// entity through itself, and takes the place of proto.actor's process in
// the registry. proto.actor calls it as it spawns the entity, after
// registering the entity's process and before the entity starts, so
// nothing has stopped it yet.
func (m *entityMailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	ctx, ok := invoker.(actor.Context)
	if !ok {
		m.Mailbox.RegisterHandlers(invoker, dispatcher) // not proto.actor's context: nothing to add
		return
	}
	m.entity = invoker
	m.Mailbox.RegisterHandlers(m, dispatcher)
	id, registry := ctx.Self().Id, ctx.ActorSystem().ProcessRegistry
	if p, ok := registry.GetLocal(id); ok {
		if _, isDefault := p.(*actor.ActorProcess); isDefault {
			m.state.Store(mailboxRegistered)
			registry.LocalPIDs.GetBucket(id).Set(id, m)
		}
	}
}

// PostUserMessage implements actor.Mailbox.
func (m *entityMailbox) PostUserMessage(msg any) {
	if m.state.Load()&mailboxStopped != 0 {
		m.afterStop(msg)
		return
	}
	m.Mailbox.PostUserMessage(msg)
}

// PostSystemMessage implements actor.Mailbox. After the stop it does what
// proto.actor's dead-letter process does (a Watch is answered with
// Terminated), unless the entity runs again.
func (m *entityMailbox) PostSystemMessage(msg any) {
	if m.state.Load()&mailboxStopped != 0 {
		ctx := m.entity.(actor.Context)
		if next := m.next(ctx); next != nil {
			next.PostSystemMessage(msg)
			return
		}
		ctx.ActorSystem().DeadLetter.SendSystemMessage(ctx.Self(), msg)
		return
	}
	m.Mailbox.PostSystemMessage(msg)
}

// SendUserMessage implements actor.Process.
func (m *entityMailbox) SendUserMessage(_ *actor.PID, msg any) { m.PostUserMessage(msg) }

// SendSystemMessage implements actor.Process.
func (m *entityMailbox) SendSystemMessage(_ *actor.PID, msg any) { m.PostSystemMessage(msg) }

// Stop implements actor.Process.
func (m *entityMailbox) Stop(*actor.PID) { m.PostSystemMessage(&actor.Stop{}) }

// InvokeUserMessage implements actor.MessageInvoker: the entity's message,
// or a dead letter once the entity's stop is final.
func (m *entityMailbox) InvokeUserMessage(msg any) {
	if m.state.Load()&mailboxStopped != 0 {
		m.drop(m.entity.(actor.Context), msg)
		return
	}
	m.entity.InvokeUserMessage(msg)
}

// InvokeSystemMessage implements actor.MessageInvoker. proto.actor
// finalizes a stop as it handles Stop, or its last child's Terminated.
func (m *entityMailbox) InvokeSystemMessage(msg any) {
	switch msg.(type) {
	case *actor.Stop, *actor.Terminated:
		defer m.noteStop()
	}
	m.entity.InvokeSystemMessage(msg)
}

// EscalateFailure implements actor.MessageInvoker.
func (m *entityMailbox) EscalateFailure(reason, msg any) { m.entity.EscalateFailure(reason, msg) }

// noteStop marks the stop final once proto.actor has removed the entity
// from the registry: then nothing will invoke it any more.
func (m *entityMailbox) noteStop() {
	ctx := m.entity.(actor.Context)
	p, ok := ctx.ActorSystem().ProcessRegistry.GetLocal(ctx.Self().Id)
	registered := m.state.Load()&mailboxRegistered != 0
	// Without the registry entry of its own, a next incarnation already
	// registered hides the removal; the stop then goes unnoticed, as in
	// proto.actor.
	if (registered && p != actor.Process(m)) || (!registered && !ok) {
		m.state.Or(mailboxStopped)
	}
}

// afterStop takes a user message posted after the stop: the next
// incarnation's, if the entity runs again, else dropped.
func (m *entityMailbox) afterStop(msg any) {
	ctx := m.entity.(actor.Context)
	if next := m.next(ctx); next != nil {
		next.PostUserMessage(msg)
		return
	}
	m.drop(ctx, msg)
}

// next is the mailbox of the entity's next incarnation, if one runs.
func (m *entityMailbox) next(ctx actor.Context) *entityMailbox {
	p, _ := ctx.ActorSystem().ProcessRegistry.GetLocal(ctx.Self().Id)
	if n, ok := p.(*entityMailbox); ok && n != m {
		return n
	}
	return nil
}

// drop reports msg as dropped: the entity had stopped.
func (m *entityMailbox) drop(ctx actor.Context, msg any) {
	_, payload, sender := actor.UnwrapEnvelope(msg)
	self := ctx.Self()
	id, err := EntityID(childName(self))
	if err != nil {
		id = childName(self)
	}
	deadletters.PublishError(ctx.ActorSystem(), self, payload, sender, fmt.Errorf("shard %s/%s: entity %q had stopped when the message reached it: %w",
		m.shard.typeName, m.shard.shardID, id, deadletter.ErrEntityStopped))
}
