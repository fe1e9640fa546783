package coordinatoractor

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/pidkey"
	"github.com/protoshard/protoshard/membership"
)

// Defaults of the least-shard strategy's per-round rebalance limits.
//
// Akka's reference.conf sets
// `least-shard-allocation-strategy.rebalance-absolute-limit = 0`, and 0
// there selects the deprecated pre-2.6.10 algorithm (rebalance-threshold,
// max-simultaneous-rebalance), which needs many rounds: 100 shards going
// from one node to two took about eight minutes. We have only the newer
// algorithm, so 0 has no meaning of its own here; we take 20, the value
// Akka's documentation suggests when it introduces the new algorithm.
// The relative limit keeps Akka's default.
const (
	// DefaultRebalanceAbsoluteLimit is the most shards one rebalance round
	// moves. NewLeastShardAllocationStrategy uses it for any limit <= 0.
	DefaultRebalanceAbsoluteLimit = 20
	// DefaultRebalanceRelativeLimit is the most shards one rebalance round
	// moves, as a fraction of all allocated shards.
	// NewLeastShardAllocationStrategy uses it for a limit <= 0 or NaN.
	DefaultRebalanceRelativeLimit = 0.1
)

// LeastShardAllocationStrategy is Akka's (2.6.10+) LeastShardAllocationStrategy,
// ported from Pekko's internal.LeastShardAllocationStrategy and
// AbstractLeastShardAllocationStrategy.
//
// A new shard goes to the region with the fewest shards, preferring regions
// whose member is not leaving. A rebalance round moves shards from the
// regions above the optimal count (all shards / regions, rounded up) and,
// once none is above it, evens out a difference of two or more between the
// fullest and the emptiest regions. Each round moves at most
// max(1, min(int(relativeLimit × all shards), absoluteLimit)) shards, because
// moving many shards at once restarts many entities at once (think event
// sourced entities replaying their journals). Like Akka it does nothing
// while an earlier round is still being handed off, so rounds never overlap
// and never pick a shard that is already moving.
//
// It is a pure function of its arguments: no actor, no clock, no I/O. The
// zero value and a nil pointer behave as the defaults.
type LeastShardAllocationStrategy struct {
	absoluteLimit int
	relativeLimit float64
}

var _ ShardAllocationStrategy = (*LeastShardAllocationStrategy)(nil)

// NewLeastShardAllocationStrategy returns the strategy with the given
// per-round limits: absoluteLimit shards at most, and relativeLimit (a
// fraction, normally < 1) of all allocated shards at most.
//
// An absoluteLimit <= 0 becomes DefaultRebalanceAbsoluteLimit (20): in Akka
// a 0 selects the deprecated old algorithm, which we do not have (see the
// constants). A relativeLimit <= 0 or NaN becomes
// DefaultRebalanceRelativeLimit (0.1). A relativeLimit of 1 or more is
// accepted: the absolute limit alone then caps a round (Akka's own tests
// use 1.0 for "no relative limit").
func NewLeastShardAllocationStrategy(absoluteLimit int, relativeLimit float64) *LeastShardAllocationStrategy {
	if absoluteLimit <= 0 {
		absoluteLimit = DefaultRebalanceAbsoluteLimit
	}
	if !(relativeLimit > 0) { // also catches NaN
		relativeLimit = DefaultRebalanceRelativeLimit
	}
	return &LeastShardAllocationStrategy{absoluteLimit: absoluteLimit, relativeLimit: relativeLimit}
}

// absolute returns the most shards one rebalance round moves.
func (s *LeastShardAllocationStrategy) absolute() int {
	if s == nil || s.absoluteLimit <= 0 {
		return DefaultRebalanceAbsoluteLimit
	}
	return s.absoluteLimit
}

// relative returns the fraction of all shards one rebalance round
// moves at most.
func (s *LeastShardAllocationStrategy) relative() float64 {
	if s == nil || !(s.relativeLimit > 0) {
		return DefaultRebalanceRelativeLimit
	}
	return s.relativeLimit
}

// String names the strategy and its limits, as Akka's toString, for logs.
func (s *LeastShardAllocationStrategy) String() string {
	return fmt.Sprintf("LeastShardAllocationStrategy(%d,%g)", s.absolute(), s.relative())
}

// limit is the most shards one round may move when numberOfShards are
// allocated: max(1, min(int(relativeLimit*n), absoluteLimit)). At least one,
// so that a small cluster still converges.
func (s *LeastShardAllocationStrategy) limit(numberOfShards int) int {
	abs := s.absolute()
	rel := s.relative() * float64(numberOfShards)
	// Compare in float first: converting a float larger than MaxInt (a huge
	// relative limit) to int is implementation-defined in Go.
	if rel >= float64(abs) {
		return abs
	}
	return max(1, int(rel)) // int() truncates like Scala's toInt
}

// AllocateShard returns the most suitable region (see compareSuitability):
// a region whose member is not leaving, with the fewest shards. With no
// usable region it returns requester: Akka retries after 50 ms there,
// waiting for its cluster view to catch up, but our coordinator passes
// only regions whose member it already knows, so an empty current means
// no region at all and the requester is the only candidate.
func (s *LeastShardAllocationStrategy) AllocateShard(requester *actor.PID, shard string, current []RegionAllocation) *actor.PID {
	best, ok := mostSuitableRegion(current)
	if !ok {
		return requester
	}
	return best.Region
}

// Rebalance returns, sorted, the shards to hand off in this round.
//
// Phase 1 takes, from every region above optimalPerRegion (all shards /
// regions, rounded up), its surplus, oldest allocated shards first, from
// the least loaded such region to the most loaded, and keeps the first
// limit(n) of them. Because optimalPerRegion is rounded up, phase 1 can
// stop short of even: with [4, 4, 2] nobody is above 4. Only when phase 1
// finds nothing, phase 2 looks for regions at least two below the optimum
// and moves that many shards (one per region at or above the optimum, at
// most limit(n)); repeated rounds bring the difference down to at most one.
// nil means nothing to move.
//
// It returns nothing while rebalanceInProgress is non-empty: like Akka, one
// round at a time, so a shard still being handed off is never picked again
// and the next round sees where the previous one's shards landed.
func (s *LeastShardAllocationStrategy) Rebalance(current []RegionAllocation, rebalanceInProgress map[string]struct{}) []string {
	if len(rebalanceInProgress) > 0 {
		return nil
	}
	entries := sortedRegionEntries(current)
	if !isAGoodTimeToRebalance(entries) {
		return nil
	}
	numberOfShards := 0
	for _, e := range entries {
		numberOfShards += len(e.Shards)
	}
	numberOfRegions := len(entries)
	if numberOfRegions == 0 || numberOfShards == 0 {
		return nil
	}
	optimalPerRegion := numberOfShards / numberOfRegions
	if numberOfShards%numberOfRegions != 0 {
		optimalPerRegion++
	}

	result := s.rebalancePhase1(numberOfShards, optimalPerRegion, entries)
	if len(result) == 0 {
		result = s.rebalancePhase2(numberOfShards, optimalPerRegion, entries)
	}
	return sortedUniqueShards(result)
}

// rebalancePhase1 takes every region's shards above optimalPerRegion.
// entries are in suitability order, so the surplus of the least loaded
// regions comes first, and within a region the oldest allocated shards.
func (s *LeastShardAllocationStrategy) rebalancePhase1(numberOfShards, optimalPerRegion int, entries []RegionAllocation) []string {
	var selected []string
	for _, e := range entries {
		if len(e.Shards) > optimalPerRegion {
			selected = append(selected, e.Shards[:len(e.Shards)-optimalPerRegion]...)
		}
	}
	return selected[:min(len(selected), s.limit(numberOfShards))]
}

// rebalancePhase2 evens out what the rounded-up optimum of phase 1 lets
// through: countBelowOptimal is how many shards the regions two or more
// below the optimum lack to reach optimum-1; it moves that many (at most
// limit(n)), the oldest shard of each region at or above the optimum.
func (s *LeastShardAllocationStrategy) rebalancePhase2(numberOfShards, optimalPerRegion int, entries []RegionAllocation) []string {
	countBelowOptimal := 0
	for _, e := range entries {
		countBelowOptimal += max(0, (optimalPerRegion-1)-len(e.Shards))
	}
	if countBelowOptimal == 0 {
		return nil
	}
	var selected []string
	for _, e := range entries {
		if len(e.Shards) >= optimalPerRegion {
			selected = append(selected, e.Shards[0])
		}
	}
	return selected[:min(len(selected), countBelowOptimal, s.limit(numberOfShards))]
}

// memberIsLeaving reports whether the member is on its way out (Akka: Leaving,
// Exiting or Down; we only have Leaving).
func memberIsLeaving(m membership.Member) bool {
	return m.Status == membership.Leaving
}

// compareSuitability is Akka's ShardSuitabilityOrdering: the more suitable
// region for a new shard sorts first.
//
//  1. A member that is not leaving before a leaving one. (Akka compares the
//     "is leaving" flags only when the statuses differ; with our two
//     statuses, Up and Leaving, differing statuses always mean exactly one
//     is leaving, so this is the same.)
//  2. Akka then prefers the highest app version (rolling updates); we have
//     no app version and skip it.
//  3. Fewer shards first.
//  4. Akka stops there and leaves ties to its Map's iteration order; we
//     break them by member address, then region key, so that the choice is
//     deterministic and the same on every node. Akka's age (upNumber, our
//     Member.Age) plays no part in this ordering, so neither does ours.
func compareSuitability(x, y RegionAllocation) int {
	if xl, yl := memberIsLeaving(x.Member), memberIsLeaving(y.Member); xl != yl {
		if xl {
			return 1
		}
		return -1
	}
	if c := cmp.Compare(len(x.Shards), len(y.Shards)); c != 0 {
		return c
	}
	if c := cmp.Compare(x.Member.Address, y.Member.Address); c != 0 {
		return c
	}
	return cmp.Compare(pidkey.Of(x.Region), pidkey.Of(y.Region))
}

// regionEntriesFor is Akka's regionEntriesFor: the allocations the strategy
// can use. Akka drops regions whose member it cannot find in its cluster
// view; our coordinator already passes only regions with a known member
// (RegionAllocation carries it), so here only entries without a region PID
// are dropped. The result is a new slice; the Shards slices are shared
// with the caller and only read.
func regionEntriesFor(current []RegionAllocation) []RegionAllocation {
	entries := make([]RegionAllocation, 0, len(current))
	for _, r := range current {
		if r.Region == nil {
			continue
		}
		entries = append(entries, r)
	}
	return entries
}

// sortedRegionEntries returns regionEntriesFor(current) in suitability
// order, most suitable first.
func sortedRegionEntries(current []RegionAllocation) []RegionAllocation {
	entries := regionEntriesFor(current)
	slices.SortStableFunc(entries, compareSuitability)
	return entries
}

// mostSuitableRegion is Akka's mostSuitableRegion: the minimum by
// compareSuitability of regionEntriesFor(current), false when there is
// none. It scans in place instead of building the entries, because the
// coordinator calls it for every new shard.
func mostSuitableRegion(current []RegionAllocation) (RegionAllocation, bool) {
	var best RegionAllocation
	found := false
	for _, r := range current {
		if r.Region == nil { // as regionEntriesFor
			continue
		}
		if !found || compareSuitability(r, best) < 0 {
			best, found = r, true
		}
	}
	return best, found
}

// isAGoodTimeToRebalance is Akka's check, reduced to what we can see. Akka
// also waits while app versions differ (rolling update), while any member
// of the data center is unreachable (the hand-off needs every region's
// ack) and while any member is joining (it should be Up soon, and a
// rebalance now would be redone). We have no app versions, no joining
// state (a member is Up once registered) and no unreachable state (an
// unreachable member is removed, and its region terminated, by the
// coordinator before the strategy runs), so only the first rule is left:
// with no region at all there is nothing to rebalance.
func isAGoodTimeToRebalance(entries []RegionAllocation) bool {
	return len(entries) > 0
}

// sortedUniqueShards returns shards sorted and without duplicates (Akka returns a
// Set; we return a deterministic order). It keeps nil for nothing.
func sortedUniqueShards(shards []string) []string {
	if len(shards) == 0 {
		return nil
	}
	out := slices.Clone(shards)
	slices.Sort(out)
	return slices.Compact(out)
}
