package singleton

import (
	"errors"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/lease"
)

// The manager's lease I/O (WithLease): making, acquiring, losing and
// releasing it; leaseHolding decides, leaseRunner asks the lease.

// makeLease makes the lease of this member's incarnation now rather than
// at the first acquisition, so that a lease that observes its holder
// (lease.Observer) starts counting before this member may become the
// oldest.
func (m *manager) makeLease(ctx actor.Context) {
	if m.settings.UseLease == nil {
		return
	}
	if _, err := m.currentLease(ctx.Logger()); err != nil {
		ctx.Logger().Warn("singleton: failed to get lease (will be retried when needed)", slog.Any("error", err))
	}
}

// currentLease returns the lease of this member incarnation (leaseRunner).
func (m *manager) currentLease(logger *slog.Logger) (lease.Lease, error) {
	return m.leases.current(m.settings.UseLease, leaseName(m.name), m.self.Address+"/"+m.self.ID, logger)
}

// tryAcquireLease asks the lease for a holding; the answer comes back as an
// acquireLeaseResult, and a later loss as a leaseLost, both numbered.
func (m *manager) tryAcquireLease(ctx actor.Context) {
	l, err := m.currentLease(ctx.Logger())
	if err != nil {
		ctx.Logger().Error("singleton: failed to get lease (will be retried)", slog.Any("error", err))
		m.holding = m.holding.acquireNotAsked()
		m.armLeaseRetry(ctx)
		return
	}
	var gen int
	m.holding, gen = m.holding.acquire()
	m.leases.acquire(ctx.ActorSystem(), ctx.Self(), l, gen)
}

func (m *manager) armLeaseRetry(ctx actor.Context) {
	var gen int
	m.holding, gen = m.holding.armRetry()
	m.timers.SendOnce(m.settings.LeaseRetryInterval, ctx.Self(), leaseRetry{gen: gen})
}

func (m *manager) onAcquireResult(ctx actor.Context, msg acquireLeaseResult) {
	var decision acquireResultDecision
	m.holding, decision = m.holding.answered(msg.gen, m.state == stateAcquiringLease, msg.acquired, msg.acquired && m.leases.held())
	switch decision {
	case startWithLease:
		ctx.Logger().Debug("singleton: acquire lease result true", slog.Uint64("fencingToken", msg.token))
		m.gotoOldest(ctx, msg.token, true)
	case retryLeaseLater:
		switch decideLeaseRetryCause(msg.err, msg.acquired) {
		case leaseFailed:
			ctx.Logger().Error("singleton: failed to get lease (will be retried)", slog.Any("error", msg.err),
				slog.Duration("retryIn", m.settings.LeaseRetryInterval))
		case leaseLostBeforeStart:
			ctx.Logger().Warn("singleton: lease lost before the singleton could start (will be retried)",
				slog.Duration("retryIn", m.settings.LeaseRetryInterval))
		default:
			ctx.Logger().Debug("singleton: acquire lease result false: held by another owner, or not yet free (will be retried)",
				slog.Duration("retryIn", m.settings.LeaseRetryInterval))
		}
		m.armLeaseRetry(ctx)
	case releaseUnwantedLease:
		m.releaseLease(ctx, "acquired after the manager stopped wanting it", false)
	}
}

func (m *manager) onLeaseLost(ctx actor.Context, msg leaseLost) {
	switch m.holding.lost(msg.gen, m.state, m.singleton != nil) {
	case stopSingletonAndReacquire:
		// Stopped, not sent the termination message: that would wait
		// behind the singleton's mailbox, and the lease's margin is short.
		ctx.Logger().Warn("singleton: Lease has been lost. Terminating singleton and trying to re-acquire lease",
			slog.Any("reason", msg.reason), slog.String("pid", m.singleton.String()))
		ctx.Stop(m.singleton)
		m.holding = m.holding.stopAsking()
		m.become(ctx, stateAcquiringLease, m.acquiringLease)
		m.askNext(ctx)
	case reacquireLease:
		ctx.Logger().Warn("singleton: Lease has been lost. Trying to re-acquire lease", slog.Any("reason", msg.reason))
		m.become(ctx, stateAcquiringLease, m.acquiringLease)
		m.askNext(ctx)
		m.tryAcquireLease(ctx)
	case stopSingletonNow:
		ctx.Logger().Warn("singleton: lease lost during the hand-over; stopping the singleton at once",
			slog.Any("reason", msg.reason), slog.String("state", m.state))
		ctx.Stop(m.singleton)
	default:
		ctx.Logger().Debug("singleton: ignoring a lease loss", slog.String("state", m.state), slog.Any("reason", msg.reason))
	}
}

// releaseLease gives the lease back if an acquisition may hold it. Never
// while the singleton may still run. It reports whether a release was
// started (its answer comes as a releaseLeaseResult).
func (m *manager) releaseLease(ctx actor.Context, why string, afterHandOver bool) bool {
	next, err := m.holding.release(m.leases.made(), m.singleton != nil)
	if errors.Is(err, errSingletonMayRun) {
		ctx.Logger().Error(errSingletonMayRun.Error(), slog.String("why", why))
	}
	if err != nil {
		return false
	}
	m.holding = next
	ctx.Logger().Debug("singleton: releasing lease", slog.String("why", why))
	m.leases.release(ctx.ActorSystem(), ctx.Self(), afterHandOver)
	return true
}

func (m *manager) logReleaseResult(ctx actor.Context, msg releaseLeaseResult) {
	switch {
	case msg.err != nil:
		ctx.Logger().Warn("singleton: failed to release lease; the singleton may not run elsewhere until the lease times out",
			slog.Any("error", msg.err))
	case msg.released:
		ctx.Logger().Debug("singleton: lease released")
	default:
		ctx.Logger().Debug("singleton: lease was not held any more when released")
	}
}

func (m *manager) setFencingToken(ctx actor.Context, token uint64) {
	fencingTokens.Store(fencingKey{system: ctx.ActorSystem(), manager: ctx.Self().Id},
		fencingEntry{singletonID: ctx.Self().Id + "/" + m.settings.SingletonName, token: token})
}

func (m *manager) clearFencingToken(ctx actor.Context) {
	fencingTokens.Delete(fencingKey{system: ctx.ActorSystem(), manager: ctx.Self().Id})
}
