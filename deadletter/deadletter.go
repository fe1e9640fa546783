// Package deadletter reports messages that protoshard could not deliver.
//
// proto.actor's own DeadLetterEvent has no reason, so every drop publishes
// two events on the actor system's EventStream: the standard
// *actor.DeadLetterEvent (for existing dead-letter subscribers) and a
// *deadletter.Event that says why. Nothing is ever dropped silently.
//
// Every drop falls in one of a few reason classes, by its typed error
// (ErrBufferFull, ErrShuttingDown, ...; "other" without one): the class is
// the reason attribute of the protoshard_dropped_messages metric, and the
// Warn log is rate-limited per class: the first drop of a class is logged,
// the others of the next 10s only counted, and their count logged at the
// end of that interval.
package deadletter

import (
	"errors"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
)

// Event is a message that was dropped, with the reason.
type Event struct {
	// Target is where the message was going, if known.
	Target *actor.PID
	// Message is the dropped message.
	Message any
	// Sender is the message's sender, if any.
	Sender *actor.PID
	// Reason says why the message was dropped.
	Reason string
	// Err is the typed reason, for errors.Is (ErrNilMessage,
	// ErrMessageTooLarge), when the drop has one; Reason is its text.
	Err error
}

// ErrNilMessage: a nil user message, which proto.actor's mailbox counts but
// cannot dequeue, so the actor's mailbox would spin a core for ever.
var ErrNilMessage = errors.New("nil message: proto.actor cannot deliver it")

// ErrMessageTooLarge: a message whose encoding exceeds what the receiving
// node's gRPC server accepts; sent, it would close the stream between the
// nodes and the messages after it on that stream would vanish.
var ErrMessageTooLarge = errors.New("message too large for a remote node")

// ErrBufferFull: a bounded buffer (a region's, a shard's, a singleton
// proxy's or manager's) was full.
var ErrBufferFull = errors.New("buffer full")

// ErrShuttingDown: the actor that held the message is stopping, or the
// cluster is shutting down, with the message still undelivered.
var ErrShuttingDown = errors.New("shutting down")

// ErrMemberRemoved: this node, or the one the message was going to, was
// removed from the cluster (or has not confirmed its membership in time).
var ErrMemberRemoved = errors.New("member removed from the cluster")

// ErrNotSerializable: the message cannot cross to another node (not a
// protobuf message, or its encoding failed).
var ErrNotSerializable = errors.New("message cannot be serialized")

// ErrIncompatibleExtractor: the coordinator refused a region's (or
// proxy's) registration because its message extractor differs from that of
// the registered regions (another number of shards, or another extractor):
// the region would put entities in other shards than they do, and so run
// them twice. The region hosts nothing and registers again until the
// regions it disagrees with are gone.
var ErrIncompatibleExtractor = errors.New("message extractor differs from the registered regions'")

// ErrStopped: the message reached the mailbox of an actor of protoshard
// (a shard, a region, a coordinator) after the actor had stopped, where
// proto.actor discards it without a trace: Akka sends a stopped actor's
// mailbox to dead letters, and so does protoshard.
var ErrStopped = errors.New("actor stopped")

// ErrEntityStopped: the message reached an entity after it had stopped
// (it stopped itself, or was stopped, without Passivate). It is an
// ErrStopped.
var ErrEntityStopped = fmt.Errorf("entity stopped: %w", ErrStopped)

// String describes the drop in one line, for logs.
func (e *Event) String() string {
	return fmt.Sprintf("dropped %T to %v: %s", e.Message, e.Target, e.Reason)
}
