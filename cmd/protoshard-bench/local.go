package main

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/testpb"
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
	refs := make([]actorsharding.EntityRef, len(msgs))
	for i, m := range msgs {
		if refs[i], err = n.sharding.EntityRefFor("BenchLocal", m.EntityId); err != nil {
			return err
		}
	}
	anon := withoutIDs(msgs)
	var regionRates, refRates, anonRefRates, directRates series
	err = interleave(cfg.reps, regionRates.side("through the region", func() (float64, error) {
		return sendRate(ctx, n.system, count, cfg.messages, msgs, func(int) *actor.PID { return region })
	}), refRates.side("through EntityRefs", func() (float64, error) {
		return refRate(ctx, count, cfg.messages, msgs, refs)
	}), anonRefRates.side("through EntityRefs, without the IDs", func() (float64, error) {
		return refRate(ctx, count, cfg.messages, anon, refs)
	}), directRates.side("direct", func() (float64, error) {
		return sendRate(ctx, n.system, count, cfg.messages, msgs, func(i int) *actor.PID { return direct[i] })
	}))
	if err != nil {
		return err
	}
	for _, f := range []struct {
		how   string
		rates series
	}{{"", regionRates}, {" through EntityRefs", refRates}} {
		rep.add(paired(figure{
			Section:        "local",
			Workload:       fmt.Sprintf("fire-and-forget%s to %d entities, one node, %s", f.how, cfg.entities, runsText(cfg.reps)),
			Unit:           "msgs/s",
			BaselineName:   "direct Send to the actors' PIDs",
			HigherIsBetter: true,
		}, f.rates, directRates))
	}
	rep.add(paired(withoutIDsFigure("local", "one node", cfg), anonRefRates, refRates))
	return nil
}

// withoutIDsFigure is the figure of EntityRef.Send of messages without
// the entity ID, against the same with the ID, to cfg.entities entities
// where ("one node", "on another process").
func withoutIDsFigure(section, where string, cfg config) figure {
	return figure{
		Section: section,
		Workload: fmt.Sprintf("fire-and-forget through EntityRefs, messages without the entity ID, to %d entities, %s, %s",
			cfg.entities, where, runsText(cfg.reps)),
		Unit:           "msgs/s",
		BaselineName:   "EntityRef.Send of the messages with the ID",
		HigherIsBetter: true,
	}
}

// withoutIDs are copies of msgs with no entity ID, for EntityRefs (Akka
// typed's messages name no entity).
func withoutIDs(msgs []*testpb.Ping) []*testpb.Ping {
	out := make([]*testpb.Ping, len(msgs))
	for i, m := range msgs {
		out[i] = &testpb.Ping{Seq: m.Seq, From: m.From}
	}
	return out
}

// refRate is sendRate through an EntityRef per entity.
func refRate(ctx context.Context, count *counter, n int, msgs []*testpb.Ping, refs []actorsharding.EntityRef) (float64, error) {
	done := count.expect(int64(n))
	start := time.Now()
	for i := range n {
		e := i % len(msgs)
		if err := refs[e].Send(msgs[e]); err != nil {
			return 0, err
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		return 0, fmt.Errorf("only %d of %d messages arrived: %w", count.n.Load(), n, ctx.Err())
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
