// Package behavior switches an actor between named states, each with a
// Receive of its own (actor.Behavior), and logs each change of state: the
// one implementation the actors of protoshard share.
package behavior

import "github.com/asynkron/protoactor-go/actor"

// States is an actor's current state: its name and its Receive. The zero
// value has no state yet (Name is ""); Receive then logs an error, as
// actor.Behavior does.
type States struct {
	name     string
	behavior actor.Behavior
}

// Name is the current state's name, "" before the first Become. Logs and
// drop reasons quote it.
func (s *States) Name() string { return s.name }

// Receive passes the message of ctx to the current state's Receive.
func (s *States) Receive(ctx actor.Context) { s.behavior.Receive(ctx) }

// Become makes receive, named name, the current state. A change of state
// is logged at DEBUG as "<label> state change" with from, to and attrs
// (slog key-value pairs or slog.Attr); the first state and a Become to the
// current state are not changes, so they are not logged.
func (s *States) Become(ctx actor.Context, label, name string, receive actor.ReceiveFunc, attrs ...any) {
	if s.name != "" && s.name != name {
		ctx.Logger().Debug(label+" state change", append([]any{"from", s.name, "to", name}, attrs...)...)
	}
	s.name = name
	s.behavior.Become(receive)
}
