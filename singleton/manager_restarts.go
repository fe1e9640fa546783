package singleton

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// The manager restarting its singleton (singletonRestarts books the
// restarts and their back-off; decideTermination and decideRestartDue decide).

// singletonTerminated books the singleton's termination; one that stopped
// on its own while this member is the oldest (and not leaving) starts again
// after the back-off. Every other state asked it to stop, or hands it over.
func (m *manager) singletonTerminated(ctx actor.Context) {
	fenceStopped := m.fence != nil && m.fence.takeStopped()
	booking := decideTermination(m.state, m.selfExited, m.selfGone, m.managerStopping, fenceStopped)
	var plan restartPlan
	var err error
	if booking == bookFencedStop {
		// Its stale fence stopped it: due again once this node has
		// confirmed its membership, unless the removal comes first.
		plan, err = m.restarts.fencedStop(time.Now())
	} else {
		plan, err = m.restarts.stopped(time.Now(), booking == bookRestartable)
	}
	switch {
	case err != nil:
		ctx.Logger().Error("singleton: singleton actor terminated", slog.String("state", m.state), slog.Any("error", err))
	case plan.restart:
		ctx.Logger().Warn("singleton: singleton actor terminated while oldest; starting it again after the back-off",
			slog.String("state", m.state), slog.Int("restart", plan.attempt), slog.Duration("backoff", plan.delay))
		m.timers.SendOnce(plan.delay, ctx.Self(), restartSingleton{gen: plan.gen})
	case booking != bookStopped:
		ctx.Logger().Warn("singleton: singleton actor terminated while oldest; it is not restarted (as in Akka: WithoutSingletonRestart)",
			slog.String("state", m.state))
	}
}

// onRestartDue starts the singleton again once its back-off has passed,
// under the lease holding it ran under before, or after acquiring the lease
// again if that holding is gone.
func (m *manager) onRestartDue(ctx actor.Context, msg restartSingleton) {
	attempt, ok := m.restarts.due(msg.gen)
	if !ok {
		return // cancelled meanwhile
	}
	useLease := m.settings.UseLease != nil
	switch decideRestartDue(useLease, m.leases.held()) {
	case startAgainNow:
		ctx.Logger().Debug("singleton: back-off passed; starting the singleton actor again",
			slog.String("state", m.state), slog.Int("restart", attempt))
		m.gotoOldest(ctx, m.holding.token, useLease)
	case acquireLeaseBeforeRestart:
		ctx.Logger().Warn("singleton: back-off passed but the lease is no longer held; acquiring it before starting the singleton again",
			slog.String("state", m.state), slog.Int("restart", attempt))
		m.become(ctx, stateAcquiringLease, m.acquiringLease)
		m.askNext(ctx)
		m.tryAcquireLease(ctx)
	}
}

// startRefused: this node's membership is stale, so the singleton did not
// start; this member stays the oldest with the start due after the
// back-off. Its removal, when it hears of it, cancels the start (as does a
// hand-over); if it confirms its membership again instead, the start goes
// ahead.
func (m *manager) startRefused(ctx actor.Context, plan restartPlan, err error) {
	ctx.Logger().Warn("singleton: not starting the singleton actor; trying again after the back-off unless this member's removal comes first",
		slog.String("state", m.state), slog.Int("attempt", plan.attempt), slog.Duration("backoff", plan.delay), slog.Any("error", err))
	m.timers.SendOnce(plan.delay, ctx.Self(), restartSingleton{gen: plan.gen})
	m.history.forget()
	m.become(ctx, stateOldest, m.oldest)
	m.askNext(ctx)
}

// cancelRestart drops a pending restart of the singleton: this member no
// longer runs it (hand-over, leave, removal, lease loss).
func (m *manager) cancelRestart(ctx actor.Context, why string) {
	if m.restarts.cancel() {
		ctx.Logger().Debug("singleton: pending restart of the singleton actor cancelled", slog.String("state", m.state),
			slog.String("why", why))
	}
}
