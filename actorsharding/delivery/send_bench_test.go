package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/actorsharding/delivery"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/internal/testsupport"
)

// confirmingEntity confirms each delivery at once.
type confirmingEntity struct {
	consumer *delivery.ShardingConsumerController
}

func (e *confirmingEntity) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); ok {
		c, err := delivery.NewShardingConsumerController(nil, func(ctx actor.Context, d delivery.Delivery) {
			_ = e.consumer.Confirm(ctx, d)
		})
		if err != nil {
			panic(err)
		}
		e.consumer = c
		return
	}
	e.consumer.Receive(ctx)
}

// BenchmarkSendUntilConfirmed: reliable Sends on one node, round robin
// over 1,000 entities that confirm at once, until the producer counts all
// confirmed; ns/op, cpu-ns/op and allocs/op are per message, both sides.
func BenchmarkSendUntilConfirmed(b *testing.B) {
	const entities, halfWindow = 1000, 25
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer system.Shutdown()
	s, err := actorsharding.Join(ctx, system)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Leave(context.Background()) }()
	props := actor.PropsFromProducer(func() actor.Actor { return &confirmingEntity{} })
	if _, err := s.StartRegion("Bench", props, actorsharding.NewHashCodeMessageExtractor(10)); err != nil {
		b.Fatal(err)
	}
	p, err := delivery.StartShardingProducerController(s, "Bench", "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = p.Stop(context.Background()) }()
	msgs := make([]*testpb.Ping, entities)
	for i := range msgs {
		msgs[i] = &testpb.Ping{EntityId: fmt.Sprintf("e-%d", i), Seq: int64(i)}
	}
	// Whole half-windows per entity: the last confirmations come at once.
	full := 0 // Sends refused for a full buffer, tried again
	run := func(n int) {
		n = (n + entities*halfWindow - 1) / (entities * halfWindow) * entities * halfWindow
		before, err := p.Stats(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for i := range n {
			m := msgs[i%entities]
			for {
				err := p.Send(ctx, m.EntityId, m)
				if err == nil {
					break
				}
				if !errors.Is(err, delivery.ErrBufferFull) {
					b.Fatal(err)
				}
				full++
				time.Sleep(time.Millisecond)
			}
		}
		for {
			st, err := p.Stats(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if st.Confirmed >= before.Confirmed+int64(n) {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	run(entities * halfWindow) // every entity started
	b.ReportAllocs()
	b.ResetTimer()
	full = 0
	cpu0, cpuOK := testsupport.ProcessCPU()
	run(b.N)
	b.StopTimer() // not the stops deferred
	// CPU time, both sides: on a shared machine the wall time per
	// message says more about the other load than about this code.
	if cpu1, ok := testsupport.ProcessCPU(); ok && cpuOK {
		b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
	b.ReportMetric(float64(full)/float64(b.N), "full/op")
}
