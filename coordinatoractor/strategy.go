package coordinatoractor

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/membership"
)

// RegionAllocation is one region's current shards (in allocation order)
// and the member it runs on: Akka's RegionEntry. The coordinator passes
// only regions whose member it knows and that are not shutting down.
type RegionAllocation struct {
	Region *actor.PID        // the region
	Member membership.Member // the member it runs on (its age orders regions)
	Shards []string          // its shards, in allocation order
}

// ShardAllocationStrategy decides where a new shard goes and which shards
// to move (Akka's ShardAllocationStrategy). Both methods are pure: they see
// only their arguments, never the actor. Unlike Akka they return values,
// not futures; a strategy that needs I/O does it before the call.
type ShardAllocationStrategy interface {
	// AllocateShard returns the region for shard. requester is the region
	// that asked (GetShardHome); it is the fallback when current is empty.
	AllocateShard(requester *actor.PID, shard string, current []RegionAllocation) *actor.PID
	// Rebalance returns the shards to hand off now. It never returns a
	// shard in rebalanceInProgress.
	Rebalance(current []RegionAllocation, rebalanceInProgress map[string]struct{}) []string
}
