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
	"github.com/protoshard/protoshard/internal/coordinator"
	"github.com/protoshard/protoshard/membership/local"
	"github.com/protoshard/protoshard/shardactor"
	"github.com/protoshard/protoshard/singleton"
)

// benchRecovery: the coordinator of a type starts with a stored state that
// places cfg.recoveryShards remembered shards on the region of a member
// that is gone (it crashed); it ends that region and allocates the shards
// to the live one, at once, without waiting for messages
// (remember-entities). The figure is the time from the start of the live
// region (and with it the coordinator) until the store confirms the write
// whose state places every shard on it, with the state in Consul KV; the
// baseline, the same with the state in memory, so that the ratio is what
// the Consul reads and writes add. The medians of cfg.recoveryRounds
// rounds of each, interleaved (the machine's speed swings between rounds),
// and of the rounds' ratios.
//
// The end is taken where the coordinator learns it (the store's Save
// returns), not by asking the coordinator for its state: such a question
// waits in the coordinator's mailbox behind the ShardStarted of every
// shard the region starts meanwhile, which added 2 to 27 ms at random to
// either side, more than the Consul writes themselves. Everything the
// coordinator does until it could act on the written state counts: its
// start, the state read, the claim, the region's registration, the
// allocations and every write.
//
// A warm-up round of each side, not counted, runs first: the first round
// of each side ran two to five times slower than its median (the heap
// grows, the allocation and encoding code runs cold), on both sides.
func benchRecovery(ctx context.Context, cfg config, rep *report) error {
	agent, err := startConsul()
	if err != nil {
		return err
	}
	defer agent.stop()
	var inConsul, inMemory series
	round := func(consul bool, label string) (float64, error) {
		typeName := recoveryType(label, consul)
		var store coordinatoractor.StateStore = coordinatoractor.NewMemoryStore()
		if consul {
			store = consulstore.NewStateStore(agent.client, local.DefaultName, typeName)
		}
		d, err := recoveryRound(ctx, cfg, store, typeName)
		return ms(d), err
	}
	for _, consul := range []bool{true, false} {
		if _, err := round(consul, "warm-up"); err != nil {
			return fmt.Errorf("warm-up round (state in Consul: %v): %w", consul, err)
		}
	}
	err = interleave(cfg.recoveryRounds,
		inConsul.side("state in Consul", func() (float64, error) { return round(true, strconv.Itoa(len(inConsul))) }),
		inMemory.side("state in memory", func() (float64, error) { return round(false, strconv.Itoa(len(inMemory))) }))
	if err != nil {
		return err
	}
	rep.add(paired(figure{
		Section:      "recovery",
		Workload:     fmt.Sprintf("allocate %d remembered shards after a crash (Consul), %s", cfg.recoveryShards, medianOf(cfg.recoveryRounds, "round", "rounds")),
		Unit:         "ms",
		BaselineName: "the same with the coordinator state in memory",
	}, inConsul, inMemory))
	if cfg.recoveryRounds >= recoveryTailRounds {
		rep.add(tail(figure{
			Section:      "recovery",
			Workload:     fmt.Sprintf("allocate %d remembered shards after a crash (Consul), p99 of %d rounds", cfg.recoveryShards, cfg.recoveryRounds),
			Unit:         "ms",
			BaselineName: "the p99 of the same rounds with the coordinator state in memory",
		}, 99, inConsul, inMemory))
	}
	return nil
}

// recoveryTailRounds is the fewest rounds that give the recovery's p99 a
// row: with fewer, the p99 is the slowest round.
const recoveryTailRounds = 50

// recoveryType is the entity type of one round (its number, or
// "warm-up"): a coordinator, a state key and a region of its own.
func recoveryType(round string, consul bool) string {
	return fmt.Sprintf("BenchRecovery-%s-%v", round, consul)
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
	st := coordinator.NewState(true)
	if err := st.Apply(coordinator.ShardRegionRegistered{Region: gone, MemberID: "gone-member"}); err != nil {
		return 0, err
	}
	for i := range cfg.recoveryShards {
		if err := st.Apply(coordinator.ShardHomeAllocated{Shard: strconv.Itoa(i), Region: gone}); err != nil {
			return 0, err
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, v, err := store.Load(sctx); err != nil || v != 0 {
		return 0, fmt.Errorf("the state store of %s holds version %d (%v), want an empty one", typeName, v, err)
	}
	if _, err := coordinator.SaveState(sctx, store, st, 0); err != nil {
		return 0, fmt.Errorf("storing the state before the crash: %w", err)
	}
	written := &writtenAt{StateStore: store, gone: coordinator.RegionKey(gone), shards: cfg.recoveryShards, at: make(chan time.Time, 1)}
	opts := []actorsharding.Option{
		actorsharding.WithStateStore(written),
		actorsharding.WithRememberEntities(shardactor.NewMemoryRememberEntitiesStore()),
		actorsharding.WithRetryInterval(200 * time.Millisecond),
		actorsharding.WithCoordinatorSingleton(singleton.WithHandOverRetryInterval(200 * time.Millisecond)),
		actorsharding.WithRebalanceInterval(time.Hour),
	}
	t0 := time.Now()
	if _, err := n.sharding.StartRegion(typeName, entityProps(&counter{}), actorsharding.NewHashCodeMessageExtractor(cfg.recoveryShards), opts...); err != nil {
		return 0, fmt.Errorf("start region: %w", err)
	}
	select {
	case at := <-written.at:
		return at.Sub(t0), nil
	case <-sctx.Done():
		return 0, fmt.Errorf("no written state places the %d shards on the live region: %w", cfg.recoveryShards, sctx.Err())
	}
}

// writtenAt is a StateStore that tells (on at, once) when a Save of a
// state that places every one of shards on regions other than gone
// returns successfully: the live region is the only other one.
type writtenAt struct {
	coordinatoractor.StateStore
	gone   string
	shards int
	at     chan time.Time
}

func (w *writtenAt) Save(ctx context.Context, data []byte, version uint64) (uint64, error) {
	v, err := w.StateStore.Save(ctx, data, version)
	if err != nil {
		return v, err
	}
	at := time.Now()
	if st, derr := coordinator.DecodeState(data); derr == nil && placedElsewhere(st, w.gone) == w.shards {
		select {
		case w.at <- at:
		default:
		}
	}
	return v, nil
}

// placedElsewhere counts the shards st places on a region other than gone.
func placedElsewhere(st coordinator.State, gone string) int {
	n := 0
	for _, region := range st.Shards {
		if region != gone {
			n++
		}
	}
	return n
}
