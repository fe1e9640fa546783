package actorsharding_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/metrics"
	"github.com/protoshard/protoshard/internal/raceflag"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/membership/local"
	"github.com/protoshard/protoshard/testkit"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// histogramCount is how many values the histogram name recorded, over
// all its attribute sets, as reader collects them now.
func histogramCount(t *testing.T, reader *sdkmetric.ManualReader, name string) uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == name {
				for _, p := range h.DataPoints {
					n += p.Count
				}
			}
		}
	}
	return n
}

// TestHandOffMetrics: a second node takes shards from the first (their
// hand-offs and the rebalances are timed on the first, the coordinator's
// node), and the first node's leave hands the coordinator singleton over
// (timed on the second).
func TestHandOffMetrics(t *testing.T) {
	if raceflag.Enabled {
		t.Skip("two remotes in one process race on grpc's global logger")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	registry := local.NewRegistry()
	type node struct {
		reader   *sdkmetric.ManualReader
		system   *actor.ActorSystem
		sharding *actorsharding.Sharding
	}
	props := actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*testpb.Ping); ok && ctx.Sender() != nil {
			ctx.Respond(&testpb.Pong{EntityId: m.EntityId, Seq: m.Seq})
		}
	})
	start := func() node {
		reader := sdkmetric.NewManualReader()
		system := actor.NewActorSystem(actor.WithMetricProviders(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
		t.Cleanup(system.Shutdown)
		s, err := actorsharding.Join(ctx, system, actorsharding.WithMembership(registry.Provider()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Leave(context.Background()) })
		if _, err := s.StartRegion("Metered", props, actorsharding.NewHashCodeMessageExtractor(10),
			actorsharding.WithRebalanceInterval(200*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		return node{reader, system, s}
	}
	a := start()
	for i := range 40 {
		ref, err := a.sharding.EntityRefFor("Metered", fmt.Sprintf("e-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ref.Request(t.Context(), &testpb.Ping{Seq: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if n := histogramCount(t, a.reader, metrics.NameHandOff); n != 0 {
		t.Fatalf("%d hand-offs timed on one node alone, want 0", n)
	}
	b := start()
	testkit.WaitFor(t, 60*time.Second, func() bool {
		return histogramCount(t, a.reader, metrics.NameHandOff) > 0 && histogramCount(t, a.reader, metrics.NameRebalance) > 0
	}, "the first node to time a hand-off and a rebalance")
	if err := a.sharding.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 60*time.Second, func() bool { return histogramCount(t, b.reader, metrics.NameSingletonHandOv) > 0 },
		"the second node to time the coordinator's hand-over")
}
