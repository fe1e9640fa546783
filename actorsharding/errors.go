package actorsharding

import "github.com/protoshard/protoshard/deadletter"

// The typed reasons of drops, for errors.Is on an EntityRef request's
// error and on a DeadLetter's Err; the same values as package
// deadletter's, so that an application needs only this package.
var (
	// ErrNilMessage: a nil message, which proto.actor's mailbox cannot take.
	ErrNilMessage = deadletter.ErrNilMessage
	// ErrMessageTooLarge: over WithMaxMessageSize, for another node.
	ErrMessageTooLarge = deadletter.ErrMessageTooLarge
	// ErrBufferFull: the region's buffer (WithBufferSize) is full.
	ErrBufferFull = deadletter.ErrBufferFull
	// ErrShuttingDown: the region, shard or whole cluster is stopping.
	ErrShuttingDown = deadletter.ErrShuttingDown
	// ErrMemberRemoved: this node was removed from the cluster, or may
	// have been (it could not confirm its membership in time).
	ErrMemberRemoved = deadletter.ErrMemberRemoved
	// ErrNotSerializable: the message cannot cross to another node.
	ErrNotSerializable = deadletter.ErrNotSerializable
	// ErrIncompatibleExtractor: the coordinator refused this node's region
	// because its extractor (number of shards, or extractor identity, see
	// IdentifiedExtractor) differs from the registered regions'.
	ErrIncompatibleExtractor = deadletter.ErrIncompatibleExtractor
	// ErrEntityStopped: the entity had stopped (by itself, or stopped
	// without Passivate) when the message reached it.
	ErrEntityStopped = deadletter.ErrEntityStopped
)

// DeadLetter is the event protoshard publishes on the actor system's
// EventStream for every message it drops, with the reason:
//
//	system.EventStream.Subscribe(func(e any) {
//		if d, ok := e.(*actorsharding.DeadLetter); ok { ... d.Reason, d.Err ... }
//	})
type DeadLetter = deadletter.Event
