package coordinator

import (
	"log/slog"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/messages"
)

// shardHomeStep is what the coordinator does with a GetShardHome (or, with
// no requester, an allocation for remember-entities), as shardHome decides.
type shardHomeStep int

const (
	// homeInHandOff: the shard is in hand-off; the request waits for its
	// end (RebalanceDone).
	homeInHandOff shardHomeStep = iota + 1
	// homeHeld: the shard's old home still forwards; the request waits
	// for its HandOffForwarded.
	homeHeld
	// homeNotAllRegistered: fewer regions than min-nr-of-members; ignored
	// (the region asks again).
	homeNotAllRegistered
	// homeKnown: the state places the shard; answer with its region.
	homeKnown
	// homeWaitForRegions: the shard is unplaced and live members have not
	// registered yet, one of which may host it; ignored.
	homeWaitForRegions
	// homeRejoinHold: the shard is unplaced and this node re-joined after
	// its removal less than the removal margin ago; ignored.
	homeRejoinHold
	// homeNoRegion: no region to allocate to; ignored.
	homeNoRegion
	// homeAllocate: ask the strategy among the regions listed.
	homeAllocate
)

// shardHomeDecision is shardHome's answer, with what its step needs.
type shardHomeDecision struct {
	step    shardHomeStep
	region  *actor.PID                          // homeKnown
	regions []coordinatoractor.RegionAllocation // homeAllocate
	// why says why the request waits or is ignored, for the debug log,
	// with attrs (after the type and the shard); "" to log nothing.
	why   string
	attrs []any
}

// shardHomeInput is what shardHome decides on besides the request.
type shardHomeInput struct {
	state          *State
	handOffs       *handOffs
	forwards       *forwardHolds
	regions        *regionBook
	minNrOfMembers int
	role           string
	registerWait   time.Duration // Settings.RegisterWaitTimeout
	now            time.Time
	// rejoinHold is how long a node that re-joined after its removal
	// still holds unplaced shards (see the coordinator's rejoinHold);
	// asked only for unplaced shards.
	rejoinHold func() time.Duration
}

// shardHome decides where requester's GetShardHome for shard goes: it
// waits in the hand-off or forward hold (both record it), is answered,
// is ignored for a reason, or the shard is to be allocated. A nil
// requester allocates without waiting anywhere.
func shardHome(in shardHomeInput, shard string, requester *actor.PID) shardHomeDecision {
	if in.handOffs.wait(shard, requester) {
		return shardHomeDecision{step: homeInHandOff}
	}
	if in.forwards.hold(shard, requester) {
		return shardHomeDecision{step: homeHeld}
	}
	if !in.regions.hasAllRegionsRegistered(len(in.state.Regions), in.minNrOfMembers) {
		return shardHomeDecision{step: homeNotAllRegistered, why: "shard coordinator: GetShardHome ignored, not all regions registered yet",
			attrs: []any{slog.Int("registered", len(in.state.Regions)), slog.Int("min-nr-of-members", in.minNrOfMembers)}}
	}
	if region, ok := in.state.RegionOf(shard); ok {
		return shardHomeDecision{step: homeKnown, region: region}
	}
	if waiting := in.regions.waitingForRegions(in.now, in.registerWait, in.role); len(waiting) > 0 {
		// One of them may host the shard already (see unregisteredMembers).
		return shardHomeDecision{step: homeWaitForRegions,
			why:   "shard coordinator: GetShardHome for an unplaced shard held until the regions of live members register",
			attrs: []any{slog.Any("members", waiting)}}
	}
	if wait := in.rejoinHold(); wait > 0 {
		return shardHomeDecision{step: homeRejoinHold,
			why:   "shard coordinator: GetShardHome for an unplaced shard held: this node re-joined after its removal, and the removal margin has not passed",
			attrs: []any{slog.Duration("wait", wait)}}
	}
	active := in.regions.allocations(in.state, true)
	if len(active) == 0 {
		return shardHomeDecision{step: homeNoRegion, why: "shard coordinator: no region to allocate to"}
	}
	return shardHomeDecision{step: homeAllocate, regions: active}
}

// usableHome reports whether the region the strategy chose may get a
// shard: a registered region that is not shutting down.
func usableHome(st *State, regions *regionBook, region *actor.PID) bool {
	return region != nil && st.IsRegion(region) && !regions.shuttingDown[RegionKey(region)]
}

// shardHomesOf lists the homes of durable, the state as written: the state
// a coordinator that takes over would also announce. A shard whose old
// home still forwards is left out: it is told once the old home has
// forwarded (see forwardHolds).
func shardHomesOf(durable State, epoch uint64, forwards *forwardHolds) *messages.ShardHomes {
	out := &messages.ShardHomes{Epoch: epoch}
	for _, r := range sortedEntries(durable.Regions) {
		var shards []string
		for _, s := range r.Shards {
			if !forwards.held(s) {
				shards = append(shards, s)
			}
		}
		if len(shards) > 0 {
			out.Homes = append(out.Homes, &messages.ShardHomesEntry{Region: r.PID, Shards: shards})
		}
	}
	return out
}

// shardHomeKey names the answer to requester's GetShardHome for shard, so
// that a repeated request waits once ("" without a requester).
func shardHomeKey(shard string, requester *actor.PID) string {
	if requester == nil {
		return ""
	}
	return "ShardHome\x00" + shard + "\x00" + RegionKey(requester)
}

// isHome reports whether st still places shard on region.
func isHome(st *State, shard string, region *actor.PID) bool {
	r, ok := st.RegionOf(shard)
	return ok && RegionKey(r) == RegionKey(region)
}

// rememberedToAllocate lists, sorted, the shards of st that lost their
// home and are to be allocated again so that their remembered entities
// start (Akka's allocateShardHomesForRememberEntities): all but those in
// hand-off.
func rememberedToAllocate(st *State, h *handOffs) []string {
	var out []string
	for s := range st.Unallocated {
		if !h.busy(s) {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}
