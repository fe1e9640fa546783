package coordinator

import (
	"errors"
	"fmt"
	"sort"

	"github.com/asynkron/protoactor-go/actor"
)

// errNotHandOffWorker: a RebalanceDone that does not come from the worker
// of the shard's hand-off in progress. Only that worker may end it: a
// RebalanceDone from anyone else would let the shard start elsewhere
// while it runs.
var errNotHandOffWorker = errors.New("not its rebalance worker")

// errHandOffOrder: a hand-off transition that the shard's hand-off state
// does not allow (a second hand-off of a shard in hand-off); nothing
// changed.
var errHandOffOrder = errors.New("hand-off out of order")

// handOffs is the coordinator's bookkeeping of the hand-offs in progress
// (Akka's rebalanceInProgress and rebalanceWorkers): per shard, its
// worker, when it started, and the GetShardHome senders that wait for its
// end. A shard in it is busy: it is neither allocated, rebalanced, handed
// off again nor sent HostShard until its hand-off ends.
type handOffs struct {
	// waiting: shard -> the GetShardHome senders waiting for it; a shard
	// is in progress while it has an entry, nil included.
	waiting map[string][]*actor.PID
	workers map[string]*actor.PID // shard -> its worker, until RebalanceDone
	started map[string]handOffStart
}

func newHandOffs() handOffs {
	return handOffs{waiting: map[string][]*actor.PID{}, workers: map[string]*actor.PID{}, started: map[string]handOffStart{}}
}

// busy reports whether shard's hand-off is in progress.
func (h *handOffs) busy(shard string) bool {
	_, ok := h.waiting[shard]
	return ok
}

// startable reports whether a hand-off of shard may start now: it is in
// no hand-off, and every change of its home is written (settled).
func (h *handOffs) startable(shard string, settled func(string) bool) bool {
	return !h.busy(shard) && settled(shard)
}

// handOffMove is a hand-off to start: shard, from its home from.
type handOffMove struct {
	shard string
	from  *actor.PID
}

// rebalanceMoves picks, of the shards the strategy would move, those
// whose hand-off starts now, with their homes: each once, startable (a
// shard whose new home is not written yet moves on a later tick), and
// with a home in st.
func rebalanceMoves(shards []string, st *State, h *handOffs, settled func(string) bool) []handOffMove {
	var out []handOffMove
	picked := map[string]bool{}
	for _, shard := range shards {
		if picked[shard] || !h.startable(shard, settled) {
			continue
		}
		if from, ok := st.RegionOf(shard); ok {
			picked[shard] = true
			out = append(out, handOffMove{shard: shard, from: from})
		}
	}
	return out
}

// inProgress is the set of shards in hand-off, for the strategy.
func (h *handOffs) inProgress() map[string]struct{} {
	out := make(map[string]struct{}, len(h.waiting))
	for s := range h.waiting {
		out[s] = struct{}{}
	}
	return out
}

// shards lists the shards in hand-off, sorted.
func (h *handOffs) shards() []string {
	var out []string
	for s := range h.waiting {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// len is the number of hand-offs in progress.
func (h *handOffs) len() int { return len(h.waiting) }

// begin starts shard's hand-off. It returns the start of an earlier
// hand-off of shard that never saw its RebalanceDone, whose span the
// caller ends. A shard in hand-off already is an error.
func (h *handOffs) begin(shard string, start handOffStart) (replaced handOffStart, ok bool, err error) {
	if h.busy(shard) {
		return handOffStart{}, false, fmt.Errorf("%w: shard %q is in hand-off already", errHandOffOrder, shard)
	}
	h.waiting[shard] = nil
	replaced, ok = h.started[shard]
	h.started[shard] = start
	return replaced, ok, nil
}

// assign records worker, which hands shard off; its RebalanceDone ends
// the hand-off (see done).
func (h *handOffs) assign(shard string, worker *actor.PID) { h.workers[shard] = worker }

// wait queues requester's GetShardHome for shard behind its hand-off and
// reports whether the shard is in hand-off (false: nothing is queued). A
// nil requester (remember-entities) queues nothing; a repeated one is
// queued once.
func (h *handOffs) wait(shard string, requester *actor.PID) bool {
	waiting, ok := h.waiting[shard]
	if ok && requester != nil {
		h.waiting[shard] = appendPID(waiting, requester)
	}
	return ok
}

// done ends the worker's part of shard's hand-off on its RebalanceDone
// from sender. It returns when the hand-off started, if known. The shard
// stays in progress, its requesters waiting, until release.
func (h *handOffs) done(shard string, sender *actor.PID) (handOffStart, bool, error) {
	w, ok := h.workers[shard]
	if !ok || sender == nil || !w.Equal(sender) {
		return handOffStart{}, false, fmt.Errorf("RebalanceDone for shard %q from %v, which is %w", shard, sender, errNotHandOffWorker)
	}
	delete(h.workers, shard)
	start, known := h.started[shard]
	delete(h.started, shard)
	return start, known, nil
}

// release ends shard's hand-off and returns the requests that waited for
// it; false when the shard was not in hand-off.
func (h *handOffs) release(shard string) ([]*actor.PID, bool) {
	waiting, ok := h.waiting[shard]
	delete(h.waiting, shard)
	return waiting, ok
}

// ended ends shard's hand-off after its RebalanceDone (done): ok tells
// that the shard was handed off, oldHome is its home until then (nil if
// it had none). It returns the requests to answer now and the generation
// of the forward hold it started (0: none), whose time-out the caller
// sets. A shard handed off from a home waits for that home to forward
// what it still holds before anyone else learns the new home (see
// forwardHolds); after a failed hand-off the shard stays where it was,
// and an early HandOffForwarded for it is forgotten.
func (h *handOffs) ended(shard string, ok bool, oldHome *actor.PID, f *forwardHolds) ([]*actor.PID, uint64) {
	if !ok {
		f.abandon(shard)
	}
	waiting, _ := h.release(shard)
	if ok && oldHome != nil {
		return f.handedOff(shard, oldHome, waiting)
	}
	return waiting, 0
}

// workerPIDs lists the workers running, in no particular order.
func (h *handOffs) workerPIDs() []*actor.PID {
	out := make([]*actor.PID, 0, len(h.workers))
	for _, w := range h.workers {
		out = append(out, w)
	}
	return out
}

// unfinished lists the starts of the hand-offs whose worker has not
// reported: their spans end when the coordinator stops.
func (h *handOffs) unfinished() []handOffStart {
	out := make([]handOffStart, 0, len(h.started))
	for _, s := range h.started {
		out = append(out, s)
	}
	return out
}

// gracefulShutdownShards lists the shards of region key whose hand-off
// starts on its GracefulShutdownReq: those startable now. The others are
// handed off on the region's next GracefulShutdownReq, once written.
func (h *handOffs) gracefulShutdownShards(st *State, key string, settled func(string) bool) []string {
	var out []string
	for _, shard := range st.Regions[key].Shards {
		if h.startable(shard, settled) {
			out = append(out, shard)
		}
	}
	return out
}

// handOffRecipients lists whom a hand-off's worker tells to stop sending
// to the shard: every registered region, then every proxy, each sorted.
func handOffRecipients(st *State) []*actor.PID { return registrants(st, nil) }
