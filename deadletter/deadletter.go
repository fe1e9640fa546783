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
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/protoshard/protoshard/internal/metrics"
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

// The reason classes: a fixed set, for metrics and the log's rate limit.
const (
	classNilMessage      = "nil_message"
	classTooLarge        = "too_large"
	classBufferFull      = "buffer_full"
	classShuttingDown    = "shutting_down"
	classMemberRemoved   = "member_removed"
	classNotSerializable = "not_serializable"
	// classIncompatibleExtractor: a region's registration refused.
	classIncompatibleExtractor = "incompatible_extractor"
	classEntityStopped         = "entity_stopped"
	classStopped               = "stopped"
	// classUndelivered: proto.actor could not deliver it (the target is
	// gone or its node unreachable); see ReportUndelivered.
	classUndelivered = "undelivered"
	// classOther: a message the receiving actor does not act on (a
	// protocol message out of place, an invalid ID, no sender to answer)
	// or could not handle; the log line has the detail.
	classOther = "other"
)

var classes = []struct {
	err   error
	class string
}{
	{ErrNilMessage, classNilMessage},
	{ErrMessageTooLarge, classTooLarge},
	{ErrBufferFull, classBufferFull},
	{ErrShuttingDown, classShuttingDown},
	{ErrMemberRemoved, classMemberRemoved},
	{ErrNotSerializable, classNotSerializable},
	{ErrIncompatibleExtractor, classIncompatibleExtractor},
	{ErrEntityStopped, classEntityStopped}, // before ErrStopped, which it wraps
	{ErrStopped, classStopped},
}

// classOf is err's reason class: the first typed reason err wraps.
func classOf(err error) string {
	if err == nil {
		return classOther
	}
	for _, c := range classes {
		if errors.Is(err, c.err) {
			return c.class
		}
	}
	return classOther
}

// String describes the drop in one line, for logs.
func (e *Event) String() string {
	return fmt.Sprintf("dropped %T to %v: %s", e.Message, e.Target, e.Reason)
}

// own holds the *actor.DeadLetterEvents that Publish is publishing right
// now. EventStream.Publish calls subscribers synchronously, so a
// ReportUndelivered subscriber can tell them from proto.actor's own.
var own sync.Map

// Publish reports a dropped message on system's EventStream and logs it.
func Publish(system *actor.ActorSystem, target *actor.PID, message any, sender *actor.PID, reason string) {
	publish(system, &Event{Target: target, Message: message, Sender: sender, Reason: reason}, classOther)
}

// PublishError is Publish with a typed reason: the Event's Err is err and
// its Reason err's text.
func PublishError(system *actor.ActorSystem, target *actor.PID, message any, sender *actor.PID, err error) {
	publish(system, &Event{Target: target, Message: message, Sender: sender, Reason: err.Error(), Err: err}, classOf(err))
}

func publish(system *actor.ActorSystem, e *Event, class string) {
	// The Event first: proto.actor answers the DeadLetterEvent of a
	// request with a DeadLetterResponse, and whoever waits for that (see
	// actorsharding.EntityRef) finds the reason already.
	publishEvent(system, e, class)
	dl := &actor.DeadLetterEvent{PID: e.Target, Message: e.Message, Sender: e.Sender}
	own.Store(dl, struct{}{})
	system.EventStream.Publish(dl)
	own.Delete(dl)
}

func publishEvent(system *actor.ActorSystem, e *Event, class string) {
	metrics.For(system).Dropped(class)
	logsOf(system).warn(e, class)
	system.EventStream.Publish(e)
}

// ReportUndelivered makes the messages that proto.actor itself could not
// deliver, and reported only with its reasonless *actor.DeadLetterEvent (a
// target actor that is gone, a node its remote cannot reach), reported as
// Events too, with the reason reason gives; reason returns "" for the dead
// letters it does not take. The returned subscription ends it.
func ReportUndelivered(system *actor.ActorSystem, reason func(*actor.DeadLetterEvent) string) *eventstream.Subscription {
	return system.EventStream.Subscribe(func(evt any) {
		dl, ok := evt.(*actor.DeadLetterEvent)
		if !ok {
			return
		}
		if _, mine := own.Load(dl); mine {
			return // Publish reports it with its own reason
		}
		if why := reason(dl); why != "" {
			publishEvent(system, &Event{Target: dl.PID, Message: dl.Message, Sender: dl.Sender, Reason: why}, classUndelivered)
		}
	})
}
