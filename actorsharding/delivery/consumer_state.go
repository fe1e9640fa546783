package delivery

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/protoshard/protoshard/messages"
)

// errDuplicate: a SequencedMessage at or below the last one received from its
// producer incarnation was dropped; it was delivered before, possibly by an
// earlier incarnation of the entity whose progress was restored. Nothing
// is lost, so the consumer logs it at debug level rather than publishing
// a dead letter.
var errDuplicate = errors.New("delivery: duplicate sequenced message")

// ErrUnexpectedProducer: a SequencedMessage of another incarnation of a
// producer that is in contact was dropped because it does not start a
// numbering (not first). Pekko discards it with a warning.
var ErrUnexpectedProducer = errors.New("delivery: sequenced message from an unexpected producer incarnation")

// errOutOfOrder: a SequencedMessage was dropped while the consumer waits for
// the resend of a missing one; the producer resends it after that, so
// it is logged at debug level, not published as a dead letter.
var errOutOfOrder = errors.New("delivery: sequenced message out of order while resending")

// ErrStashFull: a SequencedMessage arrived while FlowControlWindow messages of
// its producer already waited for the one being processed; it was dropped and
// the producer resends it.
var ErrStashFull = errors.New("delivery: consumer stash full")

// ErrNoProducerController: a SequencedMessage that names no producer
// controller, neither in full form nor, in short form, as its sender; the
// consumer could not confirm or ask for anything, so it was dropped.
var ErrNoProducerController = errors.New("delivery: sequenced message without its producer controller")

// errNotDelivered: a confirmation of a seqNr that is not the one being
// processed for that producer.
var errNotDelivered = errors.New("delivery: confirmed message is not the one delivered")

// errInvalidProgress: stored consumer progress that cannot come from
// progressAfter.
var errInvalidProgress = errors.New("delivery: invalid consumer progress")

// drop is a SequencedMessage the consumer discarded, with the reason (one of
// the Err values above, wrapped with the producer and seqNr).
type drop struct {
	msg *messages.SequencedMessage
	err error
}

// consumerOutput is what one transition asks the entity to do: deliver one
// message to the application, send request/resend/ack to the producer
// controller `to`, and publish the drops as dead letters.
type consumerOutput struct {
	to      *actor.PID
	deliver *messages.SequencedMessage
	// payloadType is the type of deliver's payload if it is in short form
	// (nil: a type ID this numbering did not name, or a type not linked
	// into this program).
	payloadType protoreflect.MessageType
	request     *messages.Request
	resend      *messages.Resend
	ack         *messages.Ack
	drops       []drop
}

// merge adds a later transition's output; the later request or resend
// replaces an earlier one since it carries newer numbers.
func (o *consumerOutput) merge(l consumerOutput) {
	if l.to != nil {
		o.to = l.to
	}
	if l.deliver != nil {
		o.deliver, o.payloadType = l.deliver, l.payloadType
	}
	if l.request != nil {
		o.request = l.request
	}
	if l.resend != nil {
		o.resend = l.resend
	}
	if l.ack != nil {
		o.ack = l.ack
	}
	o.drops = append(o.drops, l.drops...)
}

func (o *consumerOutput) dropped(m *messages.SequencedMessage, reason error) {
	o.drops = append(o.drops, drop{msg: m, err: fmt.Errorf("producer %q incarnation %d seqNr %d: %w",
		m.GetProducerId(), m.GetProducerIncarnation(), m.GetSeqNr(), reason)})
}

// consumerState is Pekko's ConsumerControllerImpl.State for one producer ID,
// with its behaviours as fields: active (neither delivering nor resending),
// resending (resend != nil), waitingForConfirmation (delivering != nil). An
// incarnation of the producer plays the role of Pekko's producerController
// ref: another incarnation is "producer changed".
type consumerState struct {
	window          int
	onlyFlowControl bool

	producerID  string
	entityID    string
	incarnation uint64 // 0: no producer known yet
	producer    *actor.PID
	// contact: a message of incarnation arrived since the state was created
	// or restored. Restored progress alone is no contact: another
	// incarnation is then asked to resend instead of being refused.
	contact        bool
	receivedSeqNr  int64
	confirmedSeqNr int64
	requestedSeqNr int64
	delivering     *messages.SequencedMessage
	// resend is the Resend sent last while resending, repeated on retry.
	resend      *messages.Resend
	stash       []*messages.SequencedMessage
	confirmedAt time.Time
	lastActive  time.Time
	// types are the message types the incarnation's full-form messages
	// named, by type_id, for its short-form ones (nil: a type URL not
	// linked into this program).
	types recentMap[uint32, protoreflect.MessageType]
}

func newConsumerState(producerID string, window int, onlyFlowControl bool) *consumerState {
	return &consumerState{producerID: producerID, window: window, onlyFlowControl: onlyFlowControl}
}

func (s *consumerState) supportResend() bool { return !s.onlyFlowControl }

func (s *consumerState) request(confirmed, upTo int64, viaTimeout bool) *messages.Request {
	s.requestedSeqNr = upTo
	return &messages.Request{
		EntityId:            s.entityID,
		ProducerIncarnation: s.incarnation,
		ConfirmedSeqNr:      confirmed,
		RequestUpToSeqNr:    upTo,
		SupportResend:       s.supportResend(),
		ViaTimeout:          viaTimeout,
		ShortForm:           true,
	}
}

// onSequenced handles a SequencedMessage of this producer ID.
func (s *consumerState) onSequenced(m *messages.SequencedMessage) consumerOutput {
	var out consumerOutput
	if s.delivering != nil {
		s.stashWhileDelivering(m, &out)
		return out
	}
	s.handle(m, &out)
	if s.delivering == nil && s.resend != nil {
		// Pekko clears the stash when it starts resending; what was in it
		// comes again after the missing one.
		for _, st := range s.stash {
			out.dropped(st, errOutOfOrder)
		}
		s.stash = nil
	}
	return out
}

// stashWhileDelivering is Pekko's waitingForConfirmation receiving a
// SequencedMessage.
func (s *consumerState) stashWhileDelivering(m *messages.SequencedMessage, out *consumerOutput) {
	expected := s.delivering.GetSeqNr() + int64(len(s.stash)) + 1
	switch {
	case m.GetProducerIncarnation() == s.incarnation && m.GetSeqNr() < expected:
		out.dropped(m, errDuplicate)
	case len(s.stash) >= s.window:
		out.dropped(m, ErrStashFull)
	default:
		s.stash = append(s.stash, m)
	}
}

// handle is Pekko's active and resending receiving a SequencedMessage, plus
// the rows of restored progress (see the design's decision table).
func (s *consumerState) handle(m *messages.SequencedMessage, out *consumerOutput) {
	seq := m.GetSeqNr()
	if s.incarnation == 0 || m.GetProducerIncarnation() != s.incarnation {
		s.changedProducer(m, out)
		return
	}
	firstContact := !s.contact
	s.contact = true
	s.producer = m.GetProducerController()
	s.entityID = m.GetEntityId()
	out.to = s.producer
	expected := s.receivedSeqNr + 1
	switch {
	case seq == expected && !s.readable(m) && s.supportResend():
		// Short form of a type never named to this consumer: it lost the
		// start of the numbering (its progress was restored). What is
		// resent comes in full form.
		s.resend = &messages.Resend{EntityId: s.entityID, ProducerIncarnation: s.incarnation, FromSeqNr: seq}
		out.resend = proto.Clone(s.resend).(*messages.Resend)
		out.dropped(m, errOutOfOrder)
	case seq == expected:
		if firstContact {
			// After restore the producer has no demand from this consumer
			// yet: grant a window, as Pekko does for a first message.
			out.request = s.request(s.confirmedSeqNr, s.confirmedSeqNr+int64(s.window), false)
		}
		s.deliver(m, out)
	case s.resend != nil:
		out.dropped(m, errOutOfOrder)
		if m.GetFirst() {
			out.request = s.retryRequest()
		}
	case seq > expected && firstContact && m.GetFirst():
		// The producer starts a numbering it believes new to this consumer:
		// what lies between was confirmed to it by nobody here, so waiting
		// for it would stall; accept as Pekko accepts a first message.
		s.acceptFirst(m, out)
	case seq > expected && s.supportResend():
		s.resend = &messages.Resend{EntityId: s.entityID, ProducerIncarnation: s.incarnation, FromSeqNr: expected}
		out.resend = proto.Clone(s.resend).(*messages.Resend)
		out.dropped(m, errOutOfOrder)
	case seq > expected:
		s.deliver(m, out)
	default:
		out.dropped(m, errDuplicate)
		if firstContact {
			// After restore the producer has no demand from this consumer
			// yet: a Request confirms what was processed before (Pekko's Ack)
			// and grants a window.
			out.request = s.request(s.confirmedSeqNr, s.confirmedSeqNr+int64(s.window), false)
		} else if m.GetFirst() {
			out.request = s.retryRequest()
		} else {
			// The producer resends what this consumer processed: its
			// confirmation was lost, or not sent yet (no Request before
			// half the window). Tell it now: waiting for the retry timer
			// would never end while the producer's idle resends keep the
			// consumer from being quiet.
			out.ack = &messages.Ack{EntityId: s.entityID, ProducerIncarnation: s.incarnation, ConfirmedSeqNr: s.confirmedSeqNr}
		}
	}
}

// changedProducer is Pekko's receiveChangedProducer: no incarnation known,
// or another one.
func (s *consumerState) changedProducer(m *messages.SequencedMessage, out *consumerOutput) {
	out.to = m.GetProducerController()
	switch {
	case m.GetFirst() || s.onlyFlowControl:
		s.acceptFirst(m, out)
	case !s.contact:
		if s.resend != nil && s.resend.GetFromSeqNr() == 0 &&
			s.resend.GetProducerIncarnation() == m.GetProducerIncarnation() {
			// Already asked this incarnation to start over; its messages in
			// flight before that come again.
			out.dropped(m, errOutOfOrder)
			return
		}
		// "Needed for sharding": a new entity incarnation gets a numbering
		// in the middle; ask for all unconfirmed, the head marked first.
		s.producer = m.GetProducerController()
		s.entityID = m.GetEntityId()
		s.resend = &messages.Resend{EntityId: m.GetEntityId(), ProducerIncarnation: m.GetProducerIncarnation()}
		out.resend = proto.Clone(s.resend).(*messages.Resend)
		out.dropped(m, errOutOfOrder)
	default:
		out.to = s.producer
		out.dropped(m, ErrUnexpectedProducer)
	}
}

// acceptFirst starts the numbering of m's incarnation at m, resetting the
// entry: Request(confirmed, seq-1+window), then deliver.
func (s *consumerState) acceptFirst(m *messages.SequencedMessage, out *consumerOutput) {
	if m.GetProducerIncarnation() != s.incarnation {
		s.confirmedSeqNr = 0
		s.types.reset()
	}
	s.incarnation = m.GetProducerIncarnation()
	s.producer = m.GetProducerController()
	s.entityID = m.GetEntityId()
	s.contact = true
	out.to = s.producer
	out.request = s.request(s.confirmedSeqNr, m.GetSeqNr()-1+int64(s.window), false)
	s.deliver(m, out)
}

func (s *consumerState) deliver(m *messages.SequencedMessage, out *consumerOutput) {
	s.receivedSeqNr = m.GetSeqNr()
	s.resend = nil
	s.delivering = m
	out.deliver = m
	id := m.GetTypeId()
	switch {
	case id == 0:
	case m.GetMessage() != nil:
		if _, named := s.types.get(id); !named {
			mt, _ := protoregistry.GlobalTypes.FindMessageByURL(m.GetMessage().GetTypeUrl())
			s.types.put(id, mt)
		}
	default:
		out.payloadType, _ = s.types.get(id)
	}
}

// readable: m is not in short form, or its short form names a type this
// numbering named before.
func (s *consumerState) readable(m *messages.SequencedMessage) bool {
	if m.GetMessage() != nil || m.GetTypeId() == 0 {
		return true
	}
	_, named := s.types.get(m.GetTypeId())
	return named
}

// retryRequest is Pekko's retryRequest: the Request again, viaTimeout so
// that the producer resends all unconfirmed.
func (s *consumerState) retryRequest() *messages.Request {
	upTo := s.requestedSeqNr
	if s.onlyFlowControl {
		upTo = s.receivedSeqNr + int64(s.window/2)
	}
	if upTo < s.confirmedSeqNr {
		upTo = s.confirmedSeqNr
	}
	return s.request(s.confirmedSeqNr, upTo, true)
}

// onConfirmed is Pekko's Confirmed: the message being delivered is
// processed. The stash is then handled in order until the next delivery.
func (s *consumerState) onConfirmed(seq int64, now time.Time) (consumerOutput, error) {
	var out consumerOutput
	d := s.delivering
	if d == nil || d.GetSeqNr() != seq {
		return out, fmt.Errorf("producer %q seqNr %d: %w", s.producerID, seq, errNotDelivered)
	}
	s.delivering = nil
	s.confirmedSeqNr = seq
	s.confirmedAt = now
	out.to = s.producer
	switch {
	case d.GetFirst():
		// Confirm a first message at once: it stops the producer's resending
		// of it.
		out.request = s.request(seq, seq-1+int64(s.window), false)
	case s.requestedSeqNr-seq <= int64(s.window/2):
		// Half the window used (Pekko: requested-seq == window/2, then
		// requested+window/2, the same for an even window).
		out.request = s.request(seq, seq+int64(s.window), false)
	case d.GetAck():
		out.ack = &messages.Ack{EntityId: s.entityID, ProducerIncarnation: s.incarnation, ConfirmedSeqNr: seq}
	}
	for len(s.stash) > 0 && s.delivering == nil {
		m := s.stash[0]
		s.stash[0] = nil
		s.stash = s.stash[1:]
		out.merge(s.onSequenced(m))
	}
	if len(s.stash) == 0 {
		s.stash = nil
	}
	return out, nil
}

// onRetry is Pekko's Retry timer: in active the Request again (a lost last
// message or Request), in resending the Resend again, nothing while
// delivering. The caller owns the timer and its back-off.
func (s *consumerState) onRetry() consumerOutput {
	var out consumerOutput
	switch {
	case s.delivering != nil:
	case s.resend != nil:
		out.to = s.producer
		out.resend = proto.Clone(s.resend).(*messages.Resend)
	case s.contact && s.producer != nil:
		out.to = s.producer
		out.request = s.retryRequest()
	}
	return out
}

// idle: nothing is delivering or stashed, so forgetting loses no message.
func (s *consumerState) idle() bool { return s.delivering == nil && len(s.stash) == 0 }

// consumers is Pekko's ShardingConsumerController bookkeeping: one
// consumerState per producer ID.
type consumers struct {
	settings   consumerSettings
	byProducer recentMap[string, *consumerState]
}

// newConsumers restores stored progress (nil: none, Pekko's behaviour).
func newConsumers(settings consumerSettings, restored *messages.ConsumerProgress) (*consumers, error) {
	c := &consumers{settings: settings.withDefaults()}
	for _, p := range restored.GetProducers() {
		if err := validProducerProgress(p); err != nil {
			return nil, err
		}
		if _, dup := c.byProducer.get(p.GetProducerId()); dup {
			return nil, fmt.Errorf("producer %q listed twice: %w", p.GetProducerId(), errInvalidProgress)
		}
		s := c.newState(p.GetProducerId())
		s.incarnation = p.GetProducerIncarnation()
		s.receivedSeqNr = p.GetConfirmedSeqNr()
		s.confirmedSeqNr = p.GetConfirmedSeqNr()
		s.requestedSeqNr = p.GetConfirmedSeqNr()
		s.confirmedAt = time.UnixMilli(p.GetConfirmedAtUnixMs())
		s.lastActive = s.confirmedAt
		c.byProducer.put(p.GetProducerId(), s)
	}
	return c, nil
}

func validProducerProgress(p *messages.ProducerProgress) error {
	switch {
	case p == nil:
		return fmt.Errorf("nil producer entry: %w", errInvalidProgress)
	case p.GetProducerId() == "":
		return fmt.Errorf("empty producer id: %w", errInvalidProgress)
	case p.GetProducerIncarnation() == 0:
		return fmt.Errorf("producer %q: zero incarnation: %w", p.GetProducerId(), errInvalidProgress)
	case p.GetConfirmedSeqNr() < 0:
		return fmt.Errorf("producer %q: negative seqNr %d: %w", p.GetProducerId(), p.GetConfirmedSeqNr(), errInvalidProgress)
	}
	return nil
}

func (c *consumers) newState(producerID string) *consumerState {
	return newConsumerState(producerID, c.settings.FlowControlWindow, c.settings.OnlyFlowControl)
}

func (c *consumers) onSequenced(m *messages.SequencedMessage, sender *actor.PID, now time.Time) consumerOutput {
	var out consumerOutput
	switch {
	case m == nil:
		return out
	case m.GetProducerId() == "" || m.GetProducerIncarnation() == 0:
		// No producer to answer or to keep progress for.
		out.dropped(m, ErrUnexpectedProducer)
		return out
	case m.GetSeqNr() < 1:
		out.dropped(m, errOutOfOrder)
		return out
	case m.GetProducerController() == nil && sender == nil:
		out.dropped(m, ErrNoProducerController)
		return out
	case m.GetProducerController() == nil:
		// Short form: its sender is the producer controller. The message
		// is this consumer's own (decoded here, or copied if it came from
		// a producer on this node), so it takes the PID.
		m.ProducerController = sender
	}
	s, ok := c.byProducer.get(m.GetProducerId())
	if !ok {
		s = c.newState(m.GetProducerId())
		c.byProducer.put(m.GetProducerId(), s)
	}
	s.lastActive = now
	return s.onSequenced(m)
}

func (c *consumers) onConfirmed(producerID string, seq int64, now time.Time) (consumerOutput, error) {
	s, ok := c.byProducer.get(producerID)
	if !ok {
		return consumerOutput{}, fmt.Errorf("producer %q seqNr %d: %w", producerID, seq, errNotDelivered)
	}
	s.lastActive = now
	return s.onConfirmed(seq, now)
}

// onRetry runs every producer's retry, in producer ID order.
func (c *consumers) onRetry() []consumerOutput {
	var outs []consumerOutput
	for _, id := range c.producerIDs() {
		if o := c.byProducer.all()[id].onRetry(); o.request != nil || o.resend != nil {
			outs = append(outs, o)
		}
	}
	return outs
}

// onStopping is Pekko's postStop: a best-effort Ack of what is confirmed,
// to every producer in contact, so that it does not resend to the next
// incarnation what this one processed but had not confirmed to it yet
// (below half the window a confirmation waits for the retry timer).
func (c *consumers) onStopping() []consumerOutput {
	var outs []consumerOutput
	for _, id := range c.producerIDs() {
		s := c.byProducer.all()[id]
		if !s.contact || s.producer == nil || s.confirmedSeqNr < 1 {
			continue
		}
		outs = append(outs, consumerOutput{to: s.producer,
			ack: &messages.Ack{EntityId: s.entityID, ProducerIncarnation: s.incarnation, ConfirmedSeqNr: s.confirmedSeqNr}})
	}
	return outs
}

func (c *consumers) producerIDs() []string { return slices.Sorted(maps.Keys(c.byProducer.all())) }

// progressAfter is the progress the entity stores with the effects of the
// message seq of producerID: every producer's confirmed seqNr, that one's
// set to seq at now. Sorted by producer ID so that equal progress encodes
// equally; a fresh value the caller may keep.
func (c *consumers) progressAfter(producerID string, seq int64, now time.Time) *messages.ConsumerProgress {
	p := &messages.ConsumerProgress{}
	for _, id := range c.producerIDs() {
		s := c.byProducer.all()[id]
		confirmed, at := s.confirmedSeqNr, s.confirmedAt
		if id == producerID {
			confirmed, at = seq, now
		}
		if s.incarnation == 0 || confirmed <= 0 {
			continue
		}
		p.Producers = append(p.Producers, &messages.ProducerProgress{
			ProducerId:          id,
			ProducerIncarnation: s.incarnation,
			ConfirmedSeqNr:      confirmed,
			ConfirmedAtUnixMs:   at.UnixMilli(),
		})
	}
	return p
}

// forgetIdle drops the producers silent for ProgressRetention with nothing
// delivering or stashed, and returns their IDs in order.
func (c *consumers) forgetIdle(now time.Time) []string {
	var forgotten []string
	for _, id := range c.producerIDs() {
		s := c.byProducer.all()[id]
		if s.idle() && now.Sub(s.lastActive) >= c.settings.ProgressRetention {
			c.byProducer.remove(id)
			forgotten = append(forgotten, id)
		}
	}
	return forgotten
}
