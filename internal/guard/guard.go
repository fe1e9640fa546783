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
	"github.com/protoshard/protoshard/internal/deadletters"
	"github.com/protoshard/protoshard/messages"
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
	// invoker is the actor's context, which the inner mailbox invokes
	// through the mailbox itself (see InvokeUserMessage).
	invoker actor.MessageInvoker
	// stopped: the actor's stop is final; what is left or arrives is
	// reported (see noteStop).
	stopped atomic.Bool
}

// errBeforeSpawn: proto.actor makes a PID reachable before it gives the
// mailbox its dispatcher, and a PID has no incarnation, so a message sent
// to an earlier actor of the same name (a timer of a stopped shard, say)
// can land in that window.
var errBeforeSpawn = errors.New("sent to an earlier actor of this name, it reached the next one before it started")

// errStopped: proto.actor discards, without a trace, the user messages an
// actor has in its mailbox when its stop is final (a Stop system message
// overtakes them), and those that arrive later through a PID that still
// holds its process: a shard stopped by its region while the region's
// messages for its entities wait in its mailbox, say.
var errStopped = fmt.Errorf("reached the actor's mailbox after it had stopped: %w", deadletter.ErrStopped)

type owner struct {
	system *actor.ActorSystem
	self   func() *actor.PID
	// process is the actor's process in the registry when it started.
	process actor.Process
}

// RegisterHandlers implements actor.Mailbox: the inner mailbox invokes the
// actor through this mailbox, which notices when the actor's stop is final.
func (m *mailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker = invoker
	m.Mailbox.RegisterHandlers(m, dispatcher)
	o := &owner{}
	if ctx, ok := invoker.(actor.Context); ok {
		o.system, o.self = ctx.ActorSystem(), ctx.Self
		// proto.actor registers the process before it registers the
		// handlers, so this is the actor's own.
		o.process, _ = o.system.ProcessRegistry.GetLocal(ctx.Self().Id)
	}
	m.owner.Store(o) // after the inner mailbox has its dispatcher
}

// InvokeUserMessage implements actor.MessageInvoker: the actor's message,
// or a dead-letter event once its stop is final.
func (m *mailbox) InvokeUserMessage(msg any) {
	if m.stopped.Load() {
		m.refuse(msg, errStopped)
		return
	}
	m.invoker.InvokeUserMessage(msg)
}

// InvokeSystemMessage implements actor.MessageInvoker. proto.actor
// finalizes a stop as it handles Stop, or its last child's Terminated.
func (m *mailbox) InvokeSystemMessage(msg any) {
	m.invoker.InvokeSystemMessage(msg)
	switch msg.(type) {
	case *actor.Stop, *actor.Terminated:
		m.noteStop()
	}
}

// EscalateFailure implements actor.MessageInvoker.
func (m *mailbox) EscalateFailure(reason, msg any) { m.invoker.EscalateFailure(reason, msg) }

// noteStop marks the stop final once proto.actor has removed the actor
// from the process registry: its name is free, or taken by another
// actor's process. A process put in front of the actor's own under its
// name (a region's router) is not another actor: it leaves the registry
// with the actor.
func (m *mailbox) noteStop() {
	o := m.owner.Load()
	if o == nil || o.system == nil || m.stopped.Load() {
		return
	}
	p, ok := o.system.ProcessRegistry.GetLocal(o.self().Id)
	if _, another := p.(*actor.ActorProcess); !ok || (another && p != o.process) {
		m.stopped.Store(true)
	}
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

// Notice is implemented by a protocol message whose loss at a stopped
// receiver loses nothing: it informs the receiver, or asks of it what the
// sender gets otherwise too (a hand-off worker's time-out, the
// receiver's Terminated). Its sender cannot know that the receiver
// stopped before it sent (a region stopping with its last shard when the
// whole cluster shuts down, a worker that has just finished), so such a
// message reaching a stopped actor is logged at debug level, not
// reported as a drop.
type Notice interface {
	// Notice marks the message as a notice.
	Notice()
}

// isNotice: a Notice, or proto.actor's answer that a request went to dead
// letters (its loss was reported where it happened).
func isNotice(msg any) bool {
	switch msg.(type) {
	case Notice, *actor.DeadLetterResponse,
		// The hand-off protocol's messages: the rebalance worker that
		// sends or awaits them ends on its time-out or on the region's
		// Terminated when one is lost.
		*messages.BeginHandOff, *messages.BeginHandOffAck, *messages.HandOff, *messages.ShardStopped:
		return true
	}
	return false
}

func (m *mailbox) refuse(msg any, err error) {
	payload, sender := msg, (*actor.PID)(nil)
	if env, ok := msg.(*actor.MessageEnvelope); ok && env != nil {
		payload, sender = env.Message, env.Sender
	}
	o := m.owner.Load()
	if isNotice(payload) && errors.Is(err, errStopped) && o != nil && o.system != nil {
		o.system.Logger().Debug("notice reached a stopped actor", slog.String("to", o.self().GetId()), slog.String("type", fmt.Sprintf("%T", payload)))
		return
	}
	if o == nil || o.system == nil {
		// Only a message that races the actor's spawn lands here.
		slog.Default().Warn("message dropped", slog.String("reason", err.Error()), slog.String("type", fmt.Sprintf("%T", payload)))
		return
	}
	self := o.self()
	deadletters.PublishError(o.system, self, payload, sender, fmt.Errorf("%s: %w", self.GetId(), err))
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
					deadletters.PublishError(c.ActorSystem(), target, env.Message, env.Sender, fmt.Errorf("to %s: %w", target, err))
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
