package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/guard"
	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/proto"
)

// StateActive is the producer controller's only state; it appears in logs.
const StateActive = "active"

// ShardingProducerController sends one producer's messages to the entities
// of one type, at least once and in order per entity (Akka's
// ShardingProducerController): it numbers them per entity, keeps each until
// the entity's ShardingConsumerController confirms it, sends no more than
// the entity asked for, and resends what the entity did not get (it
// restarted, moved, or a message was lost). Its methods are safe for
// concurrent use.
type ShardingProducerController struct {
	system *actor.ActorSystem
	pid    *actor.PID
}

// StartShardingProducerController starts the controller of producer
// producerID for the entities of typeName, whose region or proxy runs on
// this node. producerID names the producer to the entities: give each
// producer its own.
func StartShardingProducerController(s *actorsharding.Sharding, typeName, producerID string, settings ProducerSettings) (*ShardingProducerController, error) {
	if producerID == "" {
		return nil, errors.New("delivery: empty producer ID")
	}
	if _, ok := s.Region(typeName); !ok {
		return nil, fmt.Errorf("delivery: producer %q: %w", producerID, actorsharding.ErrNotStarted)
	}
	system := s.System()
	props := actor.PropsFromProducer(func() actor.Actor {
		return &producerController{sharding: s, typeName: typeName, producerID: producerID, settings: settings.withDefaults(),
			refs: map[string]actorsharding.EntityRef{}, waiting: map[confirmation]chan error{}}
	}, guard.WithMailbox())
	pid, err := system.Root.SpawnNamed(props, "delivery/"+typeName+"/"+producerID)
	if err != nil {
		return nil, fmt.Errorf("delivery: start producer %q of %s: %w", producerID, typeName, err)
	}
	return &ShardingProducerController{system: system, pid: pid}, nil
}

// sendRequest is a Send or SendWithConfirmation for the actor.
type sendRequest struct {
	entityID string
	msg      proto.Message
	ack      bool
	done     chan error // buffered: accepted (or confirmed, with ack) or why not
}

// Send hands msg to the controller for entityID. nil: accepted, numbered,
// and sent or buffered until the entity asks for it; it is delivered
// unless this producer stops first. ErrBufferFull: the entity asked for
// nothing and BufferSize messages already wait; try again later.
func (p *ShardingProducerController) Send(ctx context.Context, entityID string, msg proto.Message) error {
	return p.send(ctx, entityID, msg, false)
}

// SendWithConfirmation is Send that returns once the entity confirmed msg
// (Akka's askNextTo), or ctx ended.
func (p *ShardingProducerController) SendWithConfirmation(ctx context.Context, entityID string, msg proto.Message) error {
	return p.send(ctx, entityID, msg, true)
}

func (p *ShardingProducerController) send(ctx context.Context, entityID string, msg proto.Message, ack bool) error {
	r := &sendRequest{entityID: entityID, msg: msg, ack: ack, done: make(chan error, 1)}
	p.system.Root.Send(p.pid, r)
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("delivery: send to %q: %w", entityID, ctx.Err())
	}
}

type getStats struct{ done chan ProducerStats }

// Stats reports the controller's counts.
func (p *ShardingProducerController) Stats(ctx context.Context) (ProducerStats, error) {
	r := &getStats{done: make(chan ProducerStats, 1)}
	p.system.Root.Send(p.pid, r)
	select {
	case st := <-r.done:
		return st, nil
	case <-ctx.Done():
		return ProducerStats{}, ctx.Err()
	}
}

type stopProducer struct{ done chan struct{} }

// Stop stops the controller. Messages the entities have not confirmed yet
// are dropped, each with a dead-letter event (ErrProducerStopped); a
// SendWithConfirmation still waiting fails with ErrProducerStopped.
func (p *ShardingProducerController) Stop(ctx context.Context) error {
	r := &stopProducer{done: make(chan struct{})}
	p.system.Root.Send(p.pid, r)
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// The controller's timers.
type (
	resendFirstTick struct{}
	idleCheckTick   struct{}
	cleanupTick     struct{}
)

// producerController is the actor: it carries out what producerState
// decides.
type producerController struct {
	sharding   *actorsharding.Sharding
	typeName   string
	producerID string
	settings   ProducerSettings

	state   *producerState
	refs    map[string]actorsharding.EntityRef
	waiting map[confirmation]chan error // SendWithConfirmation by entity and seqNr
	timers  *scheduler.TimerScheduler
	cancels []scheduler.CancelFunc
}

func (c *producerController) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		c.state = newProducerState(c.producerID, ctx.Self(), c.settings, nil)
		c.timers = scheduler.NewTimerScheduler(ctx)
		c.cancels = append(c.cancels,
			c.timers.SendRepeatedly(c.settings.ResendFirstInterval, c.settings.ResendFirstInterval, ctx.Self(), resendFirstTick{}),
			c.timers.SendRepeatedly(c.settings.ResendFirstUnconfirmedIdleTimeout/2, c.settings.ResendFirstUnconfirmedIdleTimeout/2, ctx.Self(), idleCheckTick{}),
			c.timers.SendRepeatedly(c.settings.CleanupUnusedAfter, c.settings.CleanupUnusedAfter, ctx.Self(), cleanupTick{}))
		ctx.Logger().Info("delivery: producer controller started", c.attrs()...)
	case *actor.Stopping:
		for _, cancel := range c.cancels {
			cancel()
		}
	case *sendRequest:
		c.onSend(ctx, msg)
	case *messages.Request:
		out, err := c.state.onRequest(msg, time.Now())
		c.carryOut(ctx, out, msg, err)
	case *messages.Ack:
		out, err := c.state.onAck(msg, time.Now())
		c.carryOut(ctx, out, msg, err)
	case *messages.Resend:
		out, err := c.state.onResend(msg)
		c.carryOut(ctx, out, msg, err)
	case resendFirstTick:
		if c.state.needsResendFirst() {
			c.carryOut(ctx, c.state.onResendFirstTick(), nil, nil)
		}
	case idleCheckTick:
		c.carryOut(ctx, c.state.onIdleTick(time.Now()), nil, nil)
	case cleanupTick:
		for _, id := range c.state.cleanup(time.Now()) {
			delete(c.refs, id)
		}
	case *getStats:
		msg.done <- c.state.stats()
	case *stopProducer:
		c.stop(ctx)
		close(msg.done)
	case *actor.Stopped, *actor.Restarting:
	default:
		deadletter.Publish(ctx.ActorSystem(), ctx.Self(), msg, ctx.Sender(),
			fmt.Sprintf("delivery producer %s: %T is no message of this controller (state %s)", c.producerID, msg, StateActive))
	}
}

func (c *producerController) attrs() []any {
	return []any{slog.String("type", c.typeName), slog.String("producer", c.producerID), slog.String("state", StateActive)}
}

func (c *producerController) onSend(ctx actor.Context, r *sendRequest) {
	out, err := c.state.accept(r.entityID, r.msg, r.ack, time.Now())
	if err != nil {
		r.done <- fmt.Errorf("delivery: producer %s, entity %q: %w", c.producerID, r.entityID, err)
		return
	}
	if r.ack {
		// accept numbered it last: its seqNr is the one before the next.
		c.waiting[confirmation{entityID: r.entityID, seqNr: c.state.outs[r.entityID].currentSeqNr - 1}] = r.done
	} else {
		r.done <- nil
	}
	c.carryOut(ctx, out, nil, nil)
}

// carryOut sends what a transition asks for; err is the transition's
// refusal of in (a stale or invalid reply from an entity).
func (c *producerController) carryOut(ctx actor.Context, out outOutput, in any, err error) {
	if err != nil {
		ctx.Logger().Debug("delivery: producer ignored an entity's reply", append(c.attrs(), slog.Any("reason", err),
			slog.String("message", fmt.Sprintf("%T", in)))...)
		return
	}
	for _, m := range out.resend {
		c.deliver(ctx, m)
	}
	for _, m := range out.send {
		c.deliver(ctx, m)
	}
	for _, cf := range out.confirmed {
		if done, ok := c.waiting[cf]; ok {
			done <- nil
			delete(c.waiting, cf)
		}
	}
}

// deliver sends m to its entity through the entity's ref.
func (c *producerController) deliver(ctx actor.Context, m *messages.SequencedMessage) {
	ref, ok := c.refs[m.GetEntityId()]
	if !ok {
		var err error
		if ref, err = c.sharding.EntityRefFor(c.typeName, m.GetEntityId()); err != nil {
			deadletter.PublishError(ctx.ActorSystem(), ctx.Self(), m, nil,
				fmt.Errorf("delivery producer %s: entity %q: %w (resent later)", c.producerID, m.GetEntityId(), err))
			return
		}
		c.refs[m.GetEntityId()] = ref
	}
	if err := ref.Send(m); err != nil {
		deadletter.PublishError(ctx.ActorSystem(), ctx.Self(), m, nil,
			fmt.Errorf("delivery producer %s: entity %q: %w (resent later)", c.producerID, m.GetEntityId(), err))
	}
}

// stop drops what is not confirmed, with a dead-letter event each, fails
// the waiting SendWithConfirmations, and stops the actor.
func (c *producerController) stop(ctx actor.Context) {
	c.state.stop()
	for _, m := range c.state.undelivered() {
		deadletter.PublishError(ctx.ActorSystem(), ctx.Self(), m, nil,
			fmt.Errorf("delivery producer %s: entity %q, seqNr %d: %w", c.producerID, m.GetEntityId(), m.GetSeqNr(), ErrProducerStopped))
	}
	for cf, done := range c.waiting {
		done <- fmt.Errorf("delivery: producer %s, entity %q: %w", c.producerID, cf.entityID, ErrProducerStopped)
		delete(c.waiting, cf)
	}
	ctx.Stop(ctx.Self())
}
