// Package guard keeps two kinds of message from wedging a node, and turns
// them into dead-letter events with a typed reason instead:
//
//   - a nil user message: proto.actor's default mailbox counts it, then
//     cannot dequeue it (its queue's Pop answers nil for "empty"), so the
//     mailbox loop reschedules itself for ever and spins a core, and every
//     message after the nil waits behind it;
//   - a message larger than the receiving node's gRPC server accepts: the
//     server closes the stream, the message is lost, and so are the
//     messages already on their way on that stream, without any event.
//
// Every actor protoshard spawns gets WithMailbox. Sizes are checked where
// messages leave for another node: the coordinator gets WithSizeLimit (a
// sender middleware: cheap for its traffic, but an envelope allocation per
// send on a hot path), regions and singleton proxies check with CheckSize
// what they wrap for another node, and answers built in goroutines go
// through Root.
package guard

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/protoshard/protoshard/deadletter"
)

// FrameLimit is the largest frame a node's gRPC server accepts: grpc-go's
// default receive limit (4 MiB), which proto.actor's remote keeps (its
// Config has no message size; only ServerOptions could change it).
const FrameLimit = 4 << 20

// EnvelopeOverhead is what proto.actor's remote adds around one message in
// a frame (the batch's type name, target and sender PIDs, the message
// header), with room to spare.
const EnvelopeOverhead = 64 << 10

// DefaultMaxMessageSize is the largest encoded message that is sent to
// another node by default: one message alone in a frame fits.
const DefaultMaxMessageSize = FrameLimit - EnvelopeOverhead

// Check returns an error wrapping deadletter.ErrNilMessage if msg is nil,
// a nil envelope, or an envelope or batch that holds nil; else nil. A nil
// pointer of a message type is not refused: it cannot wedge a mailbox, and
// the actors report it with what it was.
func Check(msg any) error {
	switch m := msg.(type) {
	case nil:
		return deadletter.ErrNilMessage
	case *actor.MessageEnvelope:
		if m == nil {
			// proto.actor's mailbox reads the envelope's message: a panic
			// in the sender.
			return fmt.Errorf("nil envelope: %w", deadletter.ErrNilMessage)
		}
		if err := Check(m.Message); err != nil {
			return fmt.Errorf("envelope: %w", err)
		}
	case actor.MessageBatch:
		if reflect.ValueOf(m).Kind() == reflect.Pointer && reflect.ValueOf(m).IsNil() {
			return fmt.Errorf("nil batch: %w", deadletter.ErrNilMessage)
		}
		for i, inner := range m.GetMessages() {
			if err := Check(inner); err != nil {
				return fmt.Errorf("message %d of a batch: %w", i, err)
			}
		}
	}
	return nil
}

// CheckSize returns an error wrapping deadletter.ErrMessageTooLarge if msg
// is a protobuf message whose encoding is longer than limit bytes; nil for
// other messages (they cannot cross nodes at all) and for limit <= 0 (no
// limit).
func CheckSize(msg any, limit int) error {
	pm, ok := msg.(proto.Message)
	if !ok || limit <= 0 {
		return nil
	}
	if n := proto.Size(pm); n > limit {
		return fmt.Errorf("%T encodes to %d bytes, more than the %d a remote node accepts: %w", msg, n, limit, deadletter.ErrMessageTooLarge)
	}
	return nil
}

// IsRemote reports whether pid is an actor of another node than system's.
func IsRemote(system *actor.ActorSystem, pid *actor.PID) bool {
	a := pid.GetAddress()
	return a != "" && a != "nonhost" && a != system.Address()
}

// WithMailbox gives an actor proto.actor's default (unbounded) mailbox,
// which refuses what Check refuses: the message becomes a dead-letter event
// (a requester's future fails at once) and the actor goes on.
func WithMailbox() actor.PropsOption {
	return actor.WithMailbox(func() actor.Mailbox { return &mailbox{Mailbox: unbounded()} })
}

var unbounded = actor.Unbounded()

type mailbox struct {
	actor.Mailbox
	// owner is the actor's context, known once proto.actor registers it
	// (after the PID is already reachable, hence atomic). Until then the
	// mailbox has no dispatcher: proto.actor's would dereference nil on the
	// first message posted.
	owner atomic.Pointer[owner]
}

// errBeforeSpawn: proto.actor makes a PID reachable before it gives the
// mailbox its dispatcher, and a PID has no incarnation, so a message sent
// to an earlier actor of the same name (a timer of a stopped shard, say)
// can land in that window.
var errBeforeSpawn = errors.New("sent to an earlier actor of this name, it reached the next one before it started")

type owner struct {
	system *actor.ActorSystem
	self   func() *actor.PID
}

func (m *mailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.Mailbox.RegisterHandlers(invoker, dispatcher)
	o := &owner{}
	if ctx, ok := invoker.(actor.Context); ok {
		o.system, o.self = ctx.ActorSystem(), ctx.Self
	}
	m.owner.Store(o) // after the inner mailbox has its dispatcher
}

func (m *mailbox) PostUserMessage(msg any) {
	if err := Check(msg); err != nil {
		m.refuse(msg, err)
		return
	}
	if m.owner.Load() == nil {
		m.refuse(msg, errBeforeSpawn)
		return
	}
	m.Mailbox.PostUserMessage(msg)
}

func (m *mailbox) PostSystemMessage(msg any) {
	if m.owner.Load() == nil {
		m.refuse(msg, errBeforeSpawn)
		return
	}
	m.Mailbox.PostSystemMessage(msg)
}

func (m *mailbox) refuse(msg any, err error) {
	payload, sender := msg, (*actor.PID)(nil)
	if env, ok := msg.(*actor.MessageEnvelope); ok && env != nil {
		payload, sender = env.Message, env.Sender
	}
	o := m.owner.Load()
	if o == nil || o.system == nil {
		// Only a message that races the actor's spawn lands here.
		slog.Default().Warn("message dropped", slog.String("reason", err.Error()), slog.String("type", fmt.Sprintf("%T", payload)))
		return
	}
	self := o.self()
	deadletter.PublishError(o.system, self, payload, sender, fmt.Errorf("%s: %w", self.GetId(), err))
}

// WithSizeLimit makes every message the actor sends to another node pass
// CheckSize with limit (less the message header) first; a message that
// does not becomes a dead-letter event instead of closing the stream to
// that node.
func WithSizeLimit(limit int) actor.PropsOption {
	return func(props *actor.Props) {
		actor.WithOnInit(createContextExtras)(props)
		actor.WithSenderMiddleware(sizeLimit(limit))(props)
	}
}

// createContextExtras makes proto.actor create the actor context's extras
// at spawn. A sender middleware runs on them, and proto.actor creates them
// on first use, without a lock: a scheduler.TimerScheduler sends through the
// actor's context from its timer goroutine, which would race with the
// actor's own first send. Get is the context method that creates them and
// does nothing else.
func createContextExtras(ctx actor.Context) { ctx.Get(0) }

// Root returns a root context of system whose sends to other nodes are
// limited as WithSizeLimit's: for answers built off an actor, in a
// goroutine.
func Root(system *actor.ActorSystem, limit int) *actor.RootContext {
	return system.Root.Copy().WithSenderMiddleware(sizeLimit(limit))
}

func sizeLimit(limit int) actor.SenderMiddleware {
	return func(next actor.SenderFunc) actor.SenderFunc {
		return func(c actor.SenderContext, target *actor.PID, env *actor.MessageEnvelope) {
			if IsRemote(c.ActorSystem(), target) {
				if err := CheckSize(env.Message, limit-headerSize(env.Header)); err != nil {
					// The event answers a requester (the sender); an answer's
					// asker is the target, and its future fails at once too.
					deadletter.PublishError(c.ActorSystem(), target, env.Message, env.Sender, fmt.Errorf("to %s: %w", target, err))
					if env.Sender == nil && isFuture(target) {
						next(c, target, &actor.MessageEnvelope{Message: &actor.DeadLetterResponse{Target: target}})
					}
					return
				}
			}
			next(c, target, env)
		}
	}
}

// isFuture reports whether pid is a proto.actor future (see
// actor.NewFuture, which names them "future$...").
func isFuture(pid *actor.PID) bool { return strings.HasPrefix(pid.GetId(), "future$") }

func headerSize(h actor.ReadonlyMessageHeader) int {
	if h == nil {
		return 0
	}
	n := 0
	for _, k := range h.Keys() {
		n += len(k) + len(h.Get(k))
	}
	return n
}
