// Package deadletters publishes the messages protoshard drops as
// *deadletter.Event (with the reason) and *actor.DeadLetterEvent on the
// actor system's EventStream, counts them in the
// protoshard_dropped_messages metric by reason class, and logs them,
// rate-limited per class (see package deadletter).
package deadletters

import (
	"errors"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"

	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/metrics"
	"github.com/protoshard/protoshard/messages"
)

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
	{deadletter.ErrNilMessage, classNilMessage},
	{deadletter.ErrMessageTooLarge, classTooLarge},
	{deadletter.ErrBufferFull, classBufferFull},
	{deadletter.ErrShuttingDown, classShuttingDown},
	{deadletter.ErrMemberRemoved, classMemberRemoved},
	{deadletter.ErrNotSerializable, classNotSerializable},
	{deadletter.ErrIncompatibleExtractor, classIncompatibleExtractor},
	{deadletter.ErrEntityStopped, classEntityStopped}, // before deadletter.ErrStopped, which it wraps
	{deadletter.ErrStopped, classStopped},
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

// own holds the *actor.DeadLetterEvents that Publish is publishing right
// now. EventStream.Publish calls subscribers synchronously, so a
// ReportUndelivered subscriber can tell them from proto.actor's own.
var own sync.Map

// Publish reports a dropped message on system's EventStream and logs it.
func Publish(system *actor.ActorSystem, target *actor.PID, message any, sender *actor.PID, reason string) {
	publish(system, &deadletter.Event{Target: target, Message: message, Sender: sender, Reason: reason}, classOther)
}

// PublishError is Publish with a typed reason: the Event's Err is err and
// its Reason err's text.
func PublishError(system *actor.ActorSystem, target *actor.PID, message any, sender *actor.PID, err error) {
	publish(system, &deadletter.Event{Target: target, Message: message, Sender: sender, Reason: err.Error(), Err: err}, classOf(err))
}

func publish(system *actor.ActorSystem, e *deadletter.Event, class string) {
	// The Event first: proto.actor answers the DeadLetterEvent of a
	// request with a DeadLetterResponse, and whoever waits for that (see
	// actorsharding.EntityRef) finds the reason already.
	publishEvent(system, e, class)
	dl := &actor.DeadLetterEvent{PID: e.Target, Message: e.Message, Sender: e.Sender}
	own.Store(dl, struct{}{})
	system.EventStream.Publish(dl)
	own.Delete(dl)
}

func publishEvent(system *actor.ActorSystem, e *deadletter.Event, class string) {
	metrics.For(system).Dropped(class)
	logsOf(system).warn(e, class)
	system.EventStream.Publish(e)
}

// ReportUndelivered makes the messages that proto.actor itself could not
// deliver, and reported only with its reasonless *actor.DeadLetterEvent (a
// target actor that is gone, a node its remote cannot reach), reported as
// Events too, with the reason reason gives; reason returns "" for the dead
// letters it does not take. A SequencedMessages gives one Event per
// message it holds. The returned subscription ends it.
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
			if batch, ok := dl.Message.(*messages.SequencedMessages); ok && batch != nil {
				// A reliable-delivery producer's batch: each of its
				// messages was dropped, and is counted so.
				for _, m := range batch.GetMessages() {
					publishEvent(system, &deadletter.Event{Target: dl.PID, Message: m, Sender: dl.Sender, Reason: why}, classUndelivered)
				}
				return
			}
			publishEvent(system, &deadletter.Event{Target: dl.PID, Message: dl.Message, Sender: dl.Sender, Reason: why}, classUndelivered)
		}
	})
}
