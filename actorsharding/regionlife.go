package actorsharding

import (
	"fmt"

	"github.com/protoshard/protoshard/deadletter"
)

// regionLife is a region's own standing in the cluster: removed from it
// (fenced until it joins again as a new member), shutting down gracefully,
// and stopping its shards itself when no member is left to take them. It
// does no I/O: the region asks it and carries out what it answers.
type regionLife struct {
	// removed: this member was removed from the cluster (failure
	// detection or its own fencing) and has not joined again as
	// removedID's successor. The others may host its shards already, so
	// it hosts and forwards nothing: messages fail fast with a dead-letter
	// event.
	removed   bool
	removedID string

	gracefulShutdown bool
	// stoppingLocally: shutting down with no other member of the role up
	// to take the shards (the whole cluster is shutting down), so the
	// region stops its shards itself (see nobodyToTakeOver).
	stoppingLocally bool
}

var errStale = fmt.Errorf("this node has not confirmed its membership within the failure detection timeout "+
	"(it was paused or cut off): the others may have removed it: %w", deadletter.ErrMemberRemoved)

var errRemoved = fmt.Errorf("this node was removed from the cluster (failure detection or its own fencing) and has not joined again: %w", deadletter.ErrMemberRemoved)

var errClusterShuttingDown = fmt.Errorf("the cluster is shutting down: no member of the role is left up to host the shard: %w", deadletter.ErrShuttingDown)

// remove: member incarnation memberID, this region's, was removed. It
// reports whether that is news (the region stops hosting and drops what
// it holds then): a repeated removal of the same incarnation is not.
func (l *regionLife) remove(memberID string) bool {
	if l.removed && l.removedID == memberID {
		return false
	}
	l.removed, l.removedID = true, memberID
	return true
}

// joined: this node is member incarnation selfID (empty: not joined). It
// reports whether that ends a removal: the node joined again as a new
// member, and the region registers and hosts again.
func (l *regionLife) joined(selfID string) bool {
	if !l.removed || selfID == "" || selfID == l.removedID {
		return false
	}
	l.removed = false
	return true
}

// shutDown starts the graceful shutdown; it reports whether it had not
// started before.
func (l *regionLife) shutDown() bool {
	first := !l.gracefulShutdown
	l.gracefulShutdown = true
	return first
}

// stopLocally reports whether the region starts stopping its shards
// itself now: it shuts down, has not started that yet, hosts shards
// (proxy: it does not), and nobody is left to take them over (see
// nobodyToTakeOver, which nobody calls only when the rest holds).
func (l *regionLife) stopLocally(proxy bool, nobody func() bool) bool {
	if !l.gracefulShutdown || l.stoppingLocally || proxy || !nobody() {
		return false
	}
	l.stoppingLocally = true
	return true
}

// shutdownComplete reports whether a region that shuts down may stop:
// no child alive, nothing buffered, no hand-off report owed.
func (l *regionLife) shutdownComplete(liveChildren, buffered, owed int) bool {
	return l.gracefulShutdown && liveChildren == 0 && buffered == 0 && owed == 0
}

// refusal is why the region drops a message it would keep for a shard
// (buffer it, or take back what a handed-off shard held), or nil: the
// whole cluster shuts down, or this member was removed (checked only when
// removedToo: a removed region buffers nothing anyway, as its deliveries
// fail first).
func (l *regionLife) refusal(removedToo bool) error {
	switch {
	case l.stoppingLocally:
		return errClusterShuttingDown
	case removedToo && l.removed:
		return errRemoved
	}
	return nil
}
