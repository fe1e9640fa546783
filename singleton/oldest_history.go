package singleton

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/membership"
)

// oldestHistory is what a manager knows of the members that were the
// oldest before it (Akka's previousOldest, most recent first) and of the
// members removed from the cluster, for one incarnation of this member: a
// previous oldest counts as gone only once removed and past the removal
// margin, and until then it may still run the singleton and is asked to
// hand it over.
type oldestHistory struct {
	previous []membership.Member
	removed  map[string]bool
}

func newOldestHistory() oldestHistory {
	return oldestHistory{removed: map[string]bool{}}
}

// rejoined starts a new incarnation of this member: no member is known
// removed any more (the previous ones are kept, for the caller to set).
func (h *oldestHistory) rejoined() { h.removed = map[string]bool{} }

// forget drops the previous oldest members: none can run the singleton
// any more (it runs here, or was handed over from here).
func (h *oldestHistory) forget() { h.previous = nil }

// only makes oldest (nil: none) the only previous oldest.
func (h *oldestHistory) only(oldest *membership.Member) {
	h.previous = nil
	if oldest != nil {
		h.previous = []membership.Member{*oldest}
	}
}

// oldestChanged is Younger's OldestChanged: what to do, and, when staying
// younger, the new oldest becomes the most recent previous one.
func (h *oldestHistory) oldestChanged(self membership.Member, newOldest *membership.Member) youngerDecision {
	d := decideYounger(self, newOldest, h.previous, h.removed)
	if d == stayYounger && newOldest != nil && !h.isPrevious(newOldest.ID) {
		h.previous = append([]membership.Member{*newOldest}, h.previous...)
	}
	return d
}

// mostRecent is the most recent previous oldest, removed or not.
func (h *oldestHistory) mostRecent() (membership.Member, bool) {
	if len(h.previous) == 0 {
		return membership.Member{}, false
	}
	return h.previous[0], true
}

// firstLive is the most recent previous oldest not removed: the one to ask
// for the hand-over.
func (h *oldestHistory) firstLive() (membership.Member, bool) {
	return firstLive(h.previous, h.removed)
}

func (h *oldestHistory) isRemoved(id string) bool { return h.removed[id] }

func (h *oldestHistory) isPrevious(id string) bool {
	for _, x := range h.previous {
		if x.ID == id {
			return true
		}
	}
	return false
}

// handOverDoneFrom reports whether a HandOverDone from member id is the
// one BecomingOldest waits for.
func (h *oldestHistory) handOverDoneFrom(id string) bool {
	prev, ok := h.firstLive()
	return ok && prev.ID == id
}

// takeOverDecision is BecomingOldest's answer to a TakeOverFromMe.
type takeOverDecision int

const (
	// ignoreRemovedTakeOver: from a member removed already.
	ignoreRemovedTakeOver takeOverDecision = iota
	// answerHandOverToMe: from the previous oldest waited for.
	answerHandOverToMe
	// ignoreUnexpectedTakeOver: from another member than the one waited
	// for, or from a sender that cannot be answered.
	ignoreUnexpectedTakeOver
)

// takeOverFromMe takes a TakeOverFromMe from member id, sent by sender
// (nil: none to answer). With no live previous oldest known, the sender
// becomes it.
func (h *oldestHistory) takeOverFromMe(id string, sender *actor.PID) takeOverDecision {
	if h.removed[id] {
		return ignoreRemovedTakeOver
	}
	prev, ok := h.firstLive()
	switch {
	case ok && prev.ID == id:
		return answerHandOverToMe
	case !ok && sender != nil:
		h.previous = append([]membership.Member{{ID: id, Address: sender.Address}}, h.previous...)
		return answerHandOverToMe
	default:
		return ignoreUnexpectedTakeOver
	}
}

// memberRemoved takes a MemberRemoved of another member: a previous oldest
// counts as removed only after the removal margin (countLater: the
// caller delivers removalCounted or previousRemoved then); any other
// member at once.
func (h *oldestHistory) memberRemoved(id string) (countLater bool) {
	if h.isPrevious(id) {
		return true
	}
	h.removed[id] = true
	return false
}

// removalCounted: a previous oldest's removal counts now; it is no longer
// asked for anything.
func (h *oldestHistory) removalCounted(id string) {
	h.removed[id] = true
	out := h.previous[:0:0]
	for _, x := range h.previous {
		if x.ID != id {
			out = append(out, x)
		}
	}
	h.previous = out
}

// previousRemoved is BecomingOldest's removalCounted: it reports whether
// no previous oldest is left that may still run the singleton, so this
// member takes over without a hand-over.
func (h *oldestHistory) previousRemoved(id string) (takeOver bool) {
	h.removed[id] = true
	if !h.isPrevious(id) {
		return false
	}
	_, live := h.firstLive()
	return !live
}
