package singleton

import (
	"errors"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/deadletters"
	"github.com/protoshard/protoshard/messages"
)

// The manager routing messages proxied to the singleton (routeEnvelope
// decides where each goes).

// onEnvelope handles a message from a proxy: to the singleton if it runs
// here, held while one is about to run here, passed on to where it went.
func (m *manager) onEnvelope(ctx actor.Context, env *messages.SingletonEnvelope) {
	switch routeEnvelope(m.state, m.singleton != nil, m.restarts.pending()) {
	case deliverToSingleton:
		msg, err := env.GetMessage().UnmarshalNew()
		if err != nil {
			m.drop(ctx, env, fmt.Sprintf("cannot decode proxied message %q: %v", env.GetMessage().GetTypeUrl(), err))
			return
		}
		if env.Sender != nil {
			ctx.RequestWithCustomSender(m.singleton, msg, env.Sender)
			return
		}
		ctx.Send(m.singleton, msg)
	case holdEnvelope:
		if dropped, ok := m.envelopes.AddDroppingOldest(struct{}{}, env); ok {
			m.dropError(ctx, dropped, errHeldEnvelopesFull(m.settings.BufferSize))
		}
	case dropNotRestarted:
		m.drop(ctx, env, "the singleton actor has terminated and is not restarted")
	case passToPreviousOldest:
		var to *actor.PID
		if prev, ok := m.history.mostRecent(); ok {
			to = m.peer(ctx, prev.Address)
		}
		m.passOn(ctx, to, env, "this member does not run the singleton and knows no oldest")
	case passToHandedOver:
		m.passOn(ctx, m.offer.to, env, "this member no longer runs the singleton")
		m.armDrain(ctx)
	default:
		m.dropError(ctx, env, fmt.Errorf("this member was removed from the cluster: %w", deadletter.ErrMemberRemoved))
	}
}

func (m *manager) passOn(ctx actor.Context, to *actor.PID, env *messages.SingletonEnvelope, reason string) {
	switch decidePassOn(to != nil && !to.Equal(ctx.Self()), env.Hops) {
	case dropNoManager:
		m.drop(ctx, env, reason)
	case dropTooManyHops:
		m.drop(ctx, env, fmt.Sprintf("forwarded %d times between managers without reaching the singleton", env.Hops))
	default:
		env.Hops++
		ctx.Send(to, env)
	}
}

func (m *manager) drop(ctx actor.Context, env *messages.SingletonEnvelope, reason string) {
	m.dropError(ctx, env, errors.New(reason))
}

// dropError is drop with a typed reason (see deadletter's reason classes).
func (m *manager) dropError(ctx actor.Context, env *messages.SingletonEnvelope, reason error) {
	deadletters.PublishError(ctx.ActorSystem(), ctx.Self(), env, env.GetSender(), fmt.Errorf("singleton manager: %w", reason))
}
