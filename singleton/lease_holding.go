package singleton

import (
	"errors"
	"fmt"
)

// leaseHolding is the manager's bookkeeping of its lease acquisitions and
// releases (WithLease): which acquisition is the latest, whether
// its answer is awaited, whether the lease may be held, and the fencing
// token of the holding the singleton started under. Its transitions are
// value functions: they return the next holding and what to do, and never
// touch the lease itself (leaseRunner does, off the actor).
type leaseHolding struct {
	gen       int    // number of the latest acquisition asked for
	requested bool   // AcquiringLease: the latest acquisition is unanswered
	mayHold   bool   // an acquisition was asked for and no release since
	token     uint64 // the fencing token of the holding the singleton started under
	retryGen  int    // re-armed by each retry timer
}

// Errors of leaseHolding's transitions; nothing changes on an error.
var (
	// errNothingToRelease: no acquisition may hold the lease.
	errNothingToRelease = errors.New("singleton: no lease acquisition to release")
	// errSingletonMayRun: the lease is never given back while the
	// singleton may still run under it.
	errSingletonMayRun = errors.New("singleton: not releasing the lease while the singleton may run")
)

// acquire asks for a new acquisition; its answer and its loss carry gen.
func (h leaseHolding) acquire() (next leaseHolding, gen int) {
	h.gen++
	h.requested = true
	h.mayHold = true
	return h, h.gen
}

// acquireNotAsked: the acquisition could not be asked for (no lease could
// be made); nothing is awaited.
func (h leaseHolding) acquireNotAsked() leaseHolding {
	h.requested = false
	return h
}

// armRetry numbers a new retry timer; earlier ones become stale.
func (h leaseHolding) armRetry() (next leaseHolding, gen int) {
	h.retryGen++
	return h, h.retryGen
}

// answered takes the answer to acquisition gen; inAcquiringLease: the
// manager is in AcquiringLease; stillHeld: the lease's CheckLease now.
func (h leaseHolding) answered(gen int, inAcquiringLease, acquired, stillHeld bool) (leaseHolding, acquireResultDecision) {
	current := gen == h.gen
	acquiring := current && inAcquiringLease && h.requested
	if acquiring {
		h.requested = false
	}
	return h, decideAcquireResult(acquireOutcome{current: current, acquiring: acquiring, acquired: acquired,
		stillHeld: acquired && stillHeld, mayHold: h.mayHold})
}

// retryDue decides on retry timer gen.
func (h leaseHolding) retryDue(gen int, singletonAlive bool) leaseRetryDecision {
	return decideLeaseRetry(gen == h.retryGen, h.requested, singletonAlive)
}

// lost decides on the loss of acquisition gen in state.
func (h leaseHolding) lost(gen int, state string, singletonAlive bool) leaseLostDecision {
	return decideLeaseLost(gen == h.gen, state, singletonAlive)
}

// stopAsking: the acquisition's answer is no longer awaited (the lease
// was lost and the singleton stops first).
func (h leaseHolding) stopAsking() leaseHolding {
	h.requested = false
	return h
}

// startedUnder records the token of the holding the singleton starts under.
func (h leaseHolding) startedUnder(token uint64) leaseHolding {
	h.token = token
	return h
}

// release gives the lease back: only if an acquisition may hold it, and
// never while the singleton may still run.
func (h leaseHolding) release(haveLease, singletonMayRun bool) (leaseHolding, error) {
	if !haveLease || !h.mayHold {
		return h, errNothingToRelease
	}
	if singletonMayRun {
		return h, fmt.Errorf("lease may be held: %w", errSingletonMayRun)
	}
	h.mayHold = false
	h.requested = false
	return h, nil
}
