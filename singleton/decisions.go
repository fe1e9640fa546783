package singleton

import (
	"time"

	"github.com/protoshard/protoshard/membership"
)

// The manager's decisions as pure functions, so they are table-tested
// without actors (the actor only moves messages and calls these).

// maxHandOverRetries is Akka's max(min, removalMargin/interval + 3).
func maxHandOverRetries(s Settings) int {
	n := int(s.RemovalMargin/s.HandOverRetryInterval) + 3
	if n < s.MinNumberOfHandOverRetries {
		return s.MinNumberOfHandOverRetries
	}
	return n
}

// maxTakeOverRetries is Akka's max(1, maxHandOverRetries - 3).
func maxTakeOverRetries(s Settings) int {
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
func decideTakeOverRetry(count int, s Settings, selfExited, haveNewOldest bool) takeOverRetryDecision {
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
func removalDelay(s Settings, graceful bool) time.Duration {
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
