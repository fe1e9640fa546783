package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/actorsharding/consulstore"
	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/internal/backoff"
	"github.com/protoshard/protoshard/membership/local"
	"github.com/protoshard/protoshard/shardactor"
	"github.com/protoshard/protoshard/singleton"
)

// benchRecovery: the coordinator of a type starts with a stored state that
// places cfg.recoveryShards remembered shards on the region of a member
// that is gone (it crashed); it ends that region and allocates the shards
// to the live one, at once, without waiting for messages
// (remember-entities). The figure is the time from the start of the live
// region (and with it the coordinator) until the written state places
// every shard on it, with the state in Consul KV; the baseline, the same
// with the state in memory, so that the ratio is what the Consul writes
// add. The medians of cfg.recoveryRounds rounds of each, interleaved (the
// machine's speed swings between rounds), and of the rounds' ratios.
func benchRecovery(ctx context.Context, cfg config, rep *report) error {
	agent, err := startConsul()
	if err != nil {
		return err
	}
	defer agent.stop()
	var inConsul, inMemory series
	round := func(consul bool, done int) (float64, error) {
		typeName := recoveryType(done, consul)
		var store coordinatoractor.StateStore = coordinatoractor.NewMemoryStore()
		if consul {
			store = consulstore.NewStateStore(agent.client, local.DefaultName, typeName)
		}
		d, err := recoveryRound(ctx, cfg, store, typeName)
		return ms(d), err
	}
	err = interleave(cfg.recoveryRounds,
		inConsul.side("state in Consul", func() (float64, error) { return round(true, len(inConsul)) }),
		inMemory.side("state in memory", func() (float64, error) { return round(false, len(inMemory)) }))
	if err != nil {
		return err
	}
	rep.add(paired(figure{
		Section:      "recovery",
		Workload:     fmt.Sprintf("allocate %d remembered shards after a crash (Consul), %s", cfg.recoveryShards, medianOf(cfg.recoveryRounds, "round", "rounds")),
		Unit:         "ms",
		BaselineName: "the same with the coordinator state in memory",
	}, inConsul, inMemory))
	return nil
}

// recoveryType is the entity type of one round: a coordinator, a state
// key and a region of its own.
func recoveryType(round int, consul bool) string {
	return fmt.Sprintf("BenchRecovery-%d-%v", round, consul)
}

// recoveryRound stores the state a coordinator finds after a crash (the
// gone member's region hosts every shard), starts a node with a region of
// typeName, and returns the time until the state written in store places
// every shard on that region.
func recoveryRound(ctx context.Context, cfg config, store coordinatoractor.StateStore, typeName string) (time.Duration, error) {
	n, err := startNode(ctx, "recovery", local.NewRegistry().Provider())
	if err != nil {
		return 0, err
	}
	defer n.stop()
	// On this node's address, so that ending it sends nothing over the
	// network; its member never joined this cluster.
	gone := actor.NewPID(n.system.Address(), "gone-region")
	st := coordinatoractor.NewState(true)
	if err := st.Apply(coordinatoractor.ShardRegionRegistered{Region: gone, MemberID: "gone-member"}); err != nil {
		return 0, err
	}
	for i := range cfg.recoveryShards {
		if err := st.Apply(coordinatoractor.ShardHomeAllocated{Shard: strconv.Itoa(i), Region: gone}); err != nil {
			return 0, err
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, v, err := store.Load(sctx); err != nil || v != 0 {
		return 0, fmt.Errorf("the state store of %s holds version %d (%v), want an empty one", typeName, v, err)
	}
	if _, err := store.Save(sctx, st, 0); err != nil {
		return 0, fmt.Errorf("storing the state before the crash: %w", err)
	}
	opts := []actorsharding.Option{
		actorsharding.WithStateStore(store),
		actorsharding.WithRememberEntities(shardactor.NewMemoryRememberEntitiesStore()),
		actorsharding.WithRetryInterval(200 * time.Millisecond),
		actorsharding.WithSingletonSettings(singleton.Settings{HandOverRetryInterval: 200 * time.Millisecond}),
		actorsharding.WithRebalanceInterval(time.Hour),
	}
	coordinator := actor.NewPID(n.system.Address(), actorsharding.CoordinatorManagerName(typeName)+"/singleton/coordinator")
	t0 := time.Now()
	region, err := n.sharding.StartRegion(typeName, entityProps(&counter{}), actorsharding.NewHashCodeMessageExtractor(cfg.recoveryShards), opts...)
	if err != nil {
		return 0, fmt.Errorf("start region: %w", err)
	}
	live := coordinatoractor.RegionKey(region)
	last := -1
	for {
		res, err := n.system.Root.RequestFuture(coordinator, &coordinatoractor.GetCoordinatorState{}, time.Second).Result()
		if cur, ok := res.(*coordinatoractor.CurrentCoordinatorState); err == nil && ok {
			last = len(cur.State.Regions[live].Shards)
			if last == cfg.recoveryShards {
				return time.Since(t0), nil
			}
		}
		if err := backoff.Sleep(ctx, 5*time.Millisecond); err != nil {
			return 0, fmt.Errorf("the live region holds %d of %d shards: %w", last, cfg.recoveryShards, err)
		}
	}
}
