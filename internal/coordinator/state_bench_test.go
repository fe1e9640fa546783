package coordinator

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

const benchRegions = 10

var benchSinkState State

// benchRegion is the region PID on the i-th (0-based) benchmark node.
func benchRegion(i int) *actor.PID { return actor.NewPID(fmt.Sprintf("127.0.0.%d:1", i+1), "region") }

// benchMember is the member ID of the i-th (0-based) benchmark node.
func benchMember(i int) string { return fmt.Sprintf("m%d", i+1) }

// benchState is a state with 10 regions and shards allocated shards,
// spread round-robin.
func benchState(b *testing.B, shards int) State {
	st := NewState(false)
	for i := range benchRegions {
		if err := st.Apply(ShardRegionRegistered{Region: benchRegion(i), MemberID: benchMember(i)}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range shards {
		if err := st.Apply(ShardHomeAllocated{Shard: strconv.Itoa(i), Region: benchRegion(i % benchRegions)}); err != nil {
			b.Fatal(err)
		}
	}
	return st
}

// BenchmarkStateApply: the cost of one event on a state with 10 regions
// and 1,000 or 20,000 allocated shards, the coordinator's cost per
// allocation and per hand-off. Apply changes the state in place, so the
// iterations alternate ShardHomeAllocated and ShardHomeDeallocated of one
// more shard: every op is one event.
func BenchmarkStateApply(b *testing.B) {
	for _, shards := range []int{1000, 20000} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			st := benchState(b, shards)
			events := []Event{
				ShardHomeAllocated{Shard: "new-shard", Region: benchRegion(3)},
				ShardHomeDeallocated{Shard: "new-shard"},
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := st.Apply(events[i%2]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			if want := shards + i%2; len(st.Shards) != want {
				b.Fatalf("after Apply: %d shards, want %d", len(st.Shards), want)
			}
		})
	}
}

// BenchmarkStateSnapshot: the copy of the state that each write carries
// (once per write, however many events it holds), at 1,000 and 20,000
// shards.
func BenchmarkStateSnapshot(b *testing.B) {
	for _, shards := range []int{1000, 20000} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			st := benchState(b, shards)
			b.ReportAllocs()
			for b.Loop() {
				benchSinkState = st.Clone()
			}
			if len(benchSinkState.Shards) != shards {
				b.Fatalf("snapshot has %d shards, want %d", len(benchSinkState.Shards), shards)
			}
		})
	}
}
