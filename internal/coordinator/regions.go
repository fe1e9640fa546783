package coordinator

import (
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/membership"
)

// regionBook is what the coordinator knows of the members and their
// regions beyond its State: the live members, which of them registered
// with this coordinator, which regions shut down gracefully, which wait
// out the down-removal margin, and whether enough regions registered.
type regionBook struct {
	members map[string]membership.Member // by member id
	// registered: members whose region or proxy registered with this
	// coordinator (not its predecessors); a region's first Register here
	// is where its hosted shards are adopted.
	registered map[string]bool
	// shuttingDown: regions (by key) handing off all shards (Akka's
	// gracefulShutdownInProgress).
	shuttingDown map[string]bool
	// pendingRemovals: members removed without a graceful leave whose
	// regions wait out the down-removal margin.
	pendingRemovals map[string]bool
	allRegistered   bool
	// activatedAt: when the coordinator became active; shards the state
	// does not place are allocated only once every live member has
	// registered, or RegisterWaitTimeout after it.
	activatedAt time.Time
}

func newRegionBook() regionBook {
	return regionBook{members: map[string]membership.Member{}, registered: map[string]bool{},
		shuttingDown: map[string]bool{}, pendingRemovals: map[string]bool{}}
}

// membershipEvent keeps the member view. It reports whether msg was a
// membership message and whether the regions of gone members must be
// looked at now.
func (b *regionBook) membershipEvent(msg any) (handled, checkGone bool) {
	switch msg := msg.(type) {
	case *membership.CurrentClusterState:
		b.members = map[string]membership.Member{}
		for _, m := range msg.Members {
			b.members[m.ID] = m
		}
		return true, true
	case membership.MemberUp:
		b.members[msg.Member.ID] = msg.Member
	case membership.MemberLeft:
		b.members[msg.Member.ID] = msg.Member
	case membership.MemberRemoved:
		delete(b.members, msg.Member.ID)
		return true, true
	default:
		return false, false
	}
	return true, false
}

func (b *regionBook) isLive(id string) bool {
	_, ok := b.members[id]
	return ok && id != ""
}

// hasAllRegionsRegistered is Akka's min-nr-of-members check: once regions
// regions have registered, at least minNrOfMembers, it holds for good.
func (b *regionBook) hasAllRegionsRegistered(regions, minNrOfMembers int) bool {
	if !b.allRegistered {
		b.allRegistered = regions >= minNrOfMembers
	}
	return b.allRegistered
}

// register records a registration of member's region or proxy; first
// tells the first one with this coordinator.
func (b *regionBook) register(member string) (first bool) {
	first = !b.registered[member]
	b.registered[member] = true
	return first
}

// unregister forgets member's registration, which was never written: its
// next Register adopts again.
func (b *regionBook) unregister(member string) { delete(b.registered, member) }

// gracefulShutdown records that region key hands off all its shards;
// first tells the first request.
func (b *regionBook) gracefulShutdown(key string) (first bool) {
	first = !b.shuttingDown[key]
	b.shuttingDown[key] = true
	return first
}

// terminated forgets region key, which is gone.
func (b *regionBook) terminated(key string) { delete(b.shuttingDown, key) }

// waitingForRegions lists the live members with role whose regions the
// coordinator still waits for before it allocates unplaced shards; empty
// once all have registered or timeout has passed since it became active.
func (b *regionBook) waitingForRegions(now time.Time, timeout time.Duration, role string) []string {
	if now.Sub(b.activatedAt) >= timeout {
		return nil
	}
	return unregisteredMembers(b.members, role, b.registered)
}

// allocations lists the regions of st for the strategy. Akka passes only
// regions that are not shutting down to allocateShard (forAllocation),
// and every region to rebalance.
func (b *regionBook) allocations(st *State, forAllocation bool) []coordinatoractor.RegionAllocation {
	var out []coordinatoractor.RegionAllocation
	for _, r := range sortedEntries(st.Regions) {
		m, ok := b.members[r.MemberID]
		if !ok {
			continue
		}
		if forAllocation && b.shuttingDown[RegionKey(r.PID)] {
			continue
		}
		out = append(out, coordinatoractor.RegionAllocation{Region: r.PID, Member: m, Shards: slices.Clone(r.Shards)})
	}
	return out
}

// goneStep is one step of ending the regions and proxies of members that
// are not live: terminate a region or a proxy now, or (wait > 0) wait
// for a region's removal margin, which the coordinator is told of once.
type goneStep struct {
	region *actor.PID
	proxy  *actor.PID
	wait   time.Duration
}

// removals tells whether and how a member was removed (membershiphook.Cluster.Removal).
type removals func(id string) (membershiphook.Removal, bool)

// goneMembers lists, in order, what to do with the regions and proxies
// of st whose member is not live. The regions of a member removed
// without a graceful leave wait the down-removal margin first (see
// removalWait): their shards stay allocated to it meanwhile, so nobody
// starts them; the wait is a step only the first time it is seen.
func (b *regionBook) goneMembers(st *State, removal removals, margin time.Duration, now time.Time) []goneStep {
	var out []goneStep
	for _, r := range sortedEntries(st.Regions) {
		if b.isLive(r.MemberID) {
			continue
		}
		rm, seen := removal(r.MemberID)
		if wait := removalWait(rm, seen, margin, now); wait > 0 {
			if !b.pendingRemovals[r.MemberID] {
				b.pendingRemovals[r.MemberID] = true
				out = append(out, goneStep{region: r.PID, wait: wait})
			}
			continue
		}
		delete(b.pendingRemovals, r.MemberID)
		out = append(out, goneStep{region: r.PID})
	}
	for _, p := range sortedEntries(st.Proxies) {
		if !b.isLive(p.MemberID) {
			out = append(out, goneStep{proxy: p.PID})
		}
	}
	return out
}

// terminationLevel is the level of the log line of region key's
// termination with shards shards: a region that stopped with shards
// without a graceful shutdown (a crash, a removal) moves them, a summary
// worth an info line. One shutting down handed them off, or the whole
// cluster stops.
func (b *regionBook) terminationLevel(key string, shards int) slog.Level {
	if shards > 0 && !b.shuttingDown[key] {
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// canRebalance reports whether a rebalance round may run: some region is
// registered, and enough of them (see hasAllRegionsRegistered).
func (b *regionBook) canRebalance(st *State, minNrOfMembers int) bool {
	return len(st.Regions) > 0 && b.hasAllRegionsRegistered(len(st.Regions), minNrOfMembers)
}

// liveRegistrants lists the registered regions, then proxies, of st
// whose member is live, each sorted: those the coordinator watches.
func (b *regionBook) liveRegistrants(st *State) []*actor.PID {
	return registrants(st, b.isLive)
}

// registrants lists the registered regions, then proxies, of st whose
// member keep accepts (all when keep is nil), each sorted.
func registrants(st *State, keep func(memberID string) bool) []*actor.PID {
	var out []*actor.PID
	for _, r := range sortedEntries(st.Regions) {
		if keep == nil || keep(r.MemberID) {
			out = append(out, r.PID)
		}
	}
	for _, p := range sortedEntries(st.Proxies) {
		if keep == nil || keep(p.MemberID) {
			out = append(out, p.PID)
		}
	}
	return out
}

// sortedEntries lists the entries of a State's Regions or Proxies by key.
func sortedEntries(m map[string]RegionEntry) []RegionEntry {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]RegionEntry, 0, len(keys))
	for _, k := range keys {
		out = append(out, m[k])
	}
	return out
}
