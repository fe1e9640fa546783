// Package entityrefs gives this module's packages what an
// actorsharding.EntityRef knows and its API does not show. Package
// actorsharding sets it as it is initialized; it cannot be imported from
// here, which would be a cycle.
package entityrefs

import (
	"errors"

	"github.com/asynkron/protoactor-go/actor"
)

// RunsHere reports whether ref, an *actorsharding.EntityRef (a pointer:
// a struct in an interface would be copied to the heap), has its
// entity running on this node: a reliable-delivery producer then sends
// the message itself (SendDirect) or its full form, never the short form,
// which only saves encoding on the way to another node. False for
// anything else.
var RunsHere = func(ref any) bool { return false }

// SendFrom sends msg through ref, an *actorsharding.EntityRef, as its
// Send does, with sender as the message's sender: the way every message
// of a reliable-delivery producer goes, in short form or not, so that
// they keep their order.
var SendFrom = func(ref any, msg any, sender *actor.PID) error {
	return errors.New("entityrefs: package actorsharding is not linked")
}

// SendDirect puts msg straight in the mailbox of ref's entity, an
// *actorsharding.EntityRef's, as the ref's Send does on its direct path:
// the entity runs on this node, its route is open, and none of its
// shard's messages is still on the region's slow way, so msg cannot
// overtake one. False: none of that holds, and nothing was sent. msg
// need not be a protobuf message: it never leaves the node.
var SendDirect = func(ref any, msg any) bool { return false }

// Batch sends one reliable-delivery producer's messages as SendFrom does,
// in the order of its calls, but may hold those that go to another node
// until Flush and send them there together. It is not safe for
// concurrent use: one producer, on its own goroutine, has one.
type Batch interface {
	// Send sends msg through ref as SendFrom does, or holds it until
	// Flush. A held message keeps its shard's route to that node open:
	// call Flush before anything that may wait, and at the end of each
	// turn of the producer.
	Send(ref any, msg any, sender *actor.PID) error
	// Flush sends what Send holds.
	Flush()
}

// NewBatch returns a Batch; package actorsharding sets it. The default
// holds nothing.
var NewBatch = func() Batch { return unbatched{} }

type unbatched struct{}

func (unbatched) Send(ref any, msg any, sender *actor.PID) error { return SendFrom(ref, msg, sender) }
func (unbatched) Flush()                                         {}
