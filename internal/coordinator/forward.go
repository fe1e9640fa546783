package coordinator

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/pidkey"
)

// forwardHolds is the coordinator's bookkeeping of shards whose old home
// still forwards, after a planned hand-off, what it held for the shard
// (akka/akka-core#30957). Until that old home reports HandOffForwarded,
// the coordinator tells only the old home where the shard lives now; every
// other region waits. The old home's forwarded messages, some of them
// forwarded to it by those other regions before the hand-off began, so
// reach the new home before anything those regions buffered meanwhile:
// each sender's order holds across the move.
//
// The holds live in the coordinator's memory only: a coordinator that
// takes over mid-hand-off answers everybody at once, and the order holds
// only as well as Akka's then.
type forwardHolds struct {
	holds map[string]*forwardHold
	// early: shards whose old home reported HandOffForwarded before the
	// coordinator had its worker's RebalanceDone (the old home had nothing
	// to forward and told the coordinator straight away).
	early map[string]string // shard -> old home key
	gen   uint64
}

type forwardHold struct {
	oldHome *actor.PID
	waiting []*actor.PID // GetShardHome senders to answer once forwarded
	gen     uint64       // names this hold for its time-out
}

func newForwardHolds() forwardHolds {
	return forwardHolds{holds: map[string]*forwardHold{}, early: map[string]string{}}
}

// handedOff starts the hold of shard, just handed off by oldHome, with the
// GetShardHome senders that waited during the hand-off. It returns those
// to answer now (the old home's own requests, or all of them if the old
// home has reported already) and the hold's generation, 0 if none holds.
func (f *forwardHolds) handedOff(shard string, oldHome *actor.PID, waiting []*actor.PID) (answerNow []*actor.PID, gen uint64) {
	key := pidkey.Of(oldHome)
	if f.early[shard] == key {
		delete(f.early, shard)
		return waiting, 0
	}
	delete(f.early, shard)
	f.gen++
	h := &forwardHold{oldHome: oldHome, gen: f.gen}
	for _, r := range waiting {
		if pidkey.Of(r) == key {
			answerNow = append(answerNow, r)
		} else {
			h.waiting = appendPID(h.waiting, r)
		}
	}
	f.holds[shard] = h
	return answerNow, h.gen
}

// hold reports whether requester's GetShardHome for shard must wait for
// the old home's forwarding; if so it waits in the hold.
func (f *forwardHolds) hold(shard string, requester *actor.PID) bool {
	h, ok := f.holds[shard]
	if !ok || requester == nil || pidkey.Of(requester) == pidkey.Of(h.oldHome) {
		return false
	}
	h.waiting = appendPID(h.waiting, requester)
	return true
}

// held reports whether shard is held: its home is not to be told around.
func (f *forwardHolds) held(shard string) bool {
	_, ok := f.holds[shard]
	return ok
}

// oldHome is the old home shard's hold waits for, or nil.
func (f *forwardHolds) oldHome(shard string) *actor.PID {
	if h, ok := f.holds[shard]; ok {
		return h.oldHome
	}
	return nil
}

// forwarded ends shard's hold on its old home's HandOffForwarded and
// returns the requests to answer now. inHandOff tells that the shard's
// hand-off has not ended yet at the coordinator: the report came early
// and ends the hold before it starts.
func (f *forwardHolds) forwarded(shard string, oldHome *actor.PID, inHandOff bool) []*actor.PID {
	if inHandOff {
		f.early[shard] = pidkey.Of(oldHome)
		return nil
	}
	h, ok := f.holds[shard]
	if !ok || pidkey.Of(h.oldHome) != pidkey.Of(oldHome) {
		return nil
	}
	delete(f.holds, shard)
	return h.waiting
}

// timedOut ends shard's hold of generation gen, if it still holds, and
// returns the requests to answer now.
func (f *forwardHolds) timedOut(shard string, gen uint64) (release []*actor.PID, ok bool) {
	h, held := f.holds[shard]
	if !held || h.gen != gen {
		return nil, false
	}
	delete(f.holds, shard)
	return h.waiting, true
}

// regionGone ends every hold whose old home is region (it can forward
// nothing any more) and returns, per shard, the requests to answer now.
func (f *forwardHolds) regionGone(region *actor.PID) map[string][]*actor.PID {
	key := pidkey.Of(region)
	out := map[string][]*actor.PID{}
	for shard, h := range f.holds {
		if pidkey.Of(h.oldHome) == key {
			out[shard] = h.waiting
			delete(f.holds, shard)
		}
	}
	for shard, k := range f.early {
		if k == key {
			delete(f.early, shard)
		}
	}
	return out
}

// abandon forgets an early report for shard, whose hand-off failed: the
// shard stayed where it was.
func (f *forwardHolds) abandon(shard string) { delete(f.early, shard) }

// appendPID appends pid to list unless it is in it already.
func appendPID(list []*actor.PID, pid *actor.PID) []*actor.PID {
	for _, p := range list {
		if RegionKey(p) == RegionKey(pid) {
			return list
		}
	}
	return append(list, pid)
}
