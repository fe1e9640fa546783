package main

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/backoff"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/membership/local"
)

// memBatch is how many entities are started at once (then waited for).
const memBatch = 10_000

// heap returns the live heap after a full collection.
func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// settledHeap is heap once it has stopped moving: the actor systems of the
// earlier sections are shut down, but their goroutines and timers may
// still be freeing memory for a moment, which would hide the growth being
// measured (seen in -short runs, where it is only a few MB). Both readings
// of a measurement take it, so that the last messages' garbage, still
// reachable for a moment from mailboxes being drained, counts for neither
// side.
func settledHeap(ctx context.Context) uint64 {
	const still = 256 << 10 // two readings this close: settled
	prev := heap()
	for range 20 {
		if backoff.Sleep(ctx, 50*time.Millisecond) != nil {
			break
		}
		cur := heap()
		if max(cur, prev)-min(cur, prev) < still {
			return cur
		}
		prev = cur
	}
	return prev
}

// benchMemory: heap per idle entity, N entities started through a region
// (one message each, then idle) against N bare actors spawned and sent one
// message each. The shards are started before the first reading, so the
// figure is per entity, not per shard.
func benchMemory(ctx context.Context, cfg config, rep *report) error {
	bare, err := bareActors(ctx, cfg.memEntities)
	if err != nil {
		return fmt.Errorf("bare actors: %w", err)
	}
	sharded, err := shardedEntities(ctx, cfg)
	if err != nil {
		return fmt.Errorf("sharded entities: %w", err)
	}
	rep.add(paired(figure{
		Section:      "memory",
		Workload:     fmt.Sprintf("heap per idle entity, %d entities", cfg.memEntities),
		Unit:         "bytes",
		BaselineName: "bare actor spawned with the same props",
	}, []float64{sharded}, []float64{bare}))
	return nil
}

func bareActors(ctx context.Context, n int) (float64, error) {
	system := newSystem("memory-bare")
	defer system.Shutdown()
	count := &counter{}
	props := entityProps(count)
	msg := &testpb.Ping{EntityId: "bare"}
	before := settledHeap(ctx)
	for from := 0; from < n; from += memBatch {
		to := min(from+memBatch, n)
		done := count.expect(int64(to - from))
		for range to - from {
			system.Root.Send(system.Root.Spawn(props), msg)
		}
		select {
		case <-done:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	after := settledHeap(ctx)
	return perEntity(before, after, n)
}

func shardedEntities(ctx context.Context, cfg config) (float64, error) {
	nd, err := startNode(ctx, "memory-sharded", local.NewRegistry().Provider())
	if err != nil {
		return 0, err
	}
	defer nd.stop()
	count := &counter{}
	ex := actorsharding.NewHashCodeMessageExtractor(cfg.shards)
	region, err := nd.sharding.StartRegion("BenchMemory", entityProps(count), ex)
	if err != nil {
		return 0, fmt.Errorf("start region: %w", err)
	}
	// Start every shard (with one entity of its own) before measuring.
	seen := map[string]bool{}
	var warm []*testpb.Ping
	for i := 0; len(warm) < cfg.shards; i++ {
		id := fmt.Sprintf("warm-%d", i)
		if s := ex.ShardID(id); !seen[s] {
			seen[s] = true
			warm = append(warm, &testpb.Ping{EntityId: id})
		}
	}
	if err := requestAll(nd.system, warm, func(int) *actor.PID { return region }); err != nil {
		return 0, fmt.Errorf("warm-up: %w", err)
	}
	before := settledHeap(ctx)
	for from := 0; from < cfg.memEntities; from += memBatch {
		to := min(from+memBatch, cfg.memEntities)
		done := count.expect(int64(to - from))
		for i := from; i < to; i++ {
			nd.system.Root.Send(region, &testpb.Ping{EntityId: fmt.Sprintf("mem-%d", i)})
		}
		select {
		case <-done:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	after := settledHeap(ctx)
	return perEntity(before, after, cfg.memEntities)
}

func perEntity(before, after uint64, n int) (float64, error) {
	if after <= before {
		return 0, fmt.Errorf("the heap did not grow (%d -> %d bytes)", before, after)
	}
	return float64(after-before) / float64(n), nil
}
