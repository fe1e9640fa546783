package delivery

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/backoff"
	"github.com/protoshard/protoshard/internal/deadletters"
	"github.com/protoshard/protoshard/internal/option"
	"github.com/protoshard/protoshard/internal/staleness"
	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Delivery is one message a producer sent reliably, handed to the entity
// (Akka's ConsumerController.Delivery). The entity confirms it with
// ShardingConsumerController.Confirm once it processed it.
type Delivery struct {
	// Message is the producer's message.
	Message proto.Message
	// ProducerID and SeqNr name it: the SeqNr-th message of the producer
	// to this entity.
	ProducerID string
	SeqNr      int64
}

// retryTick is the consumer's timer: it asks again for what it waits for.
type retryTick struct{}

// ShardingConsumerController is the entity's side of reliable delivery
// (Akka's ShardingConsumerController), held by the entity actor. It takes
// the producers' SequencedMessages in Receive, hands each message to the
// entity once and in order per producer, one at a time (deliver), and asks
// the producer for more, or to resend what went missing, when the entity
// confirms. It is not safe for concurrent use: call it from the entity's
// Receive only.
//
// Without restored progress, an entity that restarted (passivation, a
// hand-off, a crash) may get again the messages its earlier incarnation
// processed but whose confirmation did not reach the producer, at most a
// window per producer. An entity that stores ProgressAfter with its own
// state, in the same write, and gives it back to
// NewShardingConsumerController processes none twice.
type ShardingConsumerController struct {
	settings consumerSettings
	state    *consumers
	deliver  func(ctx actor.Context, d Delivery)
	timers   *scheduler.TimerScheduler
	armed    bool
	// cancelRetry stops the armed timer when the entity stops: a PID has
	// no incarnation, so a late tick would reach the entity's next
	// incarnation (or race its spawn).
	cancelRetry scheduler.CancelFunc
	// heard is when a SequencedMessage last came: the retry asks again
	// only after ResendIntervalMin without one (Akka resets its timer),
	// and then at growing intervals up to ResendIntervalMax (retries is
	// how many it made since), so an idle entity costs its producers one
	// Request each per ResendIntervalMax.
	heard    time.Time
	retries  int
	interval time.Duration // the retry's current interval, jitter drawn once
	// handing: deliver is running; confirmations made meanwhile wait in
	// confirms, so the next message is never delivered from inside it.
	handing  bool
	confirms []Delivery
	stale    func() bool // nil until first needed
	// local is the localSequenced being received, if any: its message is
	// delivered as it came.
	local *localSequenced
}

// NewShardingConsumerController returns the controller of an entity.
// restored is the progress the entity stored with its state (nil: none).
// deliver is called for each message, from Receive or Confirm. An option
// with a value it does not accept fails with ErrInvalidOption.
func NewShardingConsumerController(restored *messages.ConsumerProgress, deliver func(ctx actor.Context, d Delivery),
	opts ...ConsumerOption) (*ShardingConsumerController, error) {
	if deliver == nil {
		return nil, errors.New("delivery: NewShardingConsumerController needs a deliver function")
	}
	settings := defaultConsumerSettings()
	if err := option.Apply(&settings, opts, ErrInvalidOption); err != nil {
		return nil, fmt.Errorf("delivery: consumer: %w", err)
	}
	settings = settings.withDefaults()
	st, err := newConsumers(settings, restored)
	if err != nil {
		return nil, fmt.Errorf("delivery: restored progress: %w", err)
	}
	return &ShardingConsumerController{settings: settings, state: st, deliver: deliver}, nil
}

// Receive handles ctx.Message() if it is reliable delivery's, and reports
// whether it was; the entity handles the other messages itself.
func (c *ShardingConsumerController) Receive(ctx actor.Context) bool {
	switch m := ctx.Message().(type) {
	case *messages.SequencedMessage:
		if m.GetProducerController() == nil {
			if s := ctx.Sender(); s != nil && s.GetAddress() == ctx.Self().GetAddress() {
				// A short form from a producer on this node, routed here
				// by the region: the producer keeps m for resending, so
				// the sender is noted in a copy of this consumer's own.
				m = proto.Clone(m).(*messages.SequencedMessage)
			}
		}
		c.onSequenced(ctx, m)
		return true
	case *localSequenced:
		c.local = m
		c.onSequenced(ctx, m.seq)
		c.local = nil
		return true
	case *actor.Stopping:
		if c.armed && c.cancelRetry != nil {
			c.cancelRetry()
			c.armed = false
		}
		now := time.Now()
		for _, out := range c.state.onStopping() {
			c.carryOut(ctx, out, now)
		}
		return false // the entity's too
	case retryTick:
		c.armed = false
		now := time.Now()
		if quiet := now.Sub(c.heard); quiet < c.interval {
			c.arm(ctx, c.interval-quiet)
			return true
		}
		for _, out := range c.state.onRetry() {
			c.carryOut(ctx, out, now)
		}
		c.retries++
		c.interval = c.retryBackoff().Delay(c.retries)
		c.state.forgetIdle(now)
		if c.state.byProducer.len() > 0 {
			c.arm(ctx, c.interval)
		}
		return true
	}
	return false
}

// onSequenced takes m, then delivers what it can.
func (c *ShardingConsumerController) onSequenced(ctx actor.Context, m *messages.SequencedMessage) {
	c.heard = time.Now()
	if c.retries > 0 || c.interval == 0 {
		c.retries, c.interval = 0, c.retryBackoff().Delay(0)
	}
	c.carryOut(ctx, c.state.onSequenced(m, ctx.Sender(), c.heard), c.heard)
	c.arm(ctx, c.interval)
}

// Confirm tells that d is processed (Akka's Confirmed): the producer may
// forget it, and the producer's next message is delivered.
func (c *ShardingConsumerController) Confirm(ctx actor.Context, d Delivery) error {
	if c.handing {
		c.confirms = append(c.confirms, d)
		return nil
	}
	now := time.Now()
	out, err := c.state.onConfirmed(d.ProducerID, d.SeqNr, now)
	if err != nil {
		return fmt.Errorf("delivery: confirm: %w", err)
	}
	c.carryOut(ctx, out, now)
	return nil
}

// ProgressAfter is what the entity stores with d's effects, in the same
// write, to process no message twice after a restart.
func (c *ShardingConsumerController) ProgressAfter(d Delivery) *messages.ConsumerProgress {
	return c.state.progressAfter(d.ProducerID, d.SeqNr, time.Now())
}

// carryOut sends what a transition asks for, then delivers; confirmations
// made while delivering are taken afterwards, in order, as made at now
// (the entity confirms within the Receive that delivered).
func (c *ShardingConsumerController) carryOut(ctx actor.Context, out consumerOutput, now time.Time) {
	for {
		for _, d := range out.drops {
			if errors.Is(d.err, errDuplicate) || errors.Is(d.err, errOutOfOrder) {
				// Nothing is lost: the message was processed already, or
				// the producer sends it again (Akka logs these at debug).
				ctx.Logger().Debug("delivery consumer: message discarded", "reason", d.err)
				continue
			}
			deadletters.PublishError(ctx.ActorSystem(), ctx.Self(), d.msg, nil, fmt.Errorf("delivery consumer: %w", d.err))
		}
		if out.to != nil {
			if out.request != nil {
				ctx.Send(out.to, out.request)
			}
			if out.resend != nil {
				ctx.Send(out.to, out.resend)
			}
			if out.ack != nil {
				ctx.Send(out.to, out.ack)
			}
		}
		if out.deliver != nil && c.memberStale(ctx) {
			// This node was paused or cut off past its failure detection
			// timeout: the others may have removed it, and the producer
			// may have started this entity elsewhere with this very
			// message. A message received before the pause must not be
			// processed now; the entity stops, unconfirmed, and the
			// producer resends to wherever the entity runs.
			deadletters.Publish(ctx.ActorSystem(), ctx.Self(), out.deliver, nil, staleReason)
			ctx.Stop(ctx.Self())
			return
		}
		if out.deliver != nil {
			msg, err := c.payloadOf(out)
			if err != nil {
				// The producer's message type is not linked here: it can
				// never be processed; confirm it so the rest can come.
				deadletters.PublishError(ctx.ActorSystem(), ctx.Self(), out.deliver, nil,
					fmt.Errorf("delivery consumer: producer %q seqNr %d: %w: %w", out.deliver.GetProducerId(), out.deliver.GetSeqNr(), deadletter.ErrNotSerializable, err))
				c.confirms = append(c.confirms, Delivery{ProducerID: out.deliver.GetProducerId(), SeqNr: out.deliver.GetSeqNr()})
			} else {
				c.handing = true
				c.deliver(ctx, Delivery{Message: msg, ProducerID: out.deliver.GetProducerId(), SeqNr: out.deliver.GetSeqNr()})
				c.handing = false
			}
		}
		if len(c.confirms) == 0 {
			return
		}
		d := c.confirms[0]
		c.confirms = dropFront(c.confirms, 1) // its array reused: a confirmation per message
		next, err := c.state.onConfirmed(d.ProducerID, d.SeqNr, now)
		if err != nil {
			ctx.Logger().Warn("delivery consumer: confirmation refused", "producer", d.ProducerID, "seqNr", d.SeqNr, "error", err)
			next = consumerOutput{}
		}
		out = next
	}
}

// retryBackoff is the retry's interval: from ResendIntervalMin, doubling
// while nothing arrives, up to ResendIntervalMax (Pekko grows it by 1.5),
// with jitter so that entities started together do not retry together.
func (c *ShardingConsumerController) retryBackoff() backoff.Exponential {
	return backoff.Exponential{Min: c.settings.ResendIntervalMin, Max: c.settings.ResendIntervalMax, RandomFactor: 0.1}
}

// staleReason is why a message is not delivered while the node's
// membership is stale.
const staleReason = "delivery consumer: this node has not confirmed its membership within the failure detection timeout " +
	"(it was paused or cut off): the entity stops unconfirmed, the producer resends to its home"

// memberStale tells whether this node's membership is stale (the check of
// the actor system's sharding; never without one).
func (c *ShardingConsumerController) memberStale(ctx actor.Context) bool {
	if c.stale == nil {
		c.stale = staleness.Of(ctx.ActorSystem())
	}
	return c.stale()
}

// arm starts the retry timer, to fire after d, unless it runs.
func (c *ShardingConsumerController) arm(ctx actor.Context, d time.Duration) {
	if c.armed {
		return
	}
	if c.timers == nil {
		c.timers = scheduler.NewTimerScheduler(ctx)
	}
	c.cancelRetry = c.timers.SendOnce(d, ctx.Self(), retryTick{})
	c.armed = true
}

// payloadOf is the application's message of out.deliver: the producer's
// object itself if it came with it from this node, else decoded.
func (c *ShardingConsumerController) payloadOf(out consumerOutput) (proto.Message, error) {
	if l := c.local; l != nil && l.seq == out.deliver {
		return l.msg, nil
	}
	return payloadOf(out.deliver, out.payloadType)
}

// localSequenced is a new SequencedMessage, in full form, to an entity on
// the producer's node, with its message as the producer's Send took it:
// the entity gets that message itself, as an EntityRef.Send on one node
// gives it, without decoding seq's Any (most of reliable delivery's cost
// on one node). It never leaves the node: the producer puts it straight
// in the entity's mailbox, or else sends seq alone. A message stashed
// before its turn, or sent again, is decoded from seq when delivered.
type localSequenced struct {
	seq *messages.SequencedMessage
	msg proto.Message
}

// payloadOf is the application's message m carries: in full form, its
// Any; in short form, its payload decoded as mt, the type its type_id
// named (nil: none that this program links).
func payloadOf(m *messages.SequencedMessage, mt protoreflect.MessageType) (proto.Message, error) {
	if m.GetMessage() != nil {
		return m.GetMessage().UnmarshalNew()
	}
	if mt == nil {
		return nil, fmt.Errorf("type ID %d: no type of this program named", m.GetTypeId())
	}
	msg := mt.New().Interface()
	if err := proto.Unmarshal(m.GetPayload(), msg); err != nil {
		return nil, fmt.Errorf("%s: %w", mt.Descriptor().FullName(), err)
	}
	return msg, nil
}
