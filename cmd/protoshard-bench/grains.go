package main

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/backoff"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/membership/local"
)

const grainKind = "BenchGrain"

// benchGrains: proto.actor's own cluster, one member with the in-memory
// test provider and disthash identity lookup, a Kind of the same entity,
// against a protoshard region on a one-node cluster of its own, in this
// process too. Fire-and-forget looks the grain's PID up as cluster.Request
// does (the PID cache, cluster.Get on a miss: see grainPID) and Sends, as
// a grain has no Send of its own. A bare cluster.Get per message would be
// unfair to the grains: it skips the cache, and with disthash every call
// asks the placement actor. Request/response through cluster.Request.
// Each repetition measures the region, the grains and a direct Send /
// RequestFuture to the grains' PIDs (the grains' own baseline, kept as
// extra figures) back to back.
func benchGrains(ctx context.Context, cfg config, rep *report) error {
	count := &counter{}
	msgs := pings("grain", cfg.entities)
	n, err := startNode(ctx, "grains-region", local.NewRegistry().Provider())
	if err != nil {
		return err
	}
	defer n.stop()
	region, err := n.sharding.StartRegion("BenchGrainsRegion", entityProps(count), actorsharding.NewHashCodeMessageExtractor(cfg.shards))
	if err != nil {
		return fmt.Errorf("start region: %w", err)
	}
	if err := requestAll(n.system, msgs, func(int) *actor.PID { return region }); err != nil {
		return fmt.Errorf("warm-up through the region: %w", err)
	}

	system := newSystem("grains") // c.Shutdown shuts it down
	provider := test.NewTestProvider(test.NewInMemAgent())
	c := cluster.New(system, cluster.Configure("protoshard-bench", provider, disthash.New(),
		remote.Configure("127.0.0.1", 0),
		cluster.WithKinds(cluster.NewKind(grainKind, entityProps(count)))))
	c.StartMember() // sleeps a second for the topology
	defer c.Shutdown(false)

	request := func(i int) error {
		res, err := c.Request(msgs[i].EntityId, grainKind, msgs[i], cluster.WithTimeout(requestTimeout))
		if err != nil {
			return fmt.Errorf("%s: %w", msgs[i].EntityId, err)
		}
		if _, ok := res.(*testpb.Pong); !ok {
			return fmt.Errorf("%s answered %T", msgs[i].EntityId, res)
		}
		return nil
	}
	// Activate every grain; the topology may take a moment to settle.
	deadline := time.Now().Add(30 * time.Second)
	for i := range msgs {
		for {
			err := request(i)
			if err == nil {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("activating the grains: %w", err)
			}
			_ = backoff.Sleep(ctx, 100*time.Millisecond)
		}
	}
	direct := make([]*actor.PID, len(msgs))
	for i, m := range msgs {
		if direct[i] = c.Get(m.EntityId, grainKind); direct[i] == nil {
			return fmt.Errorf("no PID for grain %s", m.EntityId)
		}
	}

	samples := max(cfg.latencySamples, len(msgs))
	return compareGrains(cfg, rep, grainSides{
		rate: [3]func() (float64, error){
			func() (float64, error) {
				return sendRate(ctx, n.system, count, cfg.messages, msgs, func(int) *actor.PID { return region })
			},
			func() (float64, error) {
				return sendRate(ctx, system, count, cfg.messages, msgs, func(i int) *actor.PID { return grainPID(c, msgs[i].EntityId) })
			},
			func() (float64, error) {
				return sendRate(ctx, system, count, cfg.messages, msgs, func(i int) *actor.PID { return direct[i] })
			},
		},
		latency: [3]func() (p50, p99 float64, err error){
			func() (p50, p99 float64, err error) {
				return latencies(samples, func(i int) error { return ask(n.system, region, msgs[i%len(msgs)]) })
			},
			func() (p50, p99 float64, err error) {
				return latencies(samples, func(i int) error { return request(i % len(msgs)) })
			},
			func() (p50, p99 float64, err error) {
				return latencies(samples, func(i int) error { return ask(system, direct[i%len(msgs)], msgs[i%len(msgs)]) })
			},
		},
	}, grainTexts{
		section:       "grains",
		rate:          fmt.Sprintf("fire-and-forget to %d entities, one node", cfg.entities),
		grainRate:     fmt.Sprintf("fire-and-forget to %d grains, PID cache (cluster.Get on a miss) + Send", cfg.entities),
		request:       "request to a started entity, one node",
		grainRequest:  "cluster.Request",
		samples:       samples,
		grainSend:     "proto.actor grains, PID cache (cluster.Get on a miss) + Send",
		grainAsk:      "proto.actor cluster.Request",
		directSend:    "direct Send",
		directRequest: "direct RequestFuture",
	})
}

// grainSides are the three sides of a grains section's workloads: the
// region, the grains, and a direct Send / RequestFuture to the grains'
// PIDs, in this order; a fire-and-forget throughput and request
// latencies.
type grainSides struct {
	rate    [3]func() (float64, error)
	latency [3]func() (p50, p99 float64, err error)
}

// grainTexts are the words of a grains section's rows.
type grainTexts struct {
	section                   string // of the grains' own rows (the others are "vs grains")
	rate, grainRate           string // the throughput workload, of the region and of the grains
	request, grainRequest     string // the latency workload, of the region and of the grains
	samples                   int    // requests per latency measurement
	grainSend, grainAsk       string // the grains as the region's baseline
	directSend, directRequest string // the grains' own baseline
}

// compareGrains measures, in cfg.reps runs, the three sides back to back,
// the throughputs first, then the latencies, and adds the region against
// the grains as "vs grains" rows and the grains against the direct
// baseline as extra rows.
func compareGrains(cfg config, rep *report, s grainSides, t grainTexts) error {
	var rate [3]series
	if err := interleave(cfg.reps, rate[0].side("through the region", s.rate[0]),
		rate[1].side("grains", s.rate[1]), rate[2].side("direct", s.rate[2])); err != nil {
		return err
	}
	var lat [3]percentileSeries
	if err := interleave(cfg.reps, lat[0].side("requests through the region", s.latency[0]),
		lat[1].side("grain requests", s.latency[1]), lat[2].side("direct requests", s.latency[2])); err != nil {
		return err
	}
	runs := runsText(cfg.reps)
	rep.add(paired(figure{
		Section:        "vs grains",
		Workload:       fmt.Sprintf("%s, %s: region vs grains", t.rate, runs),
		Unit:           "msgs/s",
		BaselineName:   t.grainSend,
		HigherIsBetter: true,
	}, rate[0], rate[1]))
	rep.addExtra(paired(figure{
		Section: t.section, Workload: fmt.Sprintf("%s, %s", t.grainRate, runs),
		Unit: "msgs/s", BaselineName: t.directSend, HigherIsBetter: true,
	}, rate[1], rate[2]))
	for _, p := range []struct {
		name string
		of   func(percentileSeries) []float64
	}{{"p50", func(s percentileSeries) []float64 { return s.p50 }}, {"p99", func(s percentileSeries) []float64 { return s.p99 }}} {
		rep.add(paired(figure{
			Section:      "vs grains",
			Workload:     fmt.Sprintf("%s, %s of %d, %s: region vs grains", t.request, p.name, t.samples, runs),
			Unit:         "µs",
			BaselineName: t.grainAsk,
		}, p.of(lat[0]), p.of(lat[1])))
		rep.addExtra(paired(figure{
			Section: t.section, Workload: fmt.Sprintf("%s %s of %d, %s", t.grainRequest, p.name, t.samples, runs),
			Unit: "µs", BaselineName: t.directRequest,
		}, p.of(lat[1]), p.of(lat[2])))
	}
	return nil
}
