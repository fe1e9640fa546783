package main

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/actorsharding/delivery"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/messages"
)

// storeLockWait bounds how long an entity waits for its record's lock,
// held by another incarnation that may be frozen.
const storeLockWait = 2 * time.Second

// consumerOptions are the reliable entities' delivery options: retries
// from 500ms, so that a lost Request or Resend is noticed within the run.
var consumerOptions = []delivery.ConsumerOption{
	delivery.WithResendIntervalMin(500 * time.Millisecond), delivery.WithResendIntervalMax(5 * time.Second)}

// reliableEntity is the entity of a reliable run (-reliable): it takes the
// load generator's messages through a ShardingConsumerController and
// stores, per message, its effect and its delivery progress in one
// compare-and-set write of its record (entityRecord), which it restores
// when it starts. A write that fails (another incarnation wrote since
// this one read: it is a zombie; or the record stayed locked) stops the
// incarnation without confirming: the producer resends the message to the
// next one. It records its lifecycle and receipts as the plain entity
// does, and answers probes.
type reliableEntity struct {
	node   string
	ledger *ledger
	store  *casStore

	id, inc  string
	version  uint64
	rec      entityRecord
	consumer *delivery.ShardingConsumerController
	// failed: a write failed and the incarnation stops; nothing more is
	// applied or confirmed.
	failed bool
	// delivered is the last delivery handed over, to tell a message the
	// consumer discarded from one it delivered.
	delivered delivery.Delivery
}

func (e *reliableEntity) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		e.start(ctx)
	case *actor.Stopped:
		e.ledger.write(Record{Ev: evStop, Ent: e.id, Inc: e.inc})
	case *testpb.Ping:
		if msg.From == probeSender {
			answerProbe(ctx, e.ledger, e.node, e.id, e.inc, msg)
		}
	case *messages.SequencedMessage:
		if e.consumer == nil || e.failed {
			return // stopping: the producer resends it to the next incarnation
		}
		e.delivered = delivery.Delivery{}
		e.consumer.Receive(ctx)
		if e.delivered.ProducerID != msg.GetProducerId() || e.delivered.SeqNr != msg.GetSeqNr() {
			e.discarded(msg)
		}
	default:
		if e.consumer != nil {
			e.consumer.Receive(ctx) // its retry timer
		}
	}
}

func (e *reliableEntity) start(ctx actor.Context) {
	id, err := actorsharding.EntityID(ctx)
	if err != nil {
		id = ctx.Self().GetId()
	}
	e.id, e.inc = id, newIncarnation(e.node, ctx.Self())
	e.ledger.write(Record{Ev: evStart, Ent: e.id, Inc: e.inc})
	data, version, err := e.store.Load(e.id)
	var restored *messages.ConsumerProgress
	if err == nil {
		e.rec, err = decodeEntityRecord(data)
	}
	if err == nil {
		restored, err = e.rec.progress()
	}
	if err == nil {
		e.consumer, err = delivery.NewShardingConsumerController(restored, e.deliver, consumerOptions...)
	}
	if err != nil {
		e.fail(ctx, Record{Ev: evFenced, Ent: e.id, Inc: e.inc, Reason: "loading the record: " + err.Error()})
		return
	}
	e.version = version
}

// deliver applies one message: the effect and the progress in one write,
// then the ledger's receipt, then the confirmation. The receipt carries the
// time the entity began to apply the message: a node frozen in the middle
// of the write finishes it after the thaw, acting on what it had before the
// freeze (the compare-and-set decides whether that write still counts),
// and the judge must not take that for a message the frozen node took up
// after it resumed.
func (e *reliableEntity) deliver(ctx actor.Context, d delivery.Delivery) {
	began := time.Now().UnixNano()
	e.delivered = d
	p, ok := d.Message.(*testpb.Ping)
	if !ok {
		// Only the load generator produces; anything else would be a bug
		// of the run, which the missing receipt shows.
		e.fail(ctx, Record{Ev: evFenced, Ent: e.id, Inc: e.inc, Reason: fmt.Sprintf("delivered a %T", d.Message)})
		return
	}
	next, outcome := e.rec.apply(p.From, p.Seq)
	next, err := next.withProgress(e.consumer.ProgressAfter(d))
	var data []byte
	if err == nil {
		data, err = next.encode()
	}
	var version uint64
	if err == nil {
		version, err = e.store.CompareAndSet(e.id, e.version, data)
	}
	if err != nil {
		e.fail(ctx, Record{Ev: evFenced, Ent: e.id, Inc: e.inc, Snd: p.From, Seq: p.Seq, Reason: err.Error()})
		return
	}
	e.version, e.rec = version, next
	r := Record{T: began, Ev: evRecv, Ent: p.EntityId, Inc: e.inc, Snd: p.From, Seq: p.Seq}
	if outcome != appliedInOrder {
		r.Reason = string(outcome)
	}
	e.ledger.write(r)
	if err := e.consumer.Confirm(ctx, d); err != nil {
		ctx.Logger().Error("chaos entity: confirm refused", "entity", e.id, "error", err)
	}
}

// fail records why the incarnation stops, unconfirmed, and stops it.
func (e *reliableEntity) fail(ctx actor.Context, r Record) {
	e.failed = true
	e.ledger.write(r)
	ctx.Stop(ctx.Self())
}

// discarded records a message the consumer did not deliver: a duplicate
// of one this entity (or an earlier incarnation) applied, or one that
// came out of order and is resent. Protoshard publishes no dead letter
// for these (nothing is lost); the ledger has them for the report.
func (e *reliableEntity) discarded(m *messages.SequencedMessage) {
	inner, err := m.GetMessage().UnmarshalNew()
	p, ok := inner.(*testpb.Ping)
	if err != nil || !ok {
		return
	}
	r := Record{Ev: evDrop, Src: srcConsumer, Ent: p.EntityId, Snd: p.From, Seq: p.Seq, Reason: reasonNotYetApplied}
	if s := e.rec.Senders[p.From]; s != nil && p.Seq <= s.Last {
		r.Reason = reasonDuplicate
	}
	e.ledger.write(r)
}
