package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/internal/backoff"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/membership/local"
	"github.com/protoshard/protoshard/singleton"
)

// latencyShards is the number of shards of the first-message workload: so
// many that every sample can have a shard of its own.
const latencyShards = 1 << 20

// benchLatency: the first message to a never-seen shard (the region asks
// the coordinator, which allocates and stores the shard, the region starts
// it and the entity) against a request to an entity already started, both
// through the region; then the rebalance from 1 to 3 nodes.
func benchLatency(ctx context.Context, cfg config, rep *report, sh *shared) error {
	if err := firstMessage(ctx, cfg, rep, sh); err != nil {
		return err
	}
	return rebalance(ctx, cfg, rep)
}

func firstMessage(ctx context.Context, cfg config, rep *report, sh *shared) error {
	n, err := startNode(ctx, "latency", local.NewRegistry().Provider())
	if err != nil {
		return err
	}
	defer n.stop()
	ex := actorsharding.NewHashCodeMessageExtractor(latencyShards)
	region, err := n.sharding.StartRegion("BenchLatency", entityProps(&counter{}), ex)
	if err != nil {
		return fmt.Errorf("start region: %w", err)
	}
	// One entity in a shard of its own per sample, and one more to warm up
	// the region and the coordinator.
	seen := map[string]bool{}
	var msgs []*testpb.Ping
	for i := 0; len(msgs) < cfg.latencySamples+1; i++ {
		id := fmt.Sprintf("first-%d", i)
		if s := ex.ShardID(id); !seen[s] {
			seen[s] = true
			msgs = append(msgs, &testpb.Ping{EntityId: id, Seq: int64(i)})
		}
	}
	if err := ask(n.system, region, msgs[0]); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	msgs = msgs[1:]
	do := func(i int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return ask(n.system, region, msgs[i])
	}
	firstP50, firstP99, err := latencies(len(msgs), do)
	if err != nil {
		return fmt.Errorf("first messages: %w", err)
	}
	warmP50, warmP99, err := latencies(len(msgs), do)
	if err != nil {
		return fmt.Errorf("requests to started entities: %w", err)
	}
	for _, f := range []struct {
		p           string
		first, warm float64
	}{{"p50", firstP50, warmP50}, {"p99", firstP99, warmP99}} {
		rep.add(figure{
			Section:      "latency",
			Workload:     fmt.Sprintf("first request to a never-seen shard, %s of %d", f.p, len(msgs)),
			Unit:         "µs",
			Protoshard:   f.first,
			Baseline:     f.warm,
			BaselineName: "request to an entity already started, through the region",
		})
	}
	sh.regionReqP50, sh.regionReqP99, sh.haveRequestLat = warmP50, warmP99, true
	return nil
}

// rebalance places cfg.rebalanceShards shards on one node (timed: the
// baseline), then two nodes join and it times until the coordinator has
// spread the shards evenly over the three. A shard handed off is placed
// again on its next message, so a trickle of traffic (one message per
// shard every 20ms) goes on meanwhile.
func rebalance(ctx context.Context, cfg config, rep *report) error {
	const typeName = "BenchRebalance"
	registry := local.NewRegistry()
	store := coordinatoractor.NewMemoryStore()
	ex := actorsharding.NewHashCodeMessageExtractor(cfg.rebalanceShards)
	opts := []actorsharding.Option{
		actorsharding.WithStateStore(store),
		actorsharding.WithRebalanceInterval(cfg.rebalanceInterval),
		actorsharding.WithRetryInterval(200 * time.Millisecond),
		actorsharding.WithSingletonSettings(singleton.Settings{HandOverRetryInterval: 200 * time.Millisecond}),
	}
	props := entityProps(&counter{})
	var nodes []*node
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
	}()
	start := func(name string) (*node, *actor.PID, error) {
		n, err := startNode(ctx, name, registry.Provider())
		if err != nil {
			return nil, nil, err
		}
		nodes = append(nodes, n)
		region, err := n.sharding.StartRegion(typeName, props, ex, opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: start region: %w", name, err)
		}
		return n, region, nil
	}
	a, regionA, err := start("rebalance-a")
	if err != nil {
		return err
	}
	if err := waitRegions(ctx, a.system, regionA, 1); err != nil {
		return err
	}
	// One entity per shard.
	seen := map[string]bool{}
	var msgs []*testpb.Ping
	for i := 0; len(msgs) < cfg.rebalanceShards; i++ {
		id := fmt.Sprintf("rebalance-%d", i)
		if s := ex.ShardID(id); !seen[s] {
			seen[s] = true
			msgs = append(msgs, &testpb.Ping{EntityId: id, Seq: int64(i)})
		}
	}
	t0 := time.Now()
	if err := requestAll(a.system, msgs, func(int) *actor.PID { return regionA }); err != nil {
		return fmt.Errorf("placing the shards on one node: %w", err)
	}
	place := time.Since(t0)

	coordinator := actor.NewPID(a.system.Address(), actorsharding.CoordinatorManagerName(typeName)+"/singleton/coordinator")
	spread := func() ([]int, error) {
		res, err := a.system.Root.RequestFuture(coordinator, &coordinatoractor.GetCoordinatorState{}, 2*time.Second).Result()
		if err != nil {
			return nil, err
		}
		st, ok := res.(*coordinatoractor.CurrentCoordinatorState)
		if !ok {
			return nil, fmt.Errorf("the coordinator answered %T", res)
		}
		var out []int
		for _, r := range st.State.Regions {
			out = append(out, len(r.Shards))
		}
		return out, nil
	}
	if s, err := spread(); err != nil || len(s) != 1 || s[0] != cfg.rebalanceShards {
		return fmt.Errorf("before the rebalance the coordinator on the oldest node reports %v (%v), want [%d]", s, err, cfg.rebalanceShards)
	}

	t1 := time.Now()
	tctx, stopTraffic := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for tctx.Err() == nil {
			for _, m := range msgs {
				a.system.Root.Send(regionA, m)
			}
			_ = backoff.Sleep(tctx, 20*time.Millisecond)
		}
	}()
	defer func() {
		stopTraffic()
		wg.Wait()
	}()
	for _, name := range []string{"rebalance-b", "rebalance-c"} {
		if _, _, err := start(name); err != nil {
			return err
		}
	}
	var last []int
	for {
		s, err := spread()
		if err == nil {
			last = s
			if even(s, 3, cfg.rebalanceShards) {
				break
			}
		}
		if err := backoff.Sleep(ctx, 10*time.Millisecond); err != nil {
			return fmt.Errorf("shards not spread evenly (last %v): %w", last, err)
		}
	}
	took := time.Since(t1)
	rep.add(figure{
		Section:  "latency",
		Workload: fmt.Sprintf("rebalance %d shards from 1 to 3 nodes (interval %v)", cfg.rebalanceShards, cfg.rebalanceInterval),
		Unit:     "ms",
		Protoshard: float64(took) /
			float64(time.Millisecond),
		Baseline:     float64(place) / float64(time.Millisecond),
		BaselineName: fmt.Sprintf("placing the %d shards on one node from scratch", cfg.rebalanceShards),
	})
	return nil
}

// even: want regions hold every shard, none two more than another.
func even(counts []int, want, shards int) bool {
	if len(counts) != want {
		return false
	}
	total, lo, hi := 0, counts[0], counts[0]
	for _, c := range counts {
		total += c
		lo, hi = min(lo, c), max(hi, c)
	}
	return total == shards && hi-lo <= 1
}
