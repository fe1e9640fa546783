package delivery_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/actorsharding/delivery"
	"github.com/protoshard/protoshard/internal/metrics"
	"github.com/protoshard/protoshard/testkit"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// collectInt64 is the value of every int64 counter and gauge, by name,
// summed over attribute sets.
func collectInt64(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] += p.Value
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] += p.Value
				}
			}
		}
	}
	return out
}

// TestDeliveryMetrics: the producer counts what it sent and what its
// entities confirmed, and its gauges show what waits: messages held by an
// entity that does not confirm, then nothing once it does.
func TestDeliveryMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reader := sdkmetric.NewManualReader()
	s := joinAlone(t, ctx, actor.NewActorSystem(actor.WithMetricProviders(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))))
	h := &holds{processed: map[string][]int64{}}
	props := actor.PropsFromProducer(func() actor.Actor { return &heldEntity{h: h} })
	if _, err := s.StartRegion("Metered", props, actorsharding.NewHashCodeMessageExtractor(10)); err != nil {
		t.Fatal(err)
	}
	l := newLedger()
	if _, err := s.StartRegion("MeteredFree", actor.PropsFromProducer(func() actor.Actor { return &entity{l: l} }),
		actorsharding.NewHashCodeMessageExtractor(10)); err != nil {
		t.Fatal(err)
	}
	idle := delivery.WithResendFirstUnconfirmedIdleTimeout(400 * time.Millisecond)
	held, err := delivery.StartShardingProducerController(s, "Metered", "p1", idle)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = held.Stop(context.Background()) })
	free, err := delivery.StartShardingProducerController(s, "MeteredFree", "p1", idle)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = free.Stop(context.Background()) })

	// 100 messages to 10 entities that confirm at once (whole half-windows
	// of 8, so that every confirmation is reported without a retry), and 5
	// to one that holds them.
	for seq := int64(1); seq <= 10; seq++ {
		for i := range 10 {
			if err := free.Send(ctx, fmt.Sprintf("e-%d", i), wrapperspb.Int64(seq)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for seq := int64(1); seq <= 5; seq++ {
		if err := held.Send(ctx, "a", wrapperspb.Int64(seq)); err != nil {
			t.Fatal(err)
		}
	}
	var got map[string]int64
	testkit.WaitFor(t, 30*time.Second, func() bool {
		got = collectInt64(t, reader)
		return got[metrics.NameDeliverySent] >= 105 && got[metrics.NameDeliveryConfirmed] >= 100 &&
			got[metrics.NameDeliveryUnconfirmed] == 5
	}, "105 sent, 100 confirmed, 5 unconfirmed: %v", testkit.Lazy(func() any { return got }))
	if got[metrics.NameDeliverySent] != 105 || got[metrics.NameDeliveryConfirmed] != 100 || got[metrics.NameDeliveryBuffered] != 0 {
		t.Fatalf("metrics %v, want 105 sent, 100 confirmed, nothing buffered", got)
	}

	ref, err := s.EntityRefFor("Metered", "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := ref.Send(release); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, func() bool {
		got = collectInt64(t, reader)
		return got[metrics.NameDeliveryConfirmed] == 105 && got[metrics.NameDeliveryUnconfirmed] == 0
	}, "105 confirmed, nothing unconfirmed: %v", testkit.Lazy(func() any { return got }))
}
