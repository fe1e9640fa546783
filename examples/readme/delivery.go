package readme

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/actorsharding/delivery"
	"github.com/protoshard/protoshard/messages"
)

// startPayments is the producer side of docs/reliable-delivery.md.
func startPayments(ctx context.Context, sharding *actorsharding.Sharding) (*delivery.ShardingProducerController, error) {
	producer, err := delivery.StartShardingProducerController(sharding, "Account", "payments-1")
	if err != nil {
		return nil, err
	}
	// Send returns once the message is accepted: numbered, kept until confirmed.
	if err := producer.Send(ctx, "acc-42", wrapperspb.Int64(10)); err != nil {
		return producer, err
	}
	// SendWithConfirmation returns once the entity confirmed it.
	return producer, producer.SendWithConfirmation(ctx, "acc-42", wrapperspb.Int64(5))
}

// record is what the account store of docs/reliable-delivery.md keeps of
// one account: its balance, and the progress of reliable delivery stored
// with it.
type record struct {
	Balance  int64
	Progress *messages.ConsumerProgress
	Version  uint64
}

// accountStore is the account store of docs/reliable-delivery.md:
// compare-and-set writes on a version.
type accountStore interface {
	Load(id string) (record, error)
	CompareAndSave(id string, next record, version uint64) error
}

// reliableAccount is the entity of docs/reliable-delivery.md, with a
// consumer controller.
type reliableAccount struct {
	db       accountStore
	id       string
	rec      record
	consumer *delivery.ShardingConsumerController
}

func (a *reliableAccount) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); ok {
		if err := a.start(ctx); err != nil {
			ctx.Logger().Error("account: cannot start", "err", err)
			ctx.Stop(ctx.Self()) // what it was sent comes again to its next incarnation
		}
		return
	}
	if a.consumer.Receive(ctx) {
		return // reliable delivery's own message
	}
	// ... the entity's other messages
}

func (a *reliableAccount) start(ctx actor.Context) (err error) {
	if a.id, err = actorsharding.EntityID(ctx); err != nil {
		return err
	}
	if a.rec, err = a.db.Load(a.id); err != nil { // the state, and the progress stored with it
		return err
	}
	a.consumer, err = delivery.NewShardingConsumerController(a.rec.Progress, a.apply)
	return err
}

func (a *reliableAccount) apply(ctx actor.Context, d delivery.Delivery) {
	deposit, ok := d.Message.(*wrapperspb.Int64Value)
	if !ok {
		_ = a.consumer.Confirm(ctx, d) // not a deposit: nothing to store
		return
	}
	next := record{Balance: a.rec.Balance + deposit.GetValue(), Progress: a.consumer.ProgressAfter(d), Version: a.rec.Version + 1}
	// One write: the effect and the progress after it, compare-and-set on
	// the version loaded (a second incarnation's write fails).
	if err := a.db.CompareAndSave(a.id, next, a.rec.Version); err != nil {
		ctx.Stop(ctx.Self()) // never confirm what is not stored: it comes again
		return
	}
	a.rec = next
	_ = a.consumer.Confirm(ctx, d)
}
