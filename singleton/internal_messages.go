package singleton

import "github.com/protoshard/protoshard/membership"

// Local messages between the manager, its OldestChangedBuffer and timers
// (Akka's ClusterSingletonManager.Internal). They never cross nodes.

// getNext asks the OldestChangedBuffer for the next change.
type getNext struct{}

// initialOldestState is the buffer's first answer after (re)subscribing:
// the oldest member with the role, and whether it is safe for it to start
// the singleton at once.
type initialOldestState struct {
	self           membership.Member
	oldest         *membership.Member
	safeToBeOldest bool
}

// oldestChanged: the oldest member with the role changed (nil: none).
type oldestChanged struct {
	oldest *membership.Member
}

// selfExiting tells the buffer that this member is leaving and no longer a
// candidate, before the membership event may have arrived.
type selfExiting struct{}

// leaving is the manager's leave-hook request; it is answered with
// leavingDone once this member no longer runs or hands over the singleton.
type leaving struct{}

type leavingDone struct{}

type handOverRetry struct {
	count int
	gen   int
}

type takeOverRetry struct {
	count int
	gen   int
}

type delayedMemberRemoved struct {
	member membership.Member
}

type handOverDoneRetry struct {
	count int
	gen   int
}

// drained fires when a leaving manager in End has had no proxied message
// for one hand-over interval.
type drained struct{ gen int }

// acquireLeaseResult is the answer to the manager's acquisition number gen.
type acquireLeaseResult struct {
	gen      int
	token    uint64
	acquired bool
	err      error
}

// leaseLost comes from the lease-lost callback of acquisition number gen.
type leaseLost struct {
	gen    int
	reason error
}

// restartSingleton is the singleton's restart back-off timer, number gen
// (singletonRestarts).
type restartSingleton struct{ gen int }

// leaseRetry is AcquiringLease's timer (Akka's LeaseRetry).
type leaseRetry struct{ gen int }

// releaseLeaseResult is the answer to a release; afterHandOver marks the
// release a hand-over waits for before it sends HandOverDone.
type releaseLeaseResult struct {
	released      bool
	err           error
	afterHandOver bool
}
