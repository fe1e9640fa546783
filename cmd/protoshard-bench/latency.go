package main

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/internal/backoff"
	"github.com/protoshard/protoshard/internal/coordinator"
	"github.com/protoshard/protoshard/internal/shardingadmin"
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
func benchLatency(ctx context.Context, cfg config, rep *report) error {
	if err := firstMessage(ctx, cfg, rep); err != nil {
		return err
	}
	return benchRebalance(ctx, cfg, rep)
}

// firstMessage measures, in each of cfg.reps runs, cfg.latencySamples
// first requests to entities of shards never seen before, and as many
// second requests to entities that had their first. Each run's first
// requests go to a region (and so a coordinator) of its own: the
// coordinator stores its whole state on every allocation, so a first
// message costs more the more shards it already holds, and the runs would
// each start where the one before left off. The second requests go to the
// region of the first requests one run earlier (of an unmeasured round,
// for the first run): an entity's second request is slower than its later
// ones (12 vs 5 µs here), so each entity gets exactly one.
func firstMessage(ctx context.Context, cfg config, rep *report) error {
	n, err := startNode(ctx, "latency", local.NewRegistry().Provider())
	if err != nil {
		return err
	}
	defer n.stop()
	ex := actorsharding.NewHashCodeMessageExtractor(latencyShards)
	props := entityProps(&counter{})
	// One entity in a shard of its own per sample, and one more to warm up
	// a region and its coordinator.
	msgs := entitiesOfShards(ex, "first", cfg.latencySamples+1, nil)
	measure := func(region *actor.PID) (p50, p99 float64, err error) {
		return latencies(cfg.latencySamples, func(i int) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			return ask(n.system, region, msgs[i+1])
		})
	}
	var started []*actor.PID // regions whose entities had their first request
	firstRequests := func() (p50, p99 float64, err error) {
		region, err := n.sharding.StartRegion(fmt.Sprintf("BenchLatency-%d", len(started)), props, ex)
		if err != nil {
			return 0, 0, fmt.Errorf("start region: %w", err)
		}
		if err := ask(n.system, region, msgs[0]); err != nil {
			return 0, 0, fmt.Errorf("warm-up: %w", err)
		}
		p50, p99, err = measure(region)
		started = append(started, region)
		return p50, p99, err
	}
	// Unmeasured: the entities of the first run's second requests.
	if _, _, err := firstRequests(); err != nil {
		return fmt.Errorf("first messages: %w", err)
	}
	var first, second percentileSeries
	err = interleave(cfg.reps, first.side("first messages", firstRequests),
		second.side("second requests", func() (p50, p99 float64, err error) {
			return measure(started[len(second.p50)])
		}))
	if err != nil {
		return err
	}
	for _, f := range []struct {
		p           string
		first, warm []float64
	}{{"p50", first.p50, second.p50}, {"p99", first.p99, second.p99}} {
		rep.add(paired(figure{
			Section:      "latency",
			Workload:     fmt.Sprintf("first request to a never-seen shard, %s of %d, %s", f.p, cfg.latencySamples, runsText(cfg.reps)),
			Unit:         "µs",
			BaselineName: "request to an entity already started (its second request), through the region",
		}, f.first, f.warm))
	}
	return nil
}

// benchRebalance: cfg.reps rounds of rebalance, each on nodes of its own.
// In a round the placing (the baseline) necessarily comes first.
func benchRebalance(ctx context.Context, cfg config, rep *report) error {
	var took, place []float64
	for round := range cfg.reps {
		runtime.GC() // as interleave does: no round pays for the garbage of the one before
		t, p, err := rebalance(ctx, cfg)
		if err != nil {
			return fmt.Errorf("round %d: %w", round+1, err)
		}
		took, place = append(took, ms(t)), append(place, ms(p))
	}
	rep.add(paired(figure{
		Section:      "latency",
		Workload:     fmt.Sprintf("rebalance %d shards from 1 to 3 nodes (interval %v), %s", cfg.rebalanceShards, cfg.rebalanceInterval, runsText(cfg.reps)),
		Unit:         "ms",
		BaselineName: fmt.Sprintf("placing the %d shards on one node from scratch", cfg.rebalanceShards),
	}, took, place))
	return nil
}

// rebalance places cfg.rebalanceShards shards on one node (timed: the
// baseline), then two nodes join and it times until the coordinator has
// spread the shards evenly over the three. A shard handed off is placed
// again on its next message, so a trickle of traffic (one message per
// shard every 20ms) goes on meanwhile. It returns the rebalance's time and
// the placing's.
func rebalance(ctx context.Context, cfg config) (took, place time.Duration, err error) {
	const typeName = "BenchRebalance"
	registry := local.NewRegistry()
	store := coordinatoractor.NewMemoryStore()
	ex := actorsharding.NewHashCodeMessageExtractor(cfg.rebalanceShards)
	opts := rebalanceOptions(store, cfg.rebalanceInterval)
	props := entityProps(&counter{})
	var nodes []*node
	defer func() { stopNodes(nodes...) }()
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
		return 0, 0, err
	}
	if err := waitRegions(ctx, a.system, regionA, 1); err != nil {
		return 0, 0, err
	}
	msgs := entitiesOfShards(ex, "rebalance", cfg.rebalanceShards, nil) // one entity per shard
	t0 := time.Now()
	if err := requestAll(a.system, msgs, func(int) *actor.PID { return regionA }); err != nil {
		return 0, 0, fmt.Errorf("placing the shards on one node: %w", err)
	}
	place = time.Since(t0)

	coordPID := actor.NewPID(a.system.Address(), shardingadmin.CoordinatorManagerName(typeName)+"/singleton/coordinator")
	spread := func() ([]int, error) {
		res, err := a.system.Root.RequestFuture(coordPID, &coordinator.GetCoordinatorState{}, 2*time.Second).Result()
		if err != nil {
			return nil, err
		}
		st, ok := res.(*coordinator.CurrentCoordinatorState)
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
		return 0, 0, fmt.Errorf("before the rebalance the coordinator on the oldest node reports %v (%v), want [%d]", s, err, cfg.rebalanceShards)
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
			return 0, 0, err
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
			return 0, 0, fmt.Errorf("shards not spread evenly (last %v): %w", last, err)
		}
	}
	return time.Since(t1), place, nil
}

// rebalanceOptions are the options of the regions of a workload that
// rebalances every interval, their coordinator's state in store: retries
// and hand-overs at a fifth of a second, so that a lost message costs
// little of the measured time.
func rebalanceOptions(store coordinatoractor.StateStore, interval time.Duration) []actorsharding.Option {
	return []actorsharding.Option{
		actorsharding.WithStateStore(store),
		actorsharding.WithRebalanceInterval(interval),
		actorsharding.WithRetryInterval(200 * time.Millisecond),
		actorsharding.WithCoordinatorSingleton(singleton.WithHandOverRetryInterval(200 * time.Millisecond)),
	}
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
