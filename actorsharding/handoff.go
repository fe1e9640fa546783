package actorsharding

import (
	"fmt"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// handOffs is a region's bookkeeping of planned hand-offs that keep every
// message and its order (akka/akka-core#30957):
//
//   - relays: shards whose BeginHandOff this region acknowledged through
//     the shard's old home, because it had forwarded messages there. The
//     ack travels behind them, so when the old home hands the shard off it
//     holds all of them. A BeginHandOff repeated by the same worker is
//     acknowledged the same way; another worker's is a new hand-off. A
//     worker gives up after the hand-off timeout, and so does the relay.
//   - owed: shards this region handed off as their old home. It keeps what
//     it held or still receives for them and forwards it to the new home
//     once the coordinator names it (the coordinator tells no one else
//     meanwhile), then reports HandOffForwarded behind those messages. The
//     debt ends with the coordinator's HandOffForwardedAck; a leaving
//     region stops only once it owes nothing.
//   - awaiting: shards this region is the new home of, whose old home
//     still forwards. What other regions send meanwhile is the old home's
//     forwarding (the others do not know the new home yet), and goes
//     ahead of what this region's own senders buffered, which waits for
//     the old home's HandOffForwarded.
//   - arrived: HandOffForwarded reports that came before the HostShard
//     naming their old home (they travel different ways).
type handOffs struct {
	relays   map[string]relay
	owed     map[string]*owedForward
	awaiting map[string]awaitedForward
	arrived  map[string]awaitedForward
}

type awaitedForward struct {
	oldHome *actor.PID
	since   time.Time
}

type relay struct {
	worker, via *actor.PID
	since       time.Time
}

type owedForward struct {
	since time.Time
	// reported: HandOffForwarded was sent, through reportedVia (nil: to
	// the coordinator directly).
	reported    bool
	reportedVia *actor.PID
}

func newHandOffs() handOffs {
	return handOffs{relays: map[string]relay{}, owed: map[string]*owedForward{},
		awaiting: map[string]awaitedForward{}, arrived: map[string]awaitedForward{}}
}

// beginHandOff returns where this region sends its BeginHandOffAck for
// worker's hand-off of shard, asked at now: through the old home it
// forwarded to (oldHome, nil if it knew no other home), or nil for
// straight to the worker.
func (h *handOffs) beginHandOff(shard string, worker, oldHome *actor.PID, now time.Time) *actor.PID {
	if r, ok := h.relays[shard]; ok && r.worker.Equal(worker) {
		return r.via
	}
	delete(h.relays, shard)
	if oldHome != nil {
		h.relays[shard] = relay{worker: worker, via: oldHome, since: now}
	}
	return oldHome
}

// homeLearned: the coordinator named shard's home again; the hand-off is
// over for this region as a non-owner.
func (h *handOffs) homeLearned(shard string) { delete(h.relays, shard) }

// handedOff: this region, the shard's home, got its HandOff at now. A
// repeated HandOff keeps the first time.
func (h *handOffs) handedOff(shard string, now time.Time) {
	if _, ok := h.owed[shard]; !ok {
		h.owed[shard] = &owedForward{since: now}
	}
}

// owes reports whether this region still forwards for shard, and whether
// it has reported HandOffForwarded.
func (h *handOffs) owes(shard string) (owes, reported bool) {
	o, ok := h.owed[shard]
	if !ok {
		return false, false
	}
	return true, o.reported
}

// reported: HandOffForwarded for shard was sent through via (nil: to the
// coordinator). It is an error when nothing is owed.
func (h *handOffs) reported(shard string, via *actor.PID) error {
	o, ok := h.owed[shard]
	if !ok {
		return fmt.Errorf("HandOffForwarded for shard %s, which this region does not owe", shard)
	}
	o.reported = true
	o.reportedVia = via
	return nil
}

// acked ends the debt for shard; false when there was none.
func (h *handOffs) acked(shard string) bool {
	_, ok := h.owed[shard]
	delete(h.owed, shard)
	return ok
}

// resends lists the reports to send again (the coordinator has not
// acknowledged them; sending twice is harmless), by shard and route.
func (h *handOffs) resends() map[string]*actor.PID {
	out := map[string]*actor.PID{}
	for shard, o := range h.owed {
		if o.reported {
			out[shard] = o.reportedVia
		}
	}
	return out
}

// expire drops the debts older than timeout at now (the coordinator
// stops holding the shard after its hand-off timeout too) and returns
// their shards.
func (h *handOffs) expire(now time.Time, timeout time.Duration) []string {
	var out []string
	for shard, o := range h.owed {
		if now.Sub(o.since) >= timeout {
			out = append(out, shard)
			delete(h.owed, shard)
		}
	}
	return out
}

// awaitForward: this region hosts shard now, and oldHome still forwards
// to it. It reports whether to wait: not when oldHome's report came
// first (within timeout).
func (h *handOffs) awaitForward(shard string, oldHome *actor.PID, now time.Time, timeout time.Duration) bool {
	if a, ok := h.arrived[shard]; ok && a.oldHome.Equal(oldHome) && now.Sub(a.since) < timeout {
		delete(h.arrived, shard)
		return false
	}
	if _, ok := h.awaiting[shard]; !ok {
		h.awaiting[shard] = awaitedForward{oldHome: oldHome, since: now}
	}
	return true
}

// awaits reports whether shard waits for its old home's forwarding.
func (h *handOffs) awaits(shard string) bool {
	_, ok := h.awaiting[shard]
	return ok
}

// forwardArrived: oldHome's HandOffForwarded for shard arrived here. It
// reports whether it ended a wait; if none waited, it is kept for the
// HostShard that may follow.
func (h *handOffs) forwardArrived(shard string, oldHome *actor.PID, now time.Time) bool {
	if a, ok := h.awaiting[shard]; ok && a.oldHome.Equal(oldHome) {
		delete(h.awaiting, shard)
		return true
	}
	h.arrived[shard] = awaitedForward{oldHome: oldHome, since: now}
	return false
}

// expireAwaiting ends the waits older than timeout at now, or whose old
// home is gone (live reports whether an address is a live member's), and
// forgets reports and relays kept past timeout. It returns the shards
// whose wait ended.
func (h *handOffs) expireAwaiting(now time.Time, timeout time.Duration, live func(address string) bool) []string {
	for shard, r := range h.relays {
		if now.Sub(r.since) >= timeout {
			delete(h.relays, shard)
		}
	}
	var out []string
	for shard, a := range h.awaiting {
		if now.Sub(a.since) >= timeout || !live(a.oldHome.GetAddress()) {
			out = append(out, shard)
			delete(h.awaiting, shard)
		}
	}
	for shard, a := range h.arrived {
		if now.Sub(a.since) >= timeout {
			delete(h.arrived, shard)
		}
	}
	return out
}

// involves reports whether shard takes part in a hand-off here.
func (h *handOffs) involves(shard string) bool {
	_, relayed := h.relays[shard]
	_, owed := h.owed[shard]
	_, awaited := h.awaiting[shard]
	_, arrived := h.arrived[shard]
	return relayed || owed || awaited || arrived
}

// owedCount is the number of shards still owed.
func (h *handOffs) owedCount() int { return len(h.owed) }

// clear forgets everything (the region was removed from the cluster).
func (h *handOffs) clear() {
	clear(h.relays)
	clear(h.owed)
	clear(h.awaiting)
	clear(h.arrived)
}

// report: as shard's old home, this region has forwarded what it held to
// the new home via (nil: it is the new home itself, or nothing was
// forwarded). It reports whether to send HandOffForwarded now (through
// via, or, if via is nil, to the coordinator) and records it as sent: not
// when nothing is owed or it was reported already, nor when it would go to
// the coordinator and the region has none (registered), which a later
// tick's resend covers.
func (h *handOffs) report(shard string, via *actor.PID, registered bool) bool {
	if owes, reported := h.owes(shard); !owes || reported || (via == nil && !registered) {
		return false
	}
	return h.reported(shard, via) == nil
}

// resendsTo is resends with each report's route checked: through its new
// home while that is on a live member (live), else to the coordinator
// (nil).
func (h *handOffs) resendsTo(live func(address string) bool) map[string]*actor.PID {
	out := h.resends()
	for shard, via := range out {
		if via != nil && !live(via.Address) {
			out[shard] = nil
		}
	}
	return out
}

// unreported lists the shards still owed whose child is gone (alive
// tells) and whose HandOffForwarded has not been sent: the region tries
// again to report them (see region.afterHandOff).
func (h *handOffs) unreported(alive func(shard string) bool) []string {
	var out []string
	for shard, o := range h.owed {
		if !o.reported && !alive(shard) {
			out = append(out, shard)
		}
	}
	sort.Strings(out)
	return out
}

// relayRejection says why a region, a shard's old home, must not relay a
// BeginHandOffAck to replyTo for the coordinator it follows, or "": only
// acks to that coordinator's workers are relayed.
func relayRejection(replyTo, coordinator *actor.PID) string {
	switch {
	case replyTo == nil:
		return "BeginHandOffAck without a worker to relay it to: a region does not take acks"
	case coordinator == nil || !isChildOf(replyTo, coordinator):
		return fmt.Sprintf("BeginHandOffAck to relay to %s, which is not a worker of this region's coordinator (%v)", replyTo, coordinator)
	}
	return ""
}
