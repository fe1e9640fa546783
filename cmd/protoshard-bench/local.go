package main

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/membership/local"
)

// benchLocal: fire-and-forget messages/s through a region on one node to
// cfg.entities running entities, against the same messages sent straight
// to as many plain actors of the same entity type.
func benchLocal(ctx context.Context, cfg config, rep *report) error {
	n, err := startNode(ctx, "local", local.NewRegistry().Provider())
	if err != nil {
		return err
	}
	defer n.stop()
	count := &counter{}
	props := entityProps(count)
	region, err := n.sharding.StartRegion("BenchLocal", props, actorsharding.NewHashCodeMessageExtractor(cfg.shards))
	if err != nil {
		return fmt.Errorf("start region: %w", err)
	}
	msgs := pings("entity", cfg.entities)
	direct := make([]*actor.PID, len(msgs))
	for i := range direct {
		direct[i] = n.system.Root.Spawn(props)
	}
	// Warm up: every entity started and its shard's home known; every
	// plain actor has handled a message.
	if err := requestAll(n.system, msgs, func(int) *actor.PID { return region }); err != nil {
		return fmt.Errorf("warm-up through the region: %w", err)
	}
	if err := requestAll(n.system, msgs, func(i int) *actor.PID { return direct[i] }); err != nil {
		return fmt.Errorf("warm-up of the plain actors: %w", err)
	}
	var regionRates, directRates series
	err = interleave(cfg.reps, regionRates.side("through the region", func() (float64, error) {
		return sendRate(ctx, n.system, count, cfg.messages, msgs, func(int) *actor.PID { return region })
	}), directRates.side("direct", func() (float64, error) {
		return sendRate(ctx, n.system, count, cfg.messages, msgs, func(i int) *actor.PID { return direct[i] })
	}))
	if err != nil {
		return err
	}
	rep.add(paired(figure{
		Section:        "local",
		Workload:       fmt.Sprintf("fire-and-forget to %d entities, one node, %s", cfg.entities, runsText(cfg.reps)),
		Unit:           "msgs/s",
		BaselineName:   "direct Send to the actors' PIDs",
		HigherIsBetter: true,
	}, regionRates, directRates))
	return nil
}
