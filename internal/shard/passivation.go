package shard

// Automatic passivation (Akka's akka.cluster.sharding.passivation): the pure
// decisions the Shard calls. The shard only records activity here and
// passivates what these functions and policies choose; nothing in this file
// knows about actors or clocks.
//
// Two mechanisms, independent of each other:
//   - idle: an entity that has had no user message for the idle timeout is
//     passivated (idleChecks, every timeout/2);
//   - active-entity limit: a ReplacementPolicy tracks the active entities and
//     names those to passivate when there are more than the limit.

import (
	"cmp"
	"container/list"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/protoshard/protoshard/internal/shardproto"
	"github.com/protoshard/protoshard/internal/wire"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/shardactor"
)

// idleChecks is a shard's clock of use for idle passivation. Every use of
// an entity (a user message, a StartEntity, its start) takes the next use
// number, its mark; the entity keeps only the mark of its last use. An idle
// check records when it ran and how many uses there had been by then, so
// the shard reads the clock once per check rather than once per message
// (the hot path), and an entity costs one number rather than a time.
//
// An entity is idle once the first check after its last use ran timeout
// ago or longer: its last use is known to have been no later than that
// check, so it is never passivated early. With checks every timeout/2 it
// is passivated between timeout and 1.5 × timeout after its last message,
// as with a timestamp per message.
//
// Marks are 32 bits, to keep an entity's record small; when they run out
// (full), the marks still in use are numbered again from 1 (renumber), the
// checks with them. The zero value is ready to use.
type idleChecks struct {
	uses   uint32      // uses so far: the mark of the latest use
	recent []idleCheck // oldest first; only those a later check may still need
}

// idleCheck is one check: when it ran and how many uses there were then.
type idleCheck struct {
	at   time.Time
	uses uint32
}

// full reports whether every mark has been given: renumber before the
// next use.
func (c *idleChecks) full() bool { return c.uses == math.MaxUint32 }

// use records a use and returns its mark. It must not be called when full.
func (c *idleChecks) use() uint32 {
	c.uses++
	return c.uses
}

// renumber makes the i-th of marks, the marks of the entities still
// compared with the checks (sorted, each an entity's own), mark i+1, and
// changes the checks to match, so that every comparison of those marks
// with a check comes out as before. The caller gives the entities their
// new marks.
func (c *idleChecks) renumber(marks []uint32) {
	for i, ch := range c.recent {
		// How many of the marks the check had seen: the new mark of the
		// last of them.
		n, found := slices.BinarySearch(marks, ch.uses)
		if found {
			n++
		}
		c.recent[i].uses = uint32(n)
	}
	c.uses = uint32(len(marks))
}

// check records a check at now and returns the mark up to which entities
// are idle for timeout or longer: an entity whose last use has a mark at
// most idleUpTo is idle. ok is false when none can be, for want of a check
// that ran timeout ago, or because timeout is zero or negative (idle
// passivation off; then nothing is recorded).
func (c *idleChecks) check(now time.Time, timeout time.Duration) (idleUpTo uint32, ok bool) {
	if timeout <= 0 {
		return 0, false
	}
	cutoff := now.Add(-timeout)
	// The latest check that ran by the cutoff: the later an entity's first
	// check after its last use, the later it goes, so that one decides.
	// Those before it are of no use to later checks (their cutoffs only
	// come later).
	last := -1
	for i, ch := range c.recent {
		if ch.at.After(cutoff) {
			break
		}
		last = i
	}
	if last >= 0 {
		idleUpTo, ok = c.recent[last].uses, true
		c.recent = slices.Delete(c.recent, 0, last)
	}
	c.recent = append(c.recent, idleCheck{at: now, uses: c.uses})
	return idleUpTo, ok
}

// minIdleCheckInterval keeps a tiny idle timeout from turning the repeating
// check into a busy loop.
const minIdleCheckInterval = time.Millisecond

// idleCheckInterval is how often the shard looks for idle entities: half the
// timeout, as Akka's default-idle-strategy (so an entity is passivated
// between timeout and 1.5 × timeout after its last message).
func idleCheckInterval(timeout time.Duration) time.Duration {
	return max(timeout/2, minIdleCheckInterval)
}

// countsAsActivity tells whether a message delivered to an entity keeps it
// active. Only user messages do: the shard's own local messages and the
// messages of protoshard's protocol (whatever route they took) are
// bookkeeping, and an entity that only sees those is idle. StartEntity is
// the exception, as in Akka: starting an entity is using it.
func countsAsActivity(msg any) bool {
	switch msg.(type) {
	case *messages.StartEntity:
		return true
	case *shardproto.Deliver, shardproto.Deliver, *shardproto.GetShardStats, shardproto.GetShardStats, *shardproto.GetCurrentShardState, shardproto.GetCurrentShardState,
		*shardproto.GetPassivationState, shardproto.GetPassivationState, *shardproto.SetActiveEntityLimit, shardproto.SetActiveEntityLimit:
		return false
	}
	return !wire.IsProtocol(msg)
}

// ReplacementPolicy tracks a shard's active entities and chooses which to
// passivate when they exceed the active-entity limit (Akka's
// ActiveEntities). It is a plain data structure, not safe for concurrent
// use: the shard owns one.
//
// An entity chosen for passivation (returned by Touch or SetLimit) is no
// longer tracked; the shard tells the policy of every other entity that
// stops with Remove.
type ReplacementPolicy interface {
	// Touch records a use of entity id (tracking it if new) and returns
	// the entities to passivate because the limit is exceeded, in the
	// order chosen.
	Touch(id string) (evict []string)
	// Remove stops tracking id; unknown IDs are ignored.
	Remove(id string)
	// SetLimit changes the limit (0 or negative: no limit) and returns the
	// entities to passivate to come within it.
	SetLimit(n int) (evict []string)
	// Limit is the limit in force; 0 means none.
	Limit() int
	// Len is the number of entities tracked.
	Len() int
	// Active lists the entities tracked in the order the policy would
	// passivate them, the next to go first.
	Active() []string
}

// NewReplacementPolicy returns the policy called name (see the *Policy
// constants; "" is LeastRecentlyUsedPolicy) with the given limit (0: none).
func NewReplacementPolicy(name string, limit int) (ReplacementPolicy, error) {
	switch name {
	case "", shardactor.LeastRecentlyUsedPolicy:
		return NewLeastRecentlyUsed(limit), nil
	case shardactor.SegmentedLeastRecentlyUsedPolicy:
		return NewSegmentedLeastRecentlyUsed(limit)
	}
	return nil, fmt.Errorf("shard: unknown replacement policy %q (known: %q, %q)",
		name, shardactor.LeastRecentlyUsedPolicy, shardactor.SegmentedLeastRecentlyUsedPolicy)
}

// entityUse is what an entity's record says of its use, for a
// replacement policy that starts tracking it late (see activeEntityLimit).
type entityUse struct {
	id   string
	mark uint32 // of its last use (see idleChecks)
	uses int    // how many times it was used, at most maxCountedUses
}

// maxCountedUses bounds the uses an entity's record counts: a policy
// only tells apart as many uses as it has levels (one for least recently
// used, two for the segmented policy the shard builds), so a few more
// than that lose nothing and keep track cheap.
const maxCountedUses = 8

// byMark orders uses from the least recent.
func byMark(a, b entityUse) int { return cmp.Compare(a.mark, b.mark) }

// activeEntityLimit is a shard's active-entity limit with its replacement
// policy. The policy tracks the active entities only once a limit has been
// in force: without one it never chooses anybody, and tracking every
// entity would cost a list element and a map entry each, about as much as
// the shard's record of the entity. The records keep the mark and count of
// each entity's uses instead, from which the policy is built as it would
// be had it tracked them all along (see track). The zero value is not
// ready: use newActiveEntityLimit.
type activeEntityLimit struct {
	name     string // of the policy, to build one for a query
	policy   ReplacementPolicy
	tracking bool
}

// newActiveEntityLimit returns the limit with the policy called name and
// the given limit (0: none). An unknown name fails; the limit is then
// returned with LeastRecentlyUsed, ready to use.
func newActiveEntityLimit(name string, limit int) (activeEntityLimit, error) {
	policy, err := NewReplacementPolicy(name, max(limit, 0))
	if err != nil {
		name, policy = shardactor.LeastRecentlyUsedPolicy, NewLeastRecentlyUsed(max(limit, 0))
	}
	return activeEntityLimit{name: name, policy: policy, tracking: limit > 0}, err
}

// touch records a use of the active entity id and returns the entities to
// passivate beyond the limit (see ReplacementPolicy.Touch).
func (l *activeEntityLimit) touch(id string) []string {
	if !l.tracking {
		return nil
	}
	return l.policy.Touch(id)
}

// remove stops tracking id: it stops, or was chosen for passivation.
func (l *activeEntityLimit) remove(id string) {
	if l.tracking {
		l.policy.Remove(id)
	}
}

// setLimit changes the limit (0: none) and returns the entities to
// passivate beyond it. The first limit starts the tracking of the active
// entities, whose uses active lists (it is not called otherwise).
func (l *activeEntityLimit) setLimit(n int, active func() []entityUse) []string {
	if !l.tracking {
		if n <= 0 {
			return nil
		}
		track(l.policy, active())
		l.tracking = true
	}
	return l.policy.SetLimit(n)
}

// limit is the limit in force; 0 means none.
func (l *activeEntityLimit) limit() int { return l.policy.Limit() }

// order lists the active entities in the order the policy would passivate
// them (see ReplacementPolicy.Active); active lists their uses, and is only
// called while the policy does not track them.
func (l *activeEntityLimit) order(active func() []entityUse) []string {
	if l.tracking {
		return l.policy.Active()
	}
	policy, err := NewReplacementPolicy(l.name, 0)
	if err != nil {
		policy = NewLeastRecentlyUsed(0) // cannot happen: l.name was checked
	}
	track(policy, active())
	return policy.Active()
}

// track makes p, which has no limit, track the entities of used as if it
// had seen every use of them: in the order of their last use, each touched
// as often as it was used. Without a limit nothing is passivated and no
// entity is demoted, so a policy's state is its entities' order of last
// use and how often each was used: least recently used keeps the order,
// segmented least recently used the order within each level, the level
// being one less than the uses (up to its highest).
func track(p ReplacementPolicy, used []entityUse) {
	slices.SortFunc(used, byMark)
	for _, u := range used {
		for range max(u.uses, 1) {
			p.Touch(u.id)
		}
	}
}

// --- least recently used ---

// LeastRecentlyUsed is Akka's least-recently-used replacement policy: over
// the limit, the entities touched longest ago are passivated. All
// operations but Active take constant time. The zero value has no limit and
// is ready to use; it must not be copied after first use.
type LeastRecentlyUsed struct {
	limit int
	order list.List                // of string, least recent at the front
	elems map[string]*list.Element // id -> its element in order
}

var _ ReplacementPolicy = (*LeastRecentlyUsed)(nil)

// NewLeastRecentlyUsed returns an empty LeastRecentlyUsed with the given
// limit (0 or negative: no limit).
func NewLeastRecentlyUsed(limit int) *LeastRecentlyUsed {
	return &LeastRecentlyUsed{limit: max(limit, 0)}
}

// Touch makes id the most recently used entity and returns the least
// recently used ones beyond the limit.
func (l *LeastRecentlyUsed) Touch(id string) []string {
	if e, ok := l.elems[id]; ok {
		l.order.MoveToBack(e)
	} else {
		if l.elems == nil {
			l.elems = map[string]*list.Element{}
		}
		l.elems[id] = l.order.PushBack(id)
	}
	return l.removeExcess()
}

// Remove stops tracking id.
func (l *LeastRecentlyUsed) Remove(id string) {
	if e, ok := l.elems[id]; ok {
		l.order.Remove(e)
		delete(l.elems, id)
	}
}

// SetLimit changes the limit (0 or negative: none) and returns the least
// recently used entities beyond it.
func (l *LeastRecentlyUsed) SetLimit(n int) []string {
	l.limit = max(n, 0)
	return l.removeExcess()
}

// Limit is the limit in force; 0 means none.
func (l *LeastRecentlyUsed) Limit() int { return l.limit }

// Len is the number of entities tracked.
func (l *LeastRecentlyUsed) Len() int { return len(l.elems) }

// Active lists the entities from the least to the most recently used.
func (l *LeastRecentlyUsed) Active() []string {
	ids := make([]string, 0, len(l.elems))
	for e := l.order.Front(); e != nil; e = e.Next() {
		ids = append(ids, e.Value.(string))
	}
	return ids
}

func (l *LeastRecentlyUsed) removeExcess() []string {
	if l.limit == 0 {
		return nil
	}
	var evict []string
	for len(l.elems) > l.limit {
		front := l.order.Front()
		id := front.Value.(string)
		l.order.Remove(front)
		delete(l.elems, id)
		evict = append(evict, id)
	}
	return evict
}

// --- segmented least recently used ---

// defaultSegmentProportions are the proportions of Akka's segmented LRU
// examples and of Caffeine's SLRU: a small probationary segment (20%) for
// entities used once, a large protected one (80%) for those used again.
var defaultSegmentProportions = []float64{0.2, 0.8}

// SegmentedLeastRecentlyUsed is Akka's segmented least-recently-used
// replacement policy (SLRU). Entities are tracked in levels, each a recency
// list with its share of the limit: a new entity enters the lowest
// ("probationary") level, an entity touched again moves one level up, and a
// level over its share demotes its least recent entities one level down.
// Over the limit, the least recent entities of the lowest level are
// passivated, so an entity used once goes before one used repeatedly, and
// a burst of one-off entities cannot flush the entities in steady use.
//
// With no limit, entities still move up on reuse (no level has a share to
// keep), so the policy knows who was reused when a limit comes. All
// operations but Active and SetLimit take constant time (amortized). The
// zero value has no limit and the default proportions 0.2 and 0.8; it must
// not be copied after first use.
type SegmentedLeastRecentlyUsed struct {
	limit       int
	proportions []float64
	levelLimits []int                    // share of each level; only used with a limit
	levels      []*list.List             // of *segmentNode, least recent at the front; 0 is the lowest
	nodes       map[string]*list.Element // id -> its element in levels[node.level]
}

// segmentNode is one tracked entity.
type segmentNode struct {
	id    string
	level int
}

var _ ReplacementPolicy = (*SegmentedLeastRecentlyUsed)(nil)

// NewSegmentedLeastRecentlyUsed returns an empty SegmentedLeastRecentlyUsed
// with the given limit (0 or negative: no limit) and the proportions of the
// limit given to each level, lowest first. Without proportions, Akka's
// 0.2 and 0.8. The proportions must be positive and add up to 1.
func NewSegmentedLeastRecentlyUsed(limit int, proportions ...float64) (*SegmentedLeastRecentlyUsed, error) {
	if len(proportions) == 0 {
		proportions = defaultSegmentProportions
	}
	if err := validateSegmentProportions(proportions); err != nil {
		return nil, err
	}
	s := &SegmentedLeastRecentlyUsed{proportions: slices.Clone(proportions)}
	s.init()
	s.SetLimit(limit)
	return s, nil
}

// validateSegmentProportions: positive, finite and adding up to 1 (within
// rounding). A positive lowest proportion gives the lowest level a share
// for any limit ≥ 1 (segmentLimits sees to it), so a new entity is never
// chosen the moment it is touched.
func validateSegmentProportions(proportions []float64) error {
	sum := 0.0
	for i, p := range proportions {
		if !(p > 0) || math.IsInf(p, 0) {
			return fmt.Errorf("shard: segment proportion %d is %v; it must be positive", i, p)
		}
		sum += p
	}
	if math.Abs(sum-1) > 1e-9 {
		return fmt.Errorf("shard: segment proportions %v add up to %v, not 1", proportions, sum)
	}
	return nil
}

// segmentLimits shares limit between the levels as Akka does: each level
// above the lowest gets floor(proportion × limit), the lowest the rest, so
// the shares add up to the limit exactly.
func segmentLimits(limit int, proportions []float64) []int {
	limits := make([]int, len(proportions))
	higher := 0
	for i := 1; i < len(proportions); i++ {
		limits[i] = int(proportions[i] * float64(limit))
		higher += limits[i]
	}
	limits[0] = limit - higher
	// Proportions that add up to 1 only within rounding could leave the
	// lowest level no share; then a new entity would be chosen the moment
	// it is touched. Take its one place from the highest level that has
	// one.
	for i := len(limits) - 1; limits[0] < 1 && limit > 0 && i > 0; i-- {
		if limits[i] > 0 {
			limits[i]--
			limits[0]++
		}
	}
	return limits
}

func (s *SegmentedLeastRecentlyUsed) init() {
	if s.levels != nil {
		return
	}
	if s.proportions == nil {
		s.proportions = defaultSegmentProportions
	}
	s.levels = make([]*list.List, len(s.proportions))
	for i := range s.levels {
		s.levels[i] = list.New()
	}
	s.levelLimits = segmentLimits(s.limit, s.proportions)
	s.nodes = map[string]*list.Element{}
}

// Touch tracks a new id in the lowest level or moves a known one up a
// level (to the most recent place of the highest level if it is there
// already), and returns the entities to passivate beyond the limit.
func (s *SegmentedLeastRecentlyUsed) Touch(id string) []string {
	s.init()
	if e, ok := s.nodes[id]; ok {
		s.promote(e)
	} else {
		s.nodes[id] = s.levels[0].PushBack(&segmentNode{id: id})
	}
	return s.removeOverLimit()
}

// Remove stops tracking id.
func (s *SegmentedLeastRecentlyUsed) Remove(id string) {
	if e, ok := s.nodes[id]; ok {
		s.levels[e.Value.(*segmentNode).level].Remove(e)
		delete(s.nodes, id)
	}
}

// SetLimit changes the limit (0 or negative: none), shares it between the
// levels again, and returns the entities to passivate beyond it.
func (s *SegmentedLeastRecentlyUsed) SetLimit(n int) []string {
	s.init()
	s.limit = max(n, 0)
	s.levelLimits = segmentLimits(s.limit, s.proportions)
	return s.removeOverLimit()
}

// Limit is the limit in force; 0 means none.
func (s *SegmentedLeastRecentlyUsed) Limit() int { return s.limit }

// Len is the number of entities tracked.
func (s *SegmentedLeastRecentlyUsed) Len() int { return len(s.nodes) }

// Active lists the entities level by level from the lowest, each level
// from its least to its most recently used entity: the order in which they
// would be passivated if nothing were touched again.
func (s *SegmentedLeastRecentlyUsed) Active() []string {
	ids := make([]string, 0, len(s.nodes))
	for _, level := range s.levels {
		for e := level.Front(); e != nil; e = e.Next() {
			ids = append(ids, e.Value.(*segmentNode).id)
		}
	}
	return ids
}

func (s *SegmentedLeastRecentlyUsed) promote(e *list.Element) {
	n := e.Value.(*segmentNode)
	highest := len(s.levels) - 1
	if n.level == highest {
		s.levels[highest].MoveToBack(e)
		return
	}
	s.moveTo(e, n.level+1)
	s.adjust(n.level)
}

// adjust demotes the least recent entities of level (above the lowest)
// beyond its share to the most recent end of the level below.
func (s *SegmentedLeastRecentlyUsed) adjust(level int) {
	if s.limit == 0 || level == 0 {
		return
	}
	for s.levels[level].Len() > s.levelLimits[level] {
		s.moveTo(s.levels[level].Front(), level-1)
	}
}

// moveTo puts e at the most recent end of level.
func (s *SegmentedLeastRecentlyUsed) moveTo(e *list.Element, level int) {
	n := e.Value.(*segmentNode)
	s.levels[n.level].Remove(e)
	n.level = level
	s.nodes[n.id] = s.levels[level].PushBack(n)
}

// removeOverLimit brings every level above the lowest within its share
// (highest first, so what one level demotes the next one down can demote
// in turn), then passivates the excess from the least recent end of the
// lowest level, which then holds at least the excess (each higher level
// being within its share).
func (s *SegmentedLeastRecentlyUsed) removeOverLimit() []string {
	if s.limit == 0 || len(s.nodes) <= s.limit {
		return nil
	}
	for level := len(s.levels) - 1; level > 0; level-- {
		s.adjust(level)
	}
	excess := len(s.nodes) - s.limit
	evict := make([]string, 0, excess)
	for range excess {
		front := s.levels[0].Front()
		if front == nil {
			break // cannot happen (see above); never loop on an empty level
		}
		id := front.Value.(*segmentNode).id
		s.levels[0].Remove(front)
		delete(s.nodes, id)
		evict = append(evict, id)
	}
	return evict
}
