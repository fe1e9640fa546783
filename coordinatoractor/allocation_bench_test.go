package coordinatoractor

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/membership"
)

// Helpers carry a "bench" prefix: other files of this package are written
// concurrently.

const (
	benchRegions = 10
	benchShards  = 1000
)

// benchMember is the i-th (0-based) Up member.
func benchMember(i int) membership.Member {
	return membership.Member{
		ID:      fmt.Sprintf("m%d", i+1),
		Address: fmt.Sprintf("127.0.0.%d:1", i+1),
		Age:     uint64(i + 1),
		Status:  membership.Up,
	}
}

func benchRegion(i int) *actor.PID { return actor.NewPID(benchMember(i).Address, "region") }

// benchCounts are the shard counts of the benchmark's regions: unbalanced,
// region 0 has half of the 1000 shards and the other nine share the rest
// (56 or 55 each); balanced, 100 each.
func benchCounts(unbalanced bool) []int {
	counts := make([]int, benchRegions)
	if !unbalanced {
		for i := range counts {
			counts[i] = benchShards / benchRegions
		}
		return counts
	}
	counts[0] = benchShards / 2
	rest := benchShards - counts[0]
	for i := 1; i < benchRegions; i++ {
		counts[i] = rest / (benchRegions - 1)
		if i <= rest%(benchRegions-1) {
			counts[i]++
		}
	}
	return counts
}

// benchAllocations gives region i the next counts[i] shards "0", "1", ...
func benchAllocations(counts []int) []RegionAllocation {
	out := make([]RegionAllocation, len(counts))
	next := 0
	for i, c := range counts {
		shards := make([]string, 0, c)
		for range c {
			shards = append(shards, strconv.Itoa(next))
			next++
		}
		out[i] = RegionAllocation{Region: benchRegion(i), Member: benchMember(i), Shards: shards}
	}
	return out
}

func benchTotal(allocs []RegionAllocation) int {
	n := 0
	for _, a := range allocs {
		n += len(a.Shards)
	}
	return n
}

var (
	benchSinkPID    *actor.PID
	benchSinkShards []string
)

// BenchmarkAllocateShard: where a new shard goes, with 10 regions and 1000
// shards (the coordinator calls it for every GetShardHome of an
// unallocated shard).
func BenchmarkAllocateShard(b *testing.B) {
	s := NewLeastShardAllocationStrategy(0, 0)
	for _, unbalanced := range []bool{true, false} {
		allocs := benchAllocations(benchCounts(unbalanced))
		if got := benchTotal(allocs); got != benchShards {
			b.Fatalf("%d shards, want %d", got, benchShards)
		}
		name := map[bool]string{true: "unbalanced", false: "balanced"}[unbalanced]
		requester := benchRegion(0)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				benchSinkPID = s.AllocateShard(requester, "new-shard", allocs)
			}
			if benchSinkPID == nil {
				b.Fatal("no region")
			}
		})
	}
}

// BenchmarkRebalance: one rebalance round with 10 regions and 1000 shards.
// Unbalanced (one region has 500), phase 1 picks the round's limit of 20
// shards; balanced, nothing moves (phase 1 and 2 find nothing).
func BenchmarkRebalance(b *testing.B) {
	s := NewLeastShardAllocationStrategy(0, 0)
	for _, unbalanced := range []bool{true, false} {
		allocs := benchAllocations(benchCounts(unbalanced))
		name := map[bool]string{true: "unbalanced", false: "balanced"}[unbalanced]
		want := 0
		if unbalanced {
			want = DefaultRebalanceAbsoluteLimit
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				benchSinkShards = s.Rebalance(allocs, nil)
			}
			if len(benchSinkShards) != want {
				b.Fatalf("rebalance picked %d shards, want %d", len(benchSinkShards), want)
			}
		})
	}
}
