// Package deadletter reports messages that protoshard could not deliver.
//
// proto.actor's own DeadLetterEvent has no reason, so every drop publishes
// two events on the actor system's EventStream: the standard
// *actor.DeadLetterEvent (for existing dead-letter subscribers) and a
// *deadletter.Event that says why. It is also logged at Warn level. Nothing is
// ever dropped silently.
package deadletter

import (
	"fmt"
	"log/slog"

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
}

// String describes the drop in one line, for logs.
func (e *Event) String() string {
	return fmt.Sprintf("dropped %T to %v: %s", e.Message, e.Target, e.Reason)
}

// Publish reports a dropped message on system's EventStream and logs it.
func Publish(system *actor.ActorSystem, target *actor.PID, message any, sender *actor.PID, reason string) {
	system.Logger().Warn("message dropped",
		slog.String("reason", reason),
		slog.String("type", fmt.Sprintf("%T", message)),
		slog.Any("target", target),
		slog.Any("sender", sender))
	system.EventStream.Publish(&actor.DeadLetterEvent{PID: target, Message: message, Sender: sender})
	system.EventStream.Publish(&Event{Target: target, Message: message, Sender: sender, Reason: reason})
}
