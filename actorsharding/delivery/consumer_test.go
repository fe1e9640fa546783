package delivery

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/staleness"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestConsumerRetryBacksOff: an entity that got and confirmed everything
// asks its producer again (a last message may have been lost) at growing
// intervals, from ResendIntervalMin up to ResendIntervalMax, not every
// ResendIntervalMin for ever.
func TestConsumerRetryBacksOff(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	var mu sync.Mutex
	var requests []time.Time
	producer := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*messages.Request); ok {
			mu.Lock()
			requests = append(requests, time.Now())
			mu.Unlock()
		}
	}))
	opts := []ConsumerOption{WithResendIntervalMin(50 * time.Millisecond), WithResendIntervalMax(400 * time.Millisecond)}
	entity := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		var c *ShardingConsumerController
		return actor.ReceiveFunc(func(ctx actor.Context) {
			if _, ok := ctx.Message().(*actor.Started); ok {
				c, _ = NewShardingConsumerController(nil, func(ctx actor.Context, d Delivery) { _ = c.Confirm(ctx, d) }, opts...)
				return
			}
			c.Receive(ctx)
		})
	}))
	payload, err := anypb.New(wrapperspb.Int64(1))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	system.Root.Send(entity, &messages.SequencedMessage{EntityId: "e", ProducerId: "p", ProducerIncarnation: 1, SeqNr: 1,
		First: true, ProducerController: producer, Message: payload})
	time.Sleep(2 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	// Two Requests for the first message (accepted, confirmed), then the
	// retries: after 50, 100, 200, 400, 400, ... ms of quiet (+10% jitter),
	// about 6 in two seconds; at the minimum they would be about 40.
	retries := len(requests) - 2
	if retries < 3 || retries > 9 {
		t.Fatalf("%d retry Requests in %v, want 3 to 9", retries, time.Since(start).Round(time.Millisecond))
	}
	for i := 5; i < len(requests); i++ { // from the fourth retry on
		if gap := requests[i].Sub(requests[i-1]); gap < 300*time.Millisecond {
			t.Fatalf("retry %d came %v after the one before; want the interval grown to about 400ms", i-2, gap)
		}
	}
}

// TestConsumerDeliversNothingWhileMemberStale: once the node's membership
// is stale (paused or cut off past its failure detection timeout), a
// message the entity got is not delivered: the entity stops, unconfirmed,
// with a dead-letter event, so that only its incarnation elsewhere
// processes it.
func TestConsumerDeliversNothingWhileMemberStale(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	var stale atomic.Bool
	staleness.Set(system, stale.Load)
	dropped := make(chan *deadletter.Event, 4)
	sub := system.EventStream.Subscribe(func(e any) {
		if d, ok := e.(*deadletter.Event); ok {
			dropped <- d
		}
	})
	defer system.EventStream.Unsubscribe(sub)
	producer := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	var mu sync.Mutex
	var delivered []int64
	entity := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		var c *ShardingConsumerController
		return actor.ReceiveFunc(func(ctx actor.Context) {
			if _, ok := ctx.Message().(*actor.Started); ok {
				c, _ = NewShardingConsumerController(nil, func(ctx actor.Context, d Delivery) {
					mu.Lock()
					delivered = append(delivered, d.SeqNr)
					mu.Unlock()
					_ = c.Confirm(ctx, d)
				})
				return
			}
			c.Receive(ctx)
		})
	}))
	payload, err := anypb.New(wrapperspb.Int64(1))
	if err != nil {
		t.Fatal(err)
	}
	seq := func(n int64) *messages.SequencedMessage {
		return &messages.SequencedMessage{EntityId: "e", ProducerId: "p", ProducerIncarnation: 1, SeqNr: n,
			First: n == 1, ProducerController: producer, Message: payload}
	}
	processed := func() []int64 {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(delivered)
	}
	system.Root.Send(entity, seq(1))
	deadline := time.Now().Add(10 * time.Second)
	for len(processed()) < 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	stale.Store(true)
	system.Root.Send(entity, seq(2))
	select {
	case d := <-dropped:
		if m, ok := d.Message.(*messages.SequencedMessage); !ok || m.GetSeqNr() != 2 {
			t.Fatalf("dead letter of %v, want seqNr 2", d.Message)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no dead letter for the message that came while stale")
	}
	for time.Now().Before(deadline) {
		if _, alive := system.ProcessRegistry.GetLocal(entity.Id); !alive {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, alive := system.ProcessRegistry.GetLocal(entity.Id); alive {
		t.Fatal("the entity still runs on a stale node")
	}
	if got := processed(); !slices.Equal(got, []int64{1}) {
		t.Fatalf("delivered %v, want only [1]: nothing once stale", got)
	}
}

// TestConsumerCopiesALocalShortForm: a short form from a producer on this
// node (routed through the region, so the producer's own object) is not
// changed by the consumer, which notes its sender in a copy.
func TestConsumerCopiesALocalShortForm(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	payload, err := anypb.New(wrapperspb.Int64(1))
	if err != nil {
		t.Fatal(err)
	}
	delivered := make(chan Delivery, 4)
	entity := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		var c *ShardingConsumerController
		return actor.ReceiveFunc(func(ctx actor.Context) {
			if _, ok := ctx.Message().(*actor.Started); ok {
				c, _ = NewShardingConsumerController(nil, func(ctx actor.Context, d Delivery) {
					delivered <- d
					_ = c.Confirm(ctx, d)
				})
				return
			}
			c.Receive(ctx)
		})
	}))
	kept := &messages.SequencedMessage{EntityId: "e", ProducerId: "p", ProducerIncarnation: 1, SeqNr: 2, TypeId: 1, Payload: payload.GetValue()}
	before := proto.Clone(kept)
	producer := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*actor.Started); ok {
			ctx.Send(entity, &messages.SequencedMessage{EntityId: "e", ProducerId: "p", ProducerIncarnation: 1, SeqNr: 1,
				First: true, ProducerController: ctx.Self(), Message: payload, TypeId: 1})
			ctx.Request(entity, kept) // the sender goes with it, as the short form's
		}
	}))
	defer system.Root.Stop(producer)
	for i := range 2 {
		select {
		case d := <-delivered:
			if d.SeqNr != int64(i+1) {
				t.Fatalf("delivered seqNr %d, want %d", d.SeqNr, i+1)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of 2 messages delivered", i)
		}
	}
	if !proto.Equal(kept, before) {
		t.Fatalf("the producer's short form changed to %v", kept)
	}
}
