package coordinator

import (
	"github.com/asynkron/protoactor-go/actor"
)

// hostShardResends is the bookkeeping of the HostShard messages whose
// ShardStarted has not come back: per shard, the cancel of the timer that
// sends it again (Akka's unAckedHostShards). At most one timer runs per
// shard.
type hostShardResends struct {
	cancels map[string]func()
}

func newHostShardResends() hostShardResends {
	return hostShardResends{cancels: map[string]func(){}}
}

// sent records the resend timer of a HostShard just sent for shard; the
// timer of an earlier one is cancelled.
func (h *hostShardResends) sent(shard string, cancel func()) {
	h.stop(shard)
	h.cancels[shard] = cancel
}

// stop cancels shard's resend timer, if any: the shard started, moves or
// lost its region.
func (h *hostShardResends) stop(shard string) {
	if cancel, ok := h.cancels[shard]; ok {
		cancel()
		delete(h.cancels, shard)
	}
}

// stopAll cancels every resend timer: the coordinator stops.
func (h *hostShardResends) stopAll() {
	for shard := range h.cancels {
		h.stop(shard)
	}
}

// started decides on a ShardStarted for shard from sender: it stops the
// resends when sender is the shard's home in st, and reports whether it
// was.
func (h *hostShardResends) started(st *State, shard string, sender *actor.PID) bool {
	if isHome(st, shard, sender) {
		h.stop(shard)
		return true
	}
	return false
}

// due decides on the resend timer of shard's HostShard to region, which
// fired: it returns the region to send HostShard again, or nil when the
// shard is in hand-off (a HostShard now would restart it) or no longer
// lives on region.
func (h *hostShardResends) due(st *State, shard string, region *actor.PID, inHandOff bool) *actor.PID {
	delete(h.cancels, shard)
	if inHandOff {
		return nil
	}
	if r, ok := st.RegionOf(shard); ok && RegionKey(r) == RegionKey(region) {
		return r
	}
	return nil
}
