package singleton

import (
	"fmt"

	"github.com/protoshard/protoshard/deadletter"
)

// envelopeRoute is where a proxied message (a SingletonEnvelope) goes, as
// routeEnvelope decides from the manager's state.
type envelopeRoute int

const (
	// deliverToSingleton: the singleton runs here.
	deliverToSingleton envelopeRoute = iota
	// holdEnvelope: a singleton is about to run here (hand-over, lease,
	// restart back-off); held until it does.
	holdEnvelope
	// dropNotRestarted: the singleton terminated here and does not start
	// again.
	dropNotRestarted
	// passToPreviousOldest: this member is younger; the most recent
	// previous oldest may run it.
	passToPreviousOldest
	// passToHandedOver: the singleton was handed over from here.
	passToHandedOver
	// dropMemberRemoved: this member was removed from the cluster.
	dropMemberRemoved
)

// routeEnvelope: in WasOldest the singleton has not been told to stop yet
// (the termination message comes after this one, from the manager), so it
// still takes messages; a singleton waiting out its restart back-off in
// Oldest has them held.
func routeEnvelope(state string, singletonRunning, restartPending bool) envelopeRoute {
	switch state {
	case stateOldest, stateWasOldest:
		switch {
		case singletonRunning:
			return deliverToSingleton
		case state == stateOldest && restartPending:
			return holdEnvelope
		default:
			return dropNotRestarted
		}
	case stateStart, stateBecomingOldest, stateAcquiringLease, stateHandingOver:
		return holdEnvelope
	case stateYounger:
		return passToPreviousOldest
	case stateEnd:
		return passToHandedOver
	default:
		return dropMemberRemoved
	}
}

// passOnDecision is whether a proxied message is passed on to another
// manager.
type passOnDecision int

const (
	passOn passOnDecision = iota
	// dropNoManager: no other manager to pass it to.
	dropNoManager
	// dropTooManyHops: passed between managers maxEnvelopeHops times
	// already without reaching the singleton.
	dropTooManyHops
)

// maxEnvelopeHops bounds manager-to-manager forwards of a proxied message.
const maxEnvelopeHops = 3

// decidePassOn: knownOther is false when there is no manager to pass to,
// or it is this one.
func decidePassOn(knownOther bool, hops int32) passOnDecision {
	switch {
	case !knownOther:
		return dropNoManager
	case hops >= maxEnvelopeHops:
		return dropTooManyHops
	default:
		return passOn
	}
}

// errHeldEnvelopesFull is the reason of a held message that made way.
func errHeldEnvelopesFull(size int) error {
	return fmt.Errorf("buffer is full (%d), dropping the oldest message: %w", size, deadletter.ErrBufferFull)
}
