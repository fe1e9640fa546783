package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/protoshard/protoshard/internal/backoff"
	"github.com/protoshard/protoshard/internal/testpb"
)

const grainKind = "BenchGrain"

// benchGrains: proto.actor's own cluster, one member with the in-memory
// test provider and disthash identity lookup, a Kind of the same entity.
// Fire-and-forget looks the grain's PID up as cluster.Request does (the
// PID cache, cluster.Get on a miss: see grainPID) and Sends, as a grain
// has no Send of its own. A bare cluster.Get per message would be unfair
// to the grains: it skips the cache, and with disthash every call asks the
// placement actor. Request/response through cluster.Request.
// The grains are measured against a direct Send / RequestFuture to the
// same actors' PIDs (kept as extra figures), and protoshard's local
// figures (from the local and latency sections) against the grains'.
func benchGrains(ctx context.Context, cfg config, rep *report, sh *shared) error {
	if !sh.haveLocal || !sh.haveRequestLat {
		return errors.New("needs the local and latency sections (run them too)")
	}
	system := newSystem("grains") // c.Shutdown shuts it down
	count := &counter{}
	provider := test.NewTestProvider(test.NewInMemAgent())
	c := cluster.New(system, cluster.Configure("protoshard-bench", provider, disthash.New(),
		remote.Configure("127.0.0.1", 0),
		cluster.WithKinds(cluster.NewKind(grainKind, entityProps(count)))))
	c.StartMember() // sleeps a second for the topology
	defer c.Shutdown(false)

	msgs := pings("grain", cfg.entities)
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
	var grainRate, directRate float64
	for range rounds {
		g, err := sendRate(ctx, system, count, cfg.messages, msgs, func(i int) *actor.PID { return grainPID(c, msgs[i].EntityId) })
		if err != nil {
			return fmt.Errorf("grains: %w", err)
		}
		d, err := sendRate(ctx, system, count, cfg.messages, msgs, func(i int) *actor.PID { return direct[i] })
		if err != nil {
			return fmt.Errorf("direct: %w", err)
		}
		grainRate, directRate = max(grainRate, g), max(directRate, d)
	}
	samples := max(cfg.latencySamples, len(msgs))
	grainP50, grainP99, err := latencies(samples, func(i int) error { return request(i % len(msgs)) })
	if err != nil {
		return fmt.Errorf("grain requests: %w", err)
	}
	directP50, directP99, err := latencies(samples, func(i int) error { return ask(system, direct[i%len(msgs)], msgs[i%len(msgs)]) })
	if err != nil {
		return fmt.Errorf("direct requests: %w", err)
	}

	rep.add(figure{
		Section:        "vs grains",
		Workload:       fmt.Sprintf("fire-and-forget to %d entities, one node: region vs grains", cfg.entities),
		Unit:           "msgs/s",
		Protoshard:     sh.regionRate,
		Baseline:       grainRate,
		BaselineName:   "proto.actor grains, PID cache (cluster.Get on a miss) + Send",
		HigherIsBetter: true,
	})
	rep.add(figure{
		Section:      "vs grains",
		Workload:     "request to a started entity, one node, p50: region vs grains",
		Unit:         "µs",
		Protoshard:   sh.regionReqP50,
		Baseline:     grainP50,
		BaselineName: "proto.actor cluster.Request",
	})
	rep.add(figure{
		Section:      "vs grains",
		Workload:     "request to a started entity, one node, p99: region vs grains",
		Unit:         "µs",
		Protoshard:   sh.regionReqP99,
		Baseline:     grainP99,
		BaselineName: "proto.actor cluster.Request",
	})
	rep.addExtra(figure{
		Section: "grains", Workload: fmt.Sprintf("fire-and-forget to %d grains, PID cache (cluster.Get on a miss) + Send", cfg.entities),
		Unit: "msgs/s", Protoshard: grainRate, Baseline: directRate, BaselineName: "direct Send", HigherIsBetter: true,
	})
	rep.addExtra(figure{
		Section: "grains", Workload: "cluster.Request p50", Unit: "µs",
		Protoshard: grainP50, Baseline: directP50, BaselineName: "direct RequestFuture",
	})
	rep.addExtra(figure{
		Section: "grains", Workload: "cluster.Request p99", Unit: "µs",
		Protoshard: grainP99, Baseline: directP99, BaselineName: "direct RequestFuture",
	})
	return nil
}
