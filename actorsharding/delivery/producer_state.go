package delivery

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/messages"
)

// ErrBufferFull: the producer already holds BufferSize messages that wait
// for demand from their entities (Pekko throws here). It wraps
// deadletter.ErrBufferFull, so a drop for it is classed as one.
var ErrBufferFull = fmt.Errorf("delivery: producer buffer full: %w", deadletter.ErrBufferFull)

// ErrUnconfirmed: SendWithConfirmation's context ended after the producer
// accepted the message but before its entity confirmed it. The message is
// delivered all the same (unless the producer stops without a durable
// queue): sending it again would send it twice.
var ErrUnconfirmed = errors.New("delivery: accepted, not confirmed yet")

// ErrProducerStopped: the producer stopped accepting messages, or stopped
// before the entity confirmed a message. It wraps deadletter.ErrShuttingDown.
var ErrProducerStopped = fmt.Errorf("delivery: producer stopped: %w", deadletter.ErrShuttingDown)

// Reasons the producer refuses or ignores input. The actor logs them; none
// reaches a caller of the public API.
var (
	errUnknownEntity    = errors.New("no out-state for the entity (never sent to, or cleaned up)")
	errStaleIncarnation = errors.New("stale producer incarnation")
	errInvalidRequest   = errors.New("invalid Request")
	errSeqNrOutOfRange  = errors.New("seqNr out of range")
	errInvalidMessage   = errors.New("invalid message")
)

// confirmation: a message sent with ack (SendWithConfirmation) that the
// entity confirmed; the actor answers its sender.
type confirmation struct {
	entityID string
	seqNr    int64
}

// outOutput is what a transition asks the actor to do. The actor sends resend
// before send: resent messages are always older.
type outOutput struct {
	send      []*messages.SequencedMessage // sent for the first time, seq order
	resend    []*messages.SequencedMessage // sent again, seq order per entity
	confirmed []confirmation               // ack'ed messages now confirmed
	// confirmedCount is how many seqNrs became confirmed (for stats).
	confirmedCount int64
	// demandChanged: the entity's demand or buffered count changed, so a
	// RequestNext to the producer would read differently.
	demandChanged bool
	// accepted is the message accept numbered, if it is in send.
	accepted *messages.SequencedMessage
}

func (o *outOutput) merge(other outOutput) {
	o.send = append(o.send, other.send...)
	o.resend = append(o.resend, other.resend...)
	o.confirmed = append(o.confirmed, other.confirmed...)
	o.confirmedCount += other.confirmedCount
	o.demandChanged = o.demandChanged || other.demandChanged
}

// outState is one entity's numbering: Pekko's ShardingProducerController
// OutState and its child ProducerControllerImpl.State merged, since there is
// no child actor per entity. SeqNrs are assigned at accept, so buffered
// messages already carry theirs.
type outState struct {
	entityID    string
	producerID  string
	controller  *actor.PID // where the entity sends Request, Resend and Ack
	incarnation uint64     // names this numbering; another one is "producer changed"

	currentSeqNr   int64 // next to assign
	confirmedSeqNr int64 // all up to it processed by the entity
	requestedSeqNr int64 // may send up to it; starts at currentSeqNr: the first goes without demand
	firstSeqNr     int64 // first of this numbering, sent with first=true until confirmed
	supportResend  bool  // false: the entity is only-flow-control, nothing is kept for resend
	// requested: a Request of this numbering came. The consumer asks at
	// first contact, before it confirms the first message, and what the
	// producer sends on that demand is not lost when the first is confirmed.
	requested bool

	// unconfirmed: sent, not confirmed, seq order, each kept in the form
	// it was sent in; fullForm makes what is resent of one in short form.
	unconfirmed []*messages.SequencedMessage
	// buffered: accepted, seq > requestedSeqNr, seq order. Each is in
	// short form, as numbered, until forSending makes it the form it is
	// first sent in.
	buffered []*messages.SequencedMessage
	// storing: accepted and numbered, on their way to the durable queue;
	// they are placed (sent or buffered) once stored. After buffered.
	storing []*messages.SequencedMessage
	// loadedSeqNr is the highest seqNr loaded from the durable queue (0:
	// none): the producer's earlier life may have sent up to it, so the
	// entity may confirm up to it before this life sent it.
	loadedSeqNr int64
	acks        []int64 // ack'ed seqNrs not yet confirmed, in order
	usedAt      time.Time
	types       numberedTypes
}

// numberedTypes are the message types of one numbering, by the ID that
// names each in SequencedMessage.type_id, and the IDs the entity was sent
// in full form since it last asked for a resend: a message of one of
// those goes in short form (its encoding alone, no type URL, no producer
// PID), which is most of a reliable message's cost to encode and decode
// across processes.
type numberedTypes struct {
	ids   recentMap[string, uint32] // type URL -> ID, from 1, for the numbering's life
	urls  []string                  // ID -> type URL, at ID-1
	named map[uint32]bool
	// readsShort: the entity's last Request said it reads the short form
	// (a consumer of an earlier version does not).
	readsShort bool
}

// idOf is url's ID, given on first use.
func (t *numberedTypes) idOf(url string) uint32 {
	if id, ok := t.ids.get(url); ok {
		return id
	}
	id := uint32(t.ids.len() + 1)
	t.ids.put(url, id)
	t.urls = append(t.urls, url)
	return id
}

// urlOf is the type URL that id names (false: none).
func (t *numberedTypes) urlOf(id uint32) (string, bool) {
	if id == 0 || int(id) > len(t.urls) {
		return "", false
	}
	return t.urls[id-1], true
}

func newOutState(entityID, producerID string, controller *actor.PID, incarnation uint64, now time.Time) *outState {
	return &outState{
		entityID:       entityID,
		producerID:     producerID,
		controller:     controller,
		incarnation:    incarnation,
		currentSeqNr:   1,
		requestedSeqNr: 1,
		firstSeqNr:     1,
		supportResend:  true,
		usedAt:         now,
	}
}

// sentSeqNr is the highest seqNr sent so far (0: none).
func (o *outState) sentSeqNr() int64 {
	return o.currentSeqNr - 1 - int64(len(o.buffered)) - int64(len(o.storing))
}

// confirmableSeqNr is the highest seqNr the entity may confirm: sent in
// this life or, loaded from the durable queue, in an earlier one.
func (o *outState) confirmableSeqNr() int64 { return max(o.sentSeqNr(), o.loadedSeqNr) }

// hasDemand: the next accepted message goes out at once.
func (o *outState) hasDemand() bool { return o.currentSeqNr <= o.requestedSeqNr }

type demandView struct {
	hasDemand bool
	buffered  int
}

func (o *outState) demand() demandView {
	return demandView{hasDemand: o.hasDemand(), buffered: len(o.buffered)}
}

// accept numbers payload and sends it if the entity's demand allows,
// buffers it otherwise.
func (o *outState) accept(payload packed, ack bool, now time.Time) outOutput {
	var out outOutput
	before := o.demand()
	seq := o.number(payload, ack, now)
	o.place(seq, &out)
	if len(out.send) > 0 && out.send[len(out.send)-1] == seq {
		out.accepted = seq
	}
	out.demandChanged = before != o.demand()
	return out
}

// sequenced is message seqNr of this numbering, carrying payload, in
// short form: the form most messages go in across processes, so that a
// message is allocated once. forSending makes it the full form in place
// where it goes so.
func (o *outState) sequenced(seqNr int64, ack bool, payload packed) *messages.SequencedMessage {
	m := payload.shell
	if m == nil {
		m = &messages.SequencedMessage{}
	}
	m.EntityId = o.entityID
	m.ProducerId = o.producerID
	m.ProducerIncarnation = o.incarnation
	m.SeqNr = seqNr
	m.First = seqNr == o.firstSeqNr
	m.Ack = ack
	m.TypeId = o.types.idOf(payload.url)
	m.Payload = payload.value
	return m
}

// forSending makes m, about to be sent for the first time and not yet
// handed to the actor, the form it goes in, in place, and reports whether
// that is the short form. To an entity on another node (remote) it goes
// in short form if it may: the entity had m's type named in this
// numbering, and its last Request said it reads the short form and takes
// resends (a consumer that cannot read a short form, having lost its
// state, asks for a resend, and what is resent goes in full form).
// Otherwise it goes in full form, which names its type; a first message
// always does, as it may start the entity's numbering. Either form may
// go: the full one names the type again. m is kept for resending in the
// form made here: fullForm makes its full form again.
func (o *outState) forSending(m *messages.SequencedMessage, remote bool) bool {
	id := m.GetTypeId()
	switch {
	case id == 0:
		return false
	case remote && !m.GetFirst() && o.types.readsShort && o.supportResend && o.types.named[id]:
		if full := m.GetMessage(); full != nil {
			m.Payload = full.GetValue()
			m.Message = nil
			m.ProducerController = nil
		}
		return true
	}
	if o.types.named == nil {
		o.types.named = map[uint32]bool{}
	}
	o.types.named[id] = true
	if m.GetMessage() == nil {
		inFullForm(m, o.anyOf(m), o.controller)
	}
	return false
}

// inFullForm makes m, in short form and not yet handed to the actor, the
// full form in place: payload (m's own payload in an Any) and controller
// instead of m's payload alone.
func inFullForm(m *messages.SequencedMessage, payload *anypb.Any, controller *actor.PID) {
	m.Message, m.Payload, m.ProducerController = payload, nil, controller
}

// anyOf is the Any of m in short form: its payload with the type URL its
// type ID names (given by idOf, so it names one).
func (o *outState) anyOf(m *messages.SequencedMessage) *anypb.Any {
	url, _ := o.types.urlOf(m.GetTypeId())
	return packed{url: url, value: m.GetPayload()}.any()
}

// fullForm is m, a message of this numbering, in full form: m itself if
// it is, else a new full form of the short form m (which stays as it is:
// it was handed to the actor).
func (o *outState) fullForm(m *messages.SequencedMessage) *messages.SequencedMessage {
	if m.GetMessage() != nil {
		return m
	}
	return o.rebuilt(m, m.GetFirst())
}

// rebuilt is a new full form of m, first or not.
func (o *outState) rebuilt(m *messages.SequencedMessage, first bool) *messages.SequencedMessage {
	payload := m.GetMessage()
	if payload == nil {
		payload = o.anyOf(m)
	}
	return &messages.SequencedMessage{
		EntityId:            m.GetEntityId(),
		ProducerId:          m.GetProducerId(),
		ProducerIncarnation: m.GetProducerIncarnation(),
		SeqNr:               m.GetSeqNr(),
		First:               first,
		Ack:                 m.GetAck(),
		ProducerController:  o.controller,
		Message:             payload,
		TypeId:              m.GetTypeId(),
	}
}

// resendFrom appends to resend the full form of each unconfirmed message
// from index i on.
func (o *outState) resendFrom(resend []*messages.SequencedMessage, i int) []*messages.SequencedMessage {
	for _, m := range o.unconfirmed[i:] {
		resend = append(resend, o.fullForm(m))
	}
	return resend
}

// number gives payload the next seqNr of the numbering.
func (o *outState) number(payload packed, ack bool, now time.Time) *messages.SequencedMessage {
	seq := o.sequenced(o.currentSeqNr, ack, payload)
	o.currentSeqNr++
	o.usedAt = now
	if ack {
		o.acks = append(o.acks, seq.SeqNr)
	}
	return seq
}

// place sends seq, the next after those sent or buffered, if the demand
// allows, and buffers it otherwise.
func (o *outState) place(seq *messages.SequencedMessage, out *outOutput) {
	if seq.SeqNr <= o.requestedSeqNr {
		o.sendNew(seq, out)
	} else {
		o.buffered = append(o.buffered, seq)
	}
}

// reserve numbers payload for the durable queue, which stores it in full
// form: it is placed by stored.
func (o *outState) reserve(payload packed, ack bool, now time.Time) (*messages.SequencedMessage, outOutput) {
	before := o.demand()
	seq := o.number(payload, ack, now)
	inFullForm(seq, o.anyOf(seq), o.controller)
	o.storing = append(o.storing, seq)
	return seq, outOutput{demandChanged: before != o.demand()}
}

// stored places seq, the oldest message on its way to the queue, now
// that the queue holds it.
func (o *outState) stored(seq *messages.SequencedMessage, now time.Time) (outOutput, error) {
	var out outOutput
	if len(o.storing) == 0 || o.storing[0] != seq {
		return out, fmt.Errorf("%w: entity %q: seqNr %d stored out of turn", errStoreOrder, o.entityID, seq.GetSeqNr())
	}
	before := o.demand()
	o.storing = dropFront(o.storing, 1)
	o.place(seq, &out)
	o.usedAt = now
	out.demandChanged = before != o.demand()
	return out, nil
}

func (o *outState) sendNew(seq *messages.SequencedMessage, out *outOutput) {
	if o.supportResend {
		o.unconfirmed = append(o.unconfirmed, seq)
	}
	out.send = append(out.send, seq)
}

// confirm is Pekko's onAck: everything up to c is processed.
func (o *outState) confirm(c int64, now time.Time, out *outOutput) {
	n := 0
	for n < len(o.acks) && o.acks[n] <= c {
		out.confirmed = append(out.confirmed, confirmation{entityID: o.entityID, seqNr: o.acks[n]})
		n++
	}
	o.acks = dropFront(o.acks, n)
	n = 0
	for n < len(o.unconfirmed) && o.unconfirmed[n].SeqNr <= c {
		n++
	}
	o.unconfirmed = dropFront(o.unconfirmed, n)
	// Loaded messages this life has not sent yet, which the earlier one
	// did: processed already.
	n = 0
	for n < len(o.buffered) && o.buffered[n].SeqNr <= c {
		n++
	}
	o.buffered = dropFront(o.buffered, n)
	o.requestedSeqNr = max(o.requestedSeqNr, c)
	if c > o.confirmedSeqNr {
		out.confirmedCount += c - o.confirmedSeqNr
		o.confirmedSeqNr = c
		o.usedAt = now
	}
}

// dropFront drops the first n of s. Their slots are cleared, so the array
// no longer holds on to messages confirmed or sent; once at least half of
// s is dropped, the rest moves to the front, so the next appends reuse the
// array instead of growing a new one for each window of messages.
func dropFront[T any](s []T, n int) []T {
	n = min(n, len(s))
	if n == 0 {
		return s
	}
	rest := len(s) - n
	if rest <= n {
		copy(s, s[n:])
		clear(s[rest:])
		return s[:rest]
	}
	clear(s[:n])
	return s[n:]
}

// onRequest: the entity confirmed up to confirmed_seq_nr and grants demand up
// to request_up_to_seq_nr.
func (o *outState) onRequest(r *messages.Request, now time.Time) (outOutput, error) {
	var out outOutput
	c, upTo := r.GetConfirmedSeqNr(), r.GetRequestUpToSeqNr()
	if c < 0 || c > upTo {
		return out, fmt.Errorf("%w: confirmed %d, requestUpTo %d", errInvalidRequest, c, upTo)
	}
	if c > o.confirmableSeqNr() {
		return out, fmt.Errorf("%w: Request confirms %d, only up to %d sent", errSeqNrOutOfRange, c, o.confirmableSeqNr())
	}
	before := o.demand()
	o.confirm(c, now, &out)
	o.supportResend = r.GetSupportResend()
	o.types.readsShort = r.GetShortForm()
	if !o.supportResend {
		o.unconfirmed = nil
	}
	// A Request by timeout means the last message or the last Request was
	// lost; confirming the first, when no Request came before, means
	// messages after it may have been discarded before the entity took the
	// first. Either way: resend.
	if (r.GetViaTimeout() || (c == o.firstSeqNr && !o.requested)) && o.supportResend {
		out.resend = o.resendFrom(out.resend, 0)
	}
	o.requested = true
	// Only-flow-control cannot resend: a window at or below what was sent
	// means all of it was probably lost, so it is moved past it (as Pekko).
	if next := o.sentSeqNr() + 1; !o.supportResend && upTo <= next {
		upTo = next + (upTo - c)
	}
	if upTo > o.requestedSeqNr {
		o.requestedSeqNr = upTo
		o.releaseBuffered(now, &out)
	}
	out.demandChanged = before != o.demand()
	return out, nil
}

// releaseBuffered sends the buffered messages that the demand now covers.
func (o *outState) releaseBuffered(now time.Time, out *outOutput) {
	n := 0
	for n < len(o.buffered) && o.buffered[n].SeqNr <= o.requestedSeqNr {
		o.sendNew(o.buffered[n], out)
		n++
	}
	if n > 0 {
		o.buffered = dropFront(o.buffered, n)
		o.usedAt = now
	}
}

// onAck: the entity confirmed up to confirmed_seq_nr, without new demand.
func (o *outState) onAck(a *messages.Ack, now time.Time) (outOutput, error) {
	var out outOutput
	c := a.GetConfirmedSeqNr()
	if c < 0 || c > o.confirmableSeqNr() {
		return out, fmt.Errorf("%w: Ack confirms %d, only up to %d sent", errSeqNrOutOfRange, c, o.confirmableSeqNr())
	}
	confirmsFirst := c == o.firstSeqNr
	o.confirm(c, now, &out)
	if confirmsFirst {
		out.resend = o.resendFrom(out.resend, 0)
	}
	return out, nil
}

// onResend: the entity missed from_seq_nr; 0 means it has no numbering of
// ours (a new entity incarnation), so the head goes out marked first.
func (o *outState) onResend(r *messages.Resend) (outOutput, error) {
	var out outOutput
	from := r.GetFromSeqNr()
	if from < 0 || from > o.sentSeqNr() {
		return out, fmt.Errorf("%w: Resend from %d, only up to %d sent", errSeqNrOutOfRange, from, o.sentSeqNr())
	}
	// The entity may have lost the types named to it (from 0 it has, a
	// gap it may have): what goes after the resent messages names them
	// again.
	clear(o.types.named)
	// Pekko marks the head after resending it, so the entity takes it only
	// at its next Resend(0); marking it first saves that round.
	if from == 0 && len(o.unconfirmed) > 0 && !o.unconfirmed[0].GetFirst() {
		// A copy: a message handed to the actor is never modified.
		o.unconfirmed[0] = o.rebuilt(o.unconfirmed[0], true)
	}
	for i, m := range o.unconfirmed {
		if m.GetSeqNr() >= from {
			out.resend = o.resendFrom(out.resend, i)
			break
		}
	}
	return out, nil
}

// needsResendFirst: the first message of this numbering is sent and not
// confirmed (Pekko keeps its ResendFirst timer while this holds).
func (o *outState) needsResendFirst() bool {
	return len(o.unconfirmed) > 0 && o.unconfirmed[0].GetSeqNr() == o.firstSeqNr
}

// onResendFirstTick is Pekko's resendFirst: the first message again, marked
// first, while it is unconfirmed.
func (o *outState) onResendFirstTick() outOutput {
	var out outOutput
	if o.needsResendFirst() {
		out.resend = append(out.resend, o.fullForm(o.unconfirmed[0]))
	}
	return out
}

// onIdleTick is Pekko's ResendFirstUnconfirmed: the oldest unconfirmed
// message again when the entity has been idle for idleTimeout, to wake up an
// entity that stopped (crash, hand-off, passivation).
func (o *outState) onIdleTick(now time.Time, idleTimeout time.Duration) outOutput {
	var out outOutput
	if len(o.unconfirmed) > 0 && now.Sub(o.usedAt) >= idleTimeout {
		out.resend = append(out.resend, o.fullForm(o.unconfirmed[0]))
	}
	return out
}

// unused: nothing to resend or send and idle for cleanupAfter, so the
// out-state can be forgotten (the next message starts a new incarnation).
func (o *outState) unused(now time.Time, cleanupAfter time.Duration) bool {
	return len(o.unconfirmed) == 0 && len(o.buffered) == 0 && len(o.storing) == 0 && now.Sub(o.usedAt) >= cleanupAfter
}

// check reports a broken invariant: contiguous seqNrs, unconfirmed within
// (confirmed, requested], buffered beyond requested.
func (o *outState) check() error {
	next := o.confirmedSeqNr + 1
	if len(o.unconfirmed) > 0 {
		next = o.unconfirmed[0].GetSeqNr()
	}
	if next <= o.confirmedSeqNr {
		return fmt.Errorf("entity %q: unconfirmed from %d, confirmed %d", o.entityID, next, o.confirmedSeqNr)
	}
	for _, m := range o.unconfirmed {
		if m.GetSeqNr() != next {
			return fmt.Errorf("entity %q: unconfirmed seqNr %d, want %d", o.entityID, m.GetSeqNr(), next)
		}
		next++
	}
	if n := int64(len(o.unconfirmed)); n > o.requestedSeqNr-o.confirmedSeqNr {
		return fmt.Errorf("entity %q: %d unconfirmed beyond the window (%d, %d]", o.entityID, n, o.confirmedSeqNr, o.requestedSeqNr)
	}
	if len(o.buffered) > 0 {
		if first := o.buffered[0].GetSeqNr(); first != o.sentSeqNr()+1 || first <= o.requestedSeqNr {
			return fmt.Errorf("entity %q: buffered from %d, sent %d, requested %d", o.entityID, first, o.sentSeqNr(), o.requestedSeqNr)
		}
		for i, m := range o.buffered {
			if m.GetSeqNr() != o.buffered[0].GetSeqNr()+int64(i) {
				return fmt.Errorf("entity %q: buffered seqNr %d not contiguous", o.entityID, m.GetSeqNr())
			}
		}
	}
	for i, m := range o.storing {
		if m.GetSeqNr() != o.currentSeqNr-int64(len(o.storing)-i) {
			return fmt.Errorf("entity %q: storing seqNr %d not contiguous", o.entityID, m.GetSeqNr())
		}
	}
	if o.sentSeqNr() > o.requestedSeqNr {
		return fmt.Errorf("entity %q: sent %d beyond requested %d", o.entityID, o.sentSeqNr(), o.requestedSeqNr)
	}
	return nil
}

// ProducerStats describes a producer controller.
type ProducerStats struct {
	// Entities is how many entities have an out-state (a numbering).
	Entities int
	// Unconfirmed is how many messages are sent and not yet confirmed.
	Unconfirmed int
	// Buffered is how many accepted messages wait for demand.
	Buffered int
	// Accepted, Sent, Resent and Confirmed count messages since the start:
	// accepted from the producer, sent for the first time, sent again, and
	// confirmed by their entities.
	Accepted, Sent, Resent, Confirmed int64
}

// producerState is Pekko's ShardingProducerControllerImpl.State: the
// out-states of one producer and the buffer they share.
type producerState struct {
	producerID     string
	controller     *actor.PID
	settings       producerSettings
	newIncarnation func() (uint64, error)

	outs     map[string]*outState
	buffered int // over all out-states, <= settings.BufferSize
	stopping bool
	counters ProducerStats // Accepted, Sent, Resent, Confirmed

	// With a durable queue: every message is stored before it is sent,
	// and its Send answered; confirmations and cleanups are stored behind.
	durable bool
	limits  messageLimits
	store   storePipeline
	storing int // over all out-states
}

// newProducerState: newIncarnation nil draws them from crypto/rand.
func newProducerState(producerID string, controller *actor.PID, settings producerSettings, newIncarnation func() (uint64, error)) *producerState {
	if newIncarnation == nil {
		newIncarnation = randomIncarnation
	}
	settings = settings.withDefaults()
	p := &producerState{
		producerID:     producerID,
		controller:     controller,
		settings:       settings,
		newIncarnation: newIncarnation,
		outs:           make(map[string]*outState),
		durable:        settings.DurableQueue != nil,
		store:          storePipeline{retry: settings.queueRetry()},
	}
	maxStored := 0 // the queue's limit on an encoded MessageSent; 0: none
	if limited, ok := settings.DurableQueue.(interface{ MaxMessageSentBytes() int }); ok {
		maxStored = limited.MaxMessageSentBytes()
	}
	p.limits = newMessageLimits(producerID, controller, settings.MaxMessageSize, maxStored)
	return p
}

// messageLimits packs a producer's messages and refuses those that could
// not arrive or be stored. Immutable: Send uses it on the caller's
// goroutine.
type messageLimits struct {
	maxSize, maxStored int // maxStored 0: no limit on the stored size
	// sequencedBase and storedBase are the sizes of a SequencedMessage and
	// a MessageSent with the largest numbers and neither entity ID nor
	// message: the sizes of the fields add up.
	sequencedBase, storedBase int
	urls                      *typeURLCache
}

// typeURLCache remembers the type URL of the last message type packed: a
// producer mostly sends one type, and making the URL allocates.
type typeURLCache struct{ last atomic.Pointer[typeURL] }

type typeURL struct {
	name protoreflect.FullName
	url  string
}

// of is m's type URL in an Any (as anypb.New makes it).
func (c *typeURLCache) of(m proto.Message) string {
	name := m.ProtoReflect().Descriptor().FullName()
	if t := c.last.Load(); t != nil && t.name == name {
		return t.url
	}
	t := &typeURL{name: name, url: "type.googleapis.com/" + string(name)}
	c.last.Store(t)
	return t.url
}

func newMessageLimits(producerID string, controller *actor.PID, maxSize, maxStored int) messageLimits {
	return messageLimits{
		maxSize:   maxSize,
		maxStored: maxStored,
		sequencedBase: proto.Size(&messages.SequencedMessage{ProducerId: producerID, ProducerIncarnation: math.MaxUint64,
			SeqNr: math.MaxInt64, First: true, Ack: true, ProducerController: controller}),
		storedBase: proto.Size(&messages.MessageSent{ProducerIncarnation: math.MaxUint64, SeqNr: math.MaxInt64,
			Ack: true, TimestampMs: math.MaxInt64}),
		urls: &typeURLCache{},
	}
}

// packed is a message as an Any carries it, without the Any: a message
// sent in short form needs none.
type packed struct {
	url   string // the type URL; "" in no packed message
	value []byte // the encoding
	// Made by Send, off the controller's goroutine, if not nil: shell is
	// the message to number this one in; full, the Any of url and value,
	// and local, the localSequenced to carry it, are made while messages
	// go to entities on this node (ShardingProducerController.anyOnSend).
	// Each is used once.
	shell *messages.SequencedMessage
	full  *anypb.Any
	local *localSequenced
}

// ok: p is a packed message (the zero packed is none).
func (p packed) ok() bool { return p.url != "" }

// any is p in its Any.
func (p packed) any() *anypb.Any { return &anypb.Any{TypeUrl: p.url, Value: p.value} }

// pack is msg for entityID as it is sent and stored, or why it cannot be.
func (l messageLimits) pack(entityID string, msg proto.Message) (packed, error) {
	if entityID == "" {
		return packed{}, fmt.Errorf("%w: empty entity ID", errInvalidMessage)
	}
	if msg == nil {
		return packed{}, fmt.Errorf("entity %q: %w", entityID, deadletter.ErrNilMessage)
	}
	value, err := proto.Marshal(msg)
	if err != nil {
		return packed{}, fmt.Errorf("%w: entity %q: %w", errInvalidMessage, entityID, err)
	}
	payload := packed{url: l.urls.of(msg), value: value}
	if n := l.sequencedSize(entityID, payload) + envelopeMargin + len(entityID); n > l.maxSize {
		return packed{}, fmt.Errorf("entity %q: %d bytes to send, over %d: %w", entityID, n, l.maxSize, ErrMessageTooLarge)
	}
	if l.maxStored > 0 {
		if n := l.storedSize(entityID, payload); n > l.maxStored {
			return packed{}, fmt.Errorf("entity %q: %d bytes stored, over %d: %w", entityID, n, l.maxStored, ErrMessageTooLarge)
		}
	}
	return payload, nil
}

// sequencedSize is the encoded size of a SequencedMessage to entityID
// carrying payload, with the largest numbers.
func (l messageLimits) sequencedSize(entityID string, payload packed) int {
	return l.sequencedBase + fieldSize(len(entityID)) + fieldSize(payload.anySize())
}

// storedSize is the same for a MessageSent.
func (l messageLimits) storedSize(entityID string, payload packed) int {
	return l.storedBase + fieldSize(len(entityID)) + fieldSize(payload.anySize())
}

// anySize is the encoded size of p's Any: an Any has two fields,
// type_url (1) and value (2), left out when empty.
func (p packed) anySize() int {
	n := 0
	if u := p.url; u != "" {
		n += protowire.SizeTag(1) + protowire.SizeBytes(len(u))
	}
	if v := p.value; len(v) > 0 {
		n += protowire.SizeTag(2) + protowire.SizeBytes(len(v))
	}
	return n
}

// fieldSize is the encoded size of a length-delimited field (numbers below
// 16) of n bytes; proto3 leaves out an empty string and a nil message, but
// an entity ID is never empty and the payload is never nil.
func fieldSize(n int) int { return protowire.SizeTag(1) + protowire.SizeBytes(n) }

// envelopeMargin is room for the ShardingEnvelope around a
// SequencedMessage sent to another node (its Any's type URL, the member ID
// it is for), besides a second copy of the entity ID.
const envelopeMargin = 1 << 10

// randomIncarnation is a random non-zero uint64: 0 is what a message
// without an incarnation reads as.
func randomIncarnation() (uint64, error) {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, fmt.Errorf("producer incarnation: %w", err)
		}
		if v := binary.LittleEndian.Uint64(b[:]); v != 0 {
			return v, nil
		}
	}
}

// accept takes r's message for its entity: sent at once when the entity
// has demand or is new, buffered otherwise while the shared buffer has
// room. With a durable queue it is numbered and handed to the store
// pipeline instead, and placed once stored (onStored), which answers r.
func (p *producerState) accept(r *sendRequest, now time.Time) (outOutput, error) {
	if p.store.failed != nil {
		return outOutput{}, p.store.failed
	}
	if p.stopping {
		return outOutput{}, ErrProducerStopped
	}
	if !r.payload.ok() {
		payload, err := p.limits.pack(r.entityID, r.msg)
		if err != nil {
			return outOutput{}, err
		}
		r.payload = payload
	}
	payload := r.payload
	o := p.outs[r.entityID]
	if o != nil && !o.hasDemand() && p.buffered+p.storing >= p.settings.BufferSize {
		return outOutput{}, fmt.Errorf("entity %q has no demand, %d buffered: %w", r.entityID, p.buffered+p.storing, ErrBufferFull)
	}
	return p.place(o, r.entityID, payload, r.ack, r, now)
}

// acceptQueued takes a Send the sendQueue admitted: packed and checked by
// its sender, and with room in the buffer kept for it.
func (p *producerState) acceptQueued(s queuedSend, now time.Time) (outOutput, error) {
	switch {
	case p.store.failed != nil:
		return outOutput{}, p.store.failed
	case p.stopping:
		return outOutput{}, ErrProducerStopped
	}
	return p.place(p.outs[s.entityID], s.entityID, s.payload, false, nil, now)
}

// place numbers payload for entityID, whose out-state is o (nil: none
// yet, a numbering starts), and sends, buffers or, with a durable queue,
// stores it; reply is the Send answered once it is stored.
func (p *producerState) place(o *outState, entityID string, payload packed, ack bool, reply *sendRequest, now time.Time) (outOutput, error) {
	if o == nil {
		inc, err := p.newIncarnation()
		if err != nil {
			return outOutput{}, fmt.Errorf("entity %q: %w", entityID, err)
		}
		if inc == 0 {
			return outOutput{}, fmt.Errorf("entity %q: zero producer incarnation", entityID)
		}
		o = newOutState(entityID, p.producerID, p.controller, inc, now)
		p.outs[entityID] = o
	}
	p.counters.Accepted++
	if p.durable {
		seq, out := o.reserve(payload, ack, now)
		p.storing++
		p.store.addSent(seq, reply)
		return out, nil
	}
	before := len(o.buffered)
	return p.account(o, before, o.accept(payload, ack, now)), nil
}

// storeOutput is what a store result asks the actor to do.
type storeOutput struct {
	out    outOutput
	stored []*sendRequest // their messages are stored: Send returns nil
	// failed: the queue failed or was fenced; the controller stops with
	// it, and unstored are the Sends whose messages it never stored.
	failed   error
	unstored []*sendRequest
}

// onStored takes the result of the write in flight: the messages it
// stored are placed (sent or buffered) and their Sends answered.
func (p *producerState) onStored(r storeResult, now time.Time) (storeOutput, error) {
	var so storeOutput
	stored, failed := p.store.done(r)
	for _, s := range stored {
		o := p.outs[s.seq.GetEntityId()]
		if o == nil {
			return so, fmt.Errorf("%w: entity %q has no out-state", errStoreOrder, s.seq.GetEntityId())
		}
		before := len(o.buffered)
		out, err := o.stored(s.seq, now)
		if err != nil {
			return so, err
		}
		p.storing--
		so.out.merge(p.account(o, before, out))
		so.stored = append(so.stored, s.reply)
	}
	if failed != nil {
		if errors.Is(failed, errStoreOrder) {
			return so, failed
		}
		so.failed = failed
		for _, s := range p.store.unstored() {
			so.unstored = append(so.unstored, s.reply)
		}
	}
	return so, nil
}

// load rebuilds the out-states from what the durable queue holds: each
// entity continues its numbering, its unconfirmed messages wait ahead of
// new ones, and the oldest goes out at once marked first (the entity may
// be new, or restored from its own store).
func (p *producerState) load(st *messages.DurableProducerQueueState, now time.Time) (outOutput, error) {
	var out outOutput
	if len(p.outs) > 0 {
		return out, fmt.Errorf("%w: loaded after messages were accepted", errStoreOrder)
	}
	outs := make(map[string]*outState)
	for _, e := range st.GetEntities() {
		id, c := e.GetEntityId(), e.GetConfirmedSeqNr()
		if id == "" || e.GetProducerIncarnation() == 0 || c < 0 || outs[id] != nil {
			return out, fmt.Errorf("%w: loaded entity %q, incarnation %d, confirmed %d", errInvalidMessage, id, e.GetProducerIncarnation(), c)
		}
		o := newOutState(id, p.producerID, p.controller, e.GetProducerIncarnation(), now)
		o.confirmedSeqNr, o.currentSeqNr, o.requestedSeqNr, o.firstSeqNr, o.loadedSeqNr = c, c+1, c+1, c+1, c
		outs[id] = o
	}
	for _, m := range st.GetUnconfirmed() {
		o := outs[m.GetEntityId()]
		if o == nil || o.incarnation != m.GetProducerIncarnation() || m.GetSeqNr() != o.currentSeqNr || m.GetMessage() == nil {
			return out, fmt.Errorf("%w: loaded message of entity %q, incarnation %d, seqNr %d does not continue its numbering",
				errInvalidMessage, m.GetEntityId(), m.GetProducerIncarnation(), m.GetSeqNr())
		}
		o.buffered = append(o.buffered, o.sequenced(m.GetSeqNr(), m.GetAck(), packed{url: m.GetMessage().GetTypeUrl(), value: m.GetMessage().GetValue()}))
		o.currentSeqNr++
		o.loadedSeqNr = m.GetSeqNr()
	}
	p.outs = outs
	for _, o := range p.sortedOuts(func(o *outState) bool { return len(o.buffered) > 0 }) {
		var sent outOutput
		o.releaseBuffered(now, &sent)
		out.merge(p.account(o, 0, sent))
	}
	return out, nil
}

// confirmedBehind queues the entity's confirmation for the durable queue,
// written behind.
func (p *producerState) confirmedBehind(o *outState, out outOutput, now time.Time) {
	if p.durable && out.confirmedCount > 0 {
		p.store.addConfirmed(&messages.Confirmed{EntityId: o.entityID, ProducerIncarnation: o.incarnation,
			SeqNr: o.confirmedSeqNr, TimestampMs: now.UnixMilli()})
	}
}

// lastAccepted is the seqNr accept gave entityID's last message.
func (p *producerState) lastAccepted(entityID string) int64 {
	if o := p.outs[entityID]; o != nil {
		return o.currentSeqNr - 1
	}
	return 0
}

// account keeps the shared buffer count and the counters after a transition.
func (p *producerState) account(o *outState, bufferedBefore int, out outOutput) outOutput {
	p.buffered += len(o.buffered) - bufferedBefore
	p.counters.Sent += int64(len(out.send))
	p.counters.Resent += int64(len(out.resend))
	p.counters.Confirmed += out.confirmedCount
	return out
}

// lookup finds the out-state a reply from an entity is for: a reply for an
// unknown entity or another incarnation is from before a cleanup or a
// restart of this producer, and is ignored.
func (p *producerState) lookup(kind, entityID string, incarnation uint64) (*outState, error) {
	o := p.outs[entityID]
	if o == nil {
		return nil, fmt.Errorf("%s for entity %q: %w", kind, entityID, errUnknownEntity)
	}
	if o.incarnation != incarnation {
		return nil, fmt.Errorf("%s for entity %q: incarnation %d, current %d: %w", kind, entityID, incarnation, o.incarnation, errStaleIncarnation)
	}
	return o, nil
}

// forSending makes m, a message out.send holds, the form it goes in (see
// outState.forSending); remote: its entity runs on another node.
func (p *producerState) forSending(m *messages.SequencedMessage, remote bool) (short bool, err error) {
	o, err := p.lookup("SequencedMessage", m.GetEntityId(), m.GetProducerIncarnation())
	if err != nil {
		return false, err
	}
	return o.forSending(m, remote), nil
}

// inFullFormFor makes m, numbered for msg (its Send's message) and not
// yet handed to the actor, the full form in place, as outState.forSending
// does, without looking m's numbering up: what goes with msg itself to an
// entity on this node, on the producer's busiest path. full, if not nil,
// is the Any Send made for m.
func (p *producerState) inFullFormFor(m *messages.SequencedMessage, msg proto.Message, full *anypb.Any) {
	if m.GetMessage() != nil {
		return
	}
	if full == nil {
		full = packed{url: p.limits.urls.of(msg), value: m.GetPayload()}.any()
	}
	inFullForm(m, full, p.controller)
}

// fullForm is m, a message of this producer, in full form (see
// outState.fullForm); m itself if its numbering is gone.
func (p *producerState) fullForm(m *messages.SequencedMessage) *messages.SequencedMessage {
	o, err := p.lookup("SequencedMessage", m.GetEntityId(), m.GetProducerIncarnation())
	if err != nil {
		return m
	}
	return o.fullForm(m)
}

func (p *producerState) onRequest(r *messages.Request, now time.Time) (outOutput, error) {
	o, err := p.lookup("Request", r.GetEntityId(), r.GetProducerIncarnation())
	if err != nil {
		return outOutput{}, err
	}
	before := len(o.buffered)
	out, err := o.onRequest(r, now)
	if err != nil {
		return outOutput{}, fmt.Errorf("entity %q: %w", o.entityID, err)
	}
	p.confirmedBehind(o, out, now)
	return p.account(o, before, out), nil
}

func (p *producerState) onAck(a *messages.Ack, now time.Time) (outOutput, error) {
	o, err := p.lookup("Ack", a.GetEntityId(), a.GetProducerIncarnation())
	if err != nil {
		return outOutput{}, err
	}
	before := len(o.buffered)
	out, err := o.onAck(a, now)
	if err != nil {
		return outOutput{}, fmt.Errorf("entity %q: %w", o.entityID, err)
	}
	p.confirmedBehind(o, out, now)
	return p.account(o, before, out), nil
}

func (p *producerState) onResend(r *messages.Resend) (outOutput, error) {
	o, err := p.lookup("Resend", r.GetEntityId(), r.GetProducerIncarnation())
	if err != nil {
		return outOutput{}, err
	}
	out, err := o.onResend(r)
	if err != nil {
		return outOutput{}, fmt.Errorf("entity %q: %w", o.entityID, err)
	}
	return p.account(o, len(o.buffered), out), nil
}

// sortedOuts are the out-states in entity ID order, so that the outputs of
// ticks are deterministic.
func (p *producerState) sortedOuts(keep func(*outState) bool) []*outState {
	var outs []*outState
	for _, o := range p.outs {
		if keep(o) {
			outs = append(outs, o)
		}
	}
	sort.Slice(outs, func(i, j int) bool { return outs[i].entityID < outs[j].entityID })
	return outs
}

// needsResendFirst: some first message is unconfirmed, so the actor keeps
// its ResendFirstInterval timer.
func (p *producerState) needsResendFirst() bool {
	for _, o := range p.outs {
		if o.needsResendFirst() {
			return true
		}
	}
	return false
}

// onResendFirstTick runs every ResendFirstInterval.
func (p *producerState) onResendFirstTick() outOutput {
	var out outOutput
	for _, o := range p.sortedOuts((*outState).needsResendFirst) {
		out.merge(p.account(o, len(o.buffered), o.onResendFirstTick()))
	}
	return out
}

// onIdleTick runs every half ResendFirstUnconfirmedIdleTimeout.
func (p *producerState) onIdleTick(now time.Time) outOutput {
	var out outOutput
	idle := p.settings.ResendFirstUnconfirmedIdleTimeout
	for _, o := range p.sortedOuts(func(o *outState) bool { return len(o.unconfirmed) > 0 }) {
		out.merge(p.account(o, len(o.buffered), o.onIdleTick(now, idle)))
	}
	return out
}

// cleanup forgets the out-states unused for CleanupUnusedAfter and returns
// their entity IDs in order.
func (p *producerState) cleanup(now time.Time) []string {
	after := p.settings.CleanupUnusedAfter
	var removed []string
	for _, o := range p.sortedOuts(func(o *outState) bool { return o.unused(now, after) }) {
		delete(p.outs, o.entityID)
		removed = append(removed, o.entityID)
	}
	if p.durable && len(removed) > 0 {
		p.store.addCleanup(removed)
	}
	return removed
}

// stop refuses further messages (ErrProducerStopped); what is unconfirmed
// or buffered is still delivered until the actor gives up.
func (p *producerState) stop() { p.stopping = true }

// undelivered lists, in entity and seq order, what was accepted and not
// confirmed: what becomes dead letters when the producer stops without a
// durable queue. With only-flow-control entities the sent ones are not kept
// and cannot be listed.
func (p *producerState) undelivered() []*messages.SequencedMessage {
	var ms []*messages.SequencedMessage
	for _, o := range p.sortedOuts(func(o *outState) bool { return len(o.unconfirmed)+len(o.buffered) > 0 }) {
		ms = o.resendFrom(ms, 0)
		for _, m := range o.buffered {
			ms = append(ms, o.fullForm(m))
		}
	}
	return ms
}

// entitiesWithDemand is RequestNext's entitiesWithDemand: the entities a
// message would go to at once, in order.
func (p *producerState) entitiesWithDemand() []string {
	var ids []string
	for _, o := range p.sortedOuts((*outState).hasDemand) {
		ids = append(ids, o.entityID)
	}
	return ids
}

// bufferedForEntitiesWithoutDemand is RequestNext's map of the same name.
func (p *producerState) bufferedForEntitiesWithoutDemand() map[string]int {
	m := make(map[string]int)
	for id, o := range p.outs {
		if len(o.buffered) > 0 {
			m[id] = len(o.buffered)
		}
	}
	return m
}

func (p *producerState) stats() ProducerStats {
	s := p.counters
	s.Entities = len(p.outs)
	s.Buffered = p.buffered
	for _, o := range p.outs {
		s.Unconfirmed += len(o.unconfirmed)
	}
	return s
}
