package delivery_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/actorsharding/delivery"
	"github.com/protoshard/protoshard/internal/testwait"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// gotEntity confirms every delivery at once and notes the messages it
// got, as they came.
type gotEntity struct {
	mu       *sync.Mutex
	got      *[]proto.Message
	consumer *delivery.ShardingConsumerController
}

func (e *gotEntity) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); ok {
		var err error
		e.consumer, err = delivery.NewShardingConsumerController(nil, func(ctx actor.Context, d delivery.Delivery) {
			e.mu.Lock()
			*e.got = append(*e.got, d.Message)
			e.mu.Unlock()
			_ = e.consumer.Confirm(ctx, d)
		})
		if err != nil {
			panic(err)
		}
		return
	}
	if e.consumer != nil {
		e.consumer.Receive(ctx)
	}
}

// TestEntityOnTheProducersNodeGetsTheMessageItself: on one node an
// entity gets the very message its producer's Send took, as an
// at-most-once EntityRef.Send gives it, not a copy decoded from the
// message's encoding; everything arrives once and in order, whatever
// went as the message itself and whatever went encoded (the first, which
// starts the entity, and what waited for the entity's demand).
func TestEntityOnTheProducersNodeGetsTheMessageItself(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := joinAlone(t, ctx, actor.NewActorSystem())
	var (
		mu  sync.Mutex
		got []proto.Message
	)
	props := actor.PropsFromProducer(func() actor.Actor { return &gotEntity{mu: &mu, got: &got} })
	if _, err := s.StartRegion("Got", props, actorsharding.NewHashCodeMessageExtractor(10)); err != nil {
		t.Fatal(err)
	}
	p, err := delivery.StartShardingProducerController(s, "Got", "p")
	if err != nil {
		t.Fatal(err)
	}
	delivered := func(k int) {
		t.Helper()
		testwait.For(t, 30*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) >= k
		}, "%d messages delivered", k)
	}
	// One at a time, each once the one before is delivered: the entity
	// runs and has demand, so each after the first goes as itself. Then
	// a burst, most of which waits for the entity's demand and goes
	// encoded.
	const oneByOne, n = 20, 200
	sent := make([]*wrapperspb.Int64Value, n)
	for i := range sent {
		sent[i] = wrapperspb.Int64(int64(i))
		if err := p.Send(ctx, "e", sent[i]); err != nil {
			t.Fatal(err)
		}
		if i < oneByOne {
			delivered(i + 1)
		}
	}
	delivered(n)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n {
		t.Fatalf("%d deliveries of %d messages", len(got), n)
	}
	itself, early := 0, 0
	for i, m := range got {
		if !proto.Equal(m, sent[i]) {
			t.Fatalf("delivery %d is %v, sent %v", i, m, sent[i])
		}
		if m == proto.Message(sent[i]) {
			itself++
			if i < oneByOne {
				early++
			}
		}
	}
	// The first starts the entity and goes the region's way, encoded; the
	// next may still find its shard's way busy, or the entity's demand on
	// its way. A message may always go encoded: that is only slower.
	if early < oneByOne/2 {
		t.Fatalf("%d of the first %d messages, sent one by one, went as themselves; want most", early, oneByOne)
	}
	t.Logf("%d of %d messages went as themselves", itself, n)
}
