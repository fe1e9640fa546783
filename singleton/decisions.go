package singleton

import (
	"time"

	"github.com/protoshard/protoshard/membership"
)

// The manager's decisions as pure functions, so they are table-tested
// without actors (the actor only moves messages and calls these).

// maxHandOverRetries is Akka's max(min, removalMargin/interval + 3).
func maxHandOverRetries(s settings) int {
	n := int(s.RemovalMargin/s.HandOverRetryInterval) + 3
	if n < s.MinNumberOfHandOverRetries {
		return s.MinNumberOfHandOverRetries
	}
	return n
}

// maxTakeOverRetries is Akka's max(1, maxHandOverRetries - 3).
func maxTakeOverRetries(s settings) int {
	n := maxHandOverRetries(s) - 3
	if n < 1 {
		return 1
	}
	return n
}

// startDecision is where a manager in Start goes on InitialOldestState.
type startDecision int

const (
	startAsOldest startDecision = iota
	startBecomingOldest
	startYounger
)

// decideStart: the oldest becomes Oldest at once only when it is safe (no
// older member is still leaving, which might still run the singleton);
// otherwise it waits for a hand-over in BecomingOldest.
func decideStart(self membership.Member, oldest *membership.Member, safeToBeOldest bool) startDecision {
	if oldest != nil && oldest.ID == self.ID {
		if safeToBeOldest {
			return startAsOldest
		}
		return startBecomingOldest
	}
	return startYounger
}

// youngerDecision is what a Younger manager does on OldestChanged.
type youngerDecision int

const (
	stayYounger youngerDecision = iota
	// becomeOldestNow: no previous oldest can still run the singleton.
	becomeOldestNow
	// askHandOver: send HandOverToMe to the previous oldest and wait.
	askHandOver
)

// decideYounger: when self became the oldest, it takes over at once only if
// every previous oldest is known to be gone (removed, and past the removal
// margin); otherwise it asks the most recent one to hand over.
func decideYounger(self membership.Member, newOldest *membership.Member, previousOldest []membership.Member, removed map[string]bool) youngerDecision {
	if newOldest == nil || newOldest.ID != self.ID {
		return stayYounger
	}
	for _, p := range previousOldest {
		if !removed[p.ID] {
			return askHandOver
		}
	}
	return becomeOldestNow
}

// firstLive returns the most recent previous oldest that is not removed.
func firstLive(previousOldest []membership.Member, removed map[string]bool) (membership.Member, bool) {
	for _, p := range previousOldest {
		if !removed[p.ID] {
			return p, true
		}
	}
	return membership.Member{}, false
}

// oldestChangedInOldest is what an Oldest manager does when the oldest changes
// (self is leaving, so someone else became the oldest).
type oldestDecision int

const (
	stayOldest oldestDecision = iota
	// handOverToNobody: the new oldest is already removed; stop the
	// singleton and stay as a plain member.
	handOverToNobody
	// goWasOldest: tell the new oldest TakeOverFromMe and wait for its
	// HandOverToMe (or none, when there is no new oldest).
	goWasOldest
)

func decideOldestChanged(self membership.Member, newOldest *membership.Member, removed map[string]bool, selfExited bool) oldestDecision {
	switch {
	case newOldest != nil && newOldest.ID == self.ID:
		return stayOldest
	case newOldest != nil && !selfExited && removed[newOldest.ID]:
		return handOverToNobody
	default:
		return goWasOldest
	}
}

// takeOverRetryDecision is what a WasOldest manager does on TakeOverRetry.
type takeOverRetryDecision int

const (
	retryTakeOver takeOverRetryDecision = iota
	stopSingleton
	stuck
)

// decideTakeOverRetry: an exiting oldest with nobody to hand over to, or out
// of retries, stops the singleton itself; a non-exiting one out of retries
// is stuck (Akka throws ClusterSingletonManagerIsStuck).
func decideTakeOverRetry(count int, s settings, selfExited, haveNewOldest bool) takeOverRetryDecision {
	if selfExited && (!haveNewOldest || count > maxTakeOverRetries(s)) {
		return stopSingleton
	}
	if count <= maxTakeOverRetries(s) {
		return retryTakeOver
	}
	return stuck
}

// removalDelay is how long to wait before a failure-detected removal of a
// previous oldest counts; graceful leavers handed over already.
func removalDelay(s settings, graceful bool) time.Duration {
	if graceful {
		return 0
	}
	return s.RemovalMargin
}

// effectiveRemovalMargin resolves the RemovalMargin setting against the
// cluster's down-removal margin: zero takes the cluster's, negative means
// none, positive is used as is.
func effectiveRemovalMargin(setting, clusterMargin time.Duration) time.Duration {
	switch {
	case setting > 0:
		return setting
	case setting < 0:
		return 0
	default:
		return max(clusterMargin, 0)
	}
}

// becomeOldestDecision is how a manager that may now run the singleton
// goes on (Akka's tryGotoOldest).
type becomeOldestDecision int

const (
	// startSingletonNow: no lease; start the singleton at once (Oldest).
	startSingletonNow becomeOldestDecision = iota
	// acquireLeaseFirst: with use-lease, acquire the lease first
	// (AcquiringLease); the singleton starts once it is held.
	acquireLeaseFirst
)

func decideBecomeOldest(useLease bool) becomeOldestDecision {
	if useLease {
		return acquireLeaseFirst
	}
	return startSingletonNow
}

// acquireResultDecision is what the manager does with the answer to one of
// its lease acquisitions.
type acquireResultDecision int

const (
	// ignoreAcquireResult: a later acquire or release of the same lease
	// has been asked for since, and decides what is held.
	ignoreAcquireResult acquireResultDecision = iota
	// startWithLease: acquired and still held; start the singleton.
	startWithLease
	// retryLeaseLater: not acquired (or lost before it could be used);
	// try again after the lease-retry-interval.
	retryLeaseLater
	// releaseUnwantedLease: acquired after the manager stopped wanting it
	// (it left AcquiringLease meanwhile); give it back.
	releaseUnwantedLease
)

// acquireOutcome is what decideAcquireResult looks at.
type acquireOutcome struct {
	current   bool // the answer to the latest acquisition asked for
	acquiring bool // the manager is in AcquiringLease, waiting for this answer
	acquired  bool // the lease said yes
	stillHeld bool // the lease's CheckLease at the time the answer is handled
	mayHold   bool // no release has been asked for since this acquisition
}

// decideAcquireResult: the singleton starts only on a yes to the latest
// request that is still held when handled (a loss may have come between the
// answer and its handling); a yes nobody waits for any more is given back,
// unless a release is queued after it already.
func decideAcquireResult(o acquireOutcome) acquireResultDecision {
	switch {
	case !o.current:
		return ignoreAcquireResult
	case o.acquiring && o.acquired && o.stillHeld:
		return startWithLease
	case o.acquiring:
		return retryLeaseLater
	case o.acquired && o.mayHold:
		return releaseUnwantedLease
	default:
		return ignoreAcquireResult
	}
}

// leaseLostDecision is what the manager does when its lease is lost.
type leaseLostDecision int

const (
	// ignoreLeaseLost: an earlier holding, or nothing runs under it.
	ignoreLeaseLost leaseLostDecision = iota
	// stopSingletonAndReacquire: Oldest with a running singleton: stop it at
	// once and go back to AcquiringLease; acquire again once it has
	// terminated (Akka: "Lease has been lost. Terminating singleton and
	// trying to re-acquire lease").
	stopSingletonAndReacquire
	// reacquireLease: Oldest whose singleton had already terminated:
	// nothing to stop, acquire again now.
	reacquireLease
	// stopSingletonNow: WasOldest or HandingOver: the singleton must not
	// run on without the lease until the hand-over stops it; the hand-over
	// goes on.
	stopSingletonNow
)

// decideLeaseLost: the singleton runs only while the lease is held, in
// every state (Akka reacts only in Oldest).
func decideLeaseLost(current bool, state string, singletonAlive bool) leaseLostDecision {
	if !current {
		return ignoreLeaseLost
	}
	switch state {
	case stateOldest:
		if singletonAlive {
			return stopSingletonAndReacquire
		}
		return reacquireLease
	case stateWasOldest, stateHandingOver:
		if singletonAlive {
			return stopSingletonNow
		}
	}
	// AcquiringLease: not started under it yet (the answer's handling sees
	// the loss), or the previous singleton is stopping already. Stopping:
	// stopped already. The others hold no lease.
	return ignoreLeaseLost
}

// leaseRetryDecision is what an AcquiringLease manager does when its retry
// timer fires.
type leaseRetryDecision int

const (
	ignoreLeaseRetry leaseRetryDecision = iota
	acquireLeaseNow
	// waitForSingletonToStop: the singleton of the lost holding is still
	// stopping; its termination triggers the next acquisition (Akka: no new
	// lease while the old instance may still run).
	waitForSingletonToStop
)

func decideLeaseRetry(current, requestInProgress, singletonAlive bool) leaseRetryDecision {
	switch {
	case !current || requestInProgress:
		return ignoreLeaseRetry
	case singletonAlive:
		return waitForSingletonToStop
	default:
		return acquireLeaseNow
	}
}

// restartDueDecision is what an Oldest manager does when its singleton's
// restart back-off has passed.
type restartDueDecision int

const (
	// startAgainNow: no lease, or the holding the previous singleton ran
	// under is still held: start it again under it (same fencing token).
	startAgainNow restartDueDecision = iota
	// acquireLeaseBeforeRestart: the holding has been lost meanwhile: go to
	// AcquiringLease; the singleton starts once the lease is held again,
	// with a new token.
	acquireLeaseBeforeRestart
)

func decideRestartDue(useLease, leaseHeld bool) restartDueDecision {
	if useLease && !leaseHeld {
		return acquireLeaseBeforeRestart
	}
	return startAgainNow
}

// handOverRetryDecision is what a BecomingOldest manager does when its
// HandOverRetry timer fires.
type handOverRetryDecision int

const (
	// askHandOverAgain: send HandOverToMe to the previous oldest again.
	askHandOverAgain handOverRetryDecision = iota
	// askHandOverAgainStuck: the same, and report the manager stuck (Akka
	// throws ClusterSingletonManagerIsStuck here; starting without a
	// hand-over could run two).
	askHandOverAgainStuck
	// takeOverWithoutHandOver: no previous oldest is left that may run the
	// singleton, and none asked to hand it over.
	takeOverWithoutHandOver
)

func decideHandOverRetry(count int, s settings, previousLive bool) handOverRetryDecision {
	switch {
	case !previousLive:
		return takeOverWithoutHandOver
	case stuckReported(count, maxHandOverRetries(s)):
		return askHandOverAgainStuck
	default:
		return askHandOverAgain
	}
}

// stuckReported: a manager past max retries reports itself stuck once
// every max retries, not at each one.
func stuckReported(count, max int) bool {
	return count > max && count%max == 1
}

// terminationBooking is how singletonRestarts is told of a terminated
// singleton.
type terminationBooking int

const (
	// bookStopped: asked to stop, or handed over; never restarted.
	bookStopped terminationBooking = iota
	// bookRestartable: stopped on its own while this member runs it for
	// good; restarted after the back-off (if restarts are enabled).
	bookRestartable
	// bookFencedStop: its stale fence stopped it; due again once this
	// node has confirmed its membership, unless the removal comes first.
	bookFencedStop
)

// decideTermination: a singleton that stopped on its own starts again only
// while this member is the oldest and stays so (not leaving, not removed,
// the manager not stopping); every other state asked it to stop, or hands
// it over.
func decideTermination(state string, selfExited, selfGone, managerStopping, fenceStopped bool) terminationBooking {
	if state != stateOldest || selfExited || selfGone || managerStopping {
		return bookStopped
	}
	if fenceStopped {
		return bookFencedStop
	}
	return bookRestartable
}

// leaseRetryCause is why an acquisition is tried again later.
type leaseRetryCause int

const (
	// leaseHeldElsewhere: the lease said no (held by another owner, or
	// not yet free).
	leaseHeldElsewhere leaseRetryCause = iota
	// leaseFailed: the lease answered with an error.
	leaseFailed
	// leaseLostBeforeStart: acquired, but lost again before the singleton
	// could start under it.
	leaseLostBeforeStart
)

func decideLeaseRetryCause(err error, acquired bool) leaseRetryCause {
	switch {
	case err != nil:
		return leaseFailed
	case acquired:
		return leaseLostBeforeStart
	default:
		return leaseHeldElsewhere
	}
}

// isSelfRemoval: the removed member is this manager's own incarnation. Before
// the first InitialOldestState this manager knows no incarnation of its
// own, so no removal is its own.
func isSelfRemoval(selfID, removedID string) bool {
	return selfID != "" && removedID == selfID
}
