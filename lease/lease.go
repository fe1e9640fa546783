// Package lease is Akka's akka.coordination.lease for protoshard: a named
// lease that at most one owner holds at a time, so that something that must
// never run twice (a cluster singleton) runs only while its node holds the
// lease. Membership alone cannot promise that: a node cut off from the
// others, or paused, keeps running until it notices its own removal.
//
// On top of Akka's Lease (acquire with a lease-lost callback, release,
// checkLease) every successful acquisition hands out a fencing token: a
// number that grows with every new holder. A resource that remembers the
// highest token it has seen can refuse a write carrying a lower one, which
// fences off a holder that has lost the lease but has not stopped yet.
//
// Implementations: MemoryLeases, shared by the nodes of one process (tests
// and in-process membership); package lease/consul, on a Consul session
// and a KV lock; package lease/caslease, on a compare-and-set record
// (lease/consulcas keeps it in Consul KV), which fails over in seconds. Package lease/leasetest holds the contract tests every
// implementation passes.
package lease

import (
	"context"
	"errors"
)

// ErrLost is what every lease-lost reason wraps: the holder can no longer be
// sure that it holds the lease (its heartbeats failed for too long, or the
// lease was taken from it).
var ErrLost = errors.New("lease lost")

// LostFunc is the lease-lost callback given to Acquire. It runs at most once
// per acquisition, from a goroutine of the lease, as soon as the holder knows
// it may have lost the lease (reason wraps ErrLost). It must not block: the
// time between the loss and another holder's acquisition is what the holder
// has to stop what the lease protects.
type LostFunc func(reason error)

// Lease is Akka's Lease: one owner's handle on a named lease. Each Lease
// value is its own holder: two values never share a holding, even with the
// same owner name (a restarted process must not inherit its predecessor's
// lease). A Lease is safe for concurrent use.
type Lease interface {
	// Acquire tries to take the lease. acquired is false when another holder
	// has it; err is set when the outcome is unknown (the lease store could
	// not be reached in time), in which case the lease is not held. On
	// success token is the fencing token of this holding: larger than the
	// token of every earlier holding of the same lease. leaseLost (may be
	// nil) is called once if the holding is lost later; a Release does not
	// call it. Acquiring a lease this value already holds returns the same
	// token and replaces the callback.
	Acquire(ctx context.Context, leaseLost LostFunc) (token uint64, acquired bool, err error)
	// Release gives the lease up, so that another owner may acquire it at
	// once. released is false when this value did not hold it (never
	// acquired, released already, or lost). A holder that lost the lease
	// should still call Release once it has stopped what the lease
	// protected: an implementation may keep the lease from others until then
	// (MemoryLeases does) or until its own time-out (lease/consul).
	Release(ctx context.Context) (released bool, err error)
	// CheckLease reports whether this value holds the lease as far as it
	// knows now, without asking the lease store (Akka's checkLease).
	CheckLease() bool
}

// Observer is implemented by a Lease that takes over a silent holder's lease
// only after its own reads have shown it unchanged for a while
// (lease/caslease). Observe keeps reading the lease until ctx ends, so that
// the count has begun when Acquire is called: the cluster singleton's
// manager observes its lease from its start, and a member that becomes the
// oldest after a crash takes the lease over about when failure detection
// lets it, instead of a lease duration later.
type Observer interface {
	// Observe reads the lease periodically until ctx ends; it does nothing
	// while this value holds the lease.
	Observe(ctx context.Context)
}

// Provider creates the leases of one implementation, configured once (Akka's
// LeaseProvider with one lease implementation). The cluster singleton takes
// one in its settings and asks it for a lease named after the singleton,
// owned by its member.
type Provider interface {
	// NewLease returns a new holder of the lease leaseName for ownerName.
	// ownerName identifies the holder in the lease store and in logs.
	NewLease(leaseName, ownerName string) (Lease, error)
}
