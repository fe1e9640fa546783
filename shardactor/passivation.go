package shardactor

// Automatic passivation (Akka's akka.cluster.sharding.passivation): the pure
// decisions the Shard calls. The shard only records activity here and
// passivates what these functions and policies choose; nothing in this file
// knows about actors or clocks.
//
// Two mechanisms, independent of each other:
//   - idle: an entity that has had no user message for the idle timeout is
//     passivated (CheckIdle, every timeout/2);
//   - active-entity limit: a ReplacementPolicy tracks the active entities and
//     names those to passivate when there are more than the limit.

import (
	"container/list"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/proto"
)

// Activity is what a shard keeps of one entity for idle passivation. A
// user message only sets Used; the clock is read by the idle check, once
// per check rather than once per message, which is the hot path.
type Activity struct {
	// LastSeen is not before the entity's last user message as of the last
	// check: the time of its start, or of the first check that found Used.
	LastSeen time.Time
	// Used: a user message arrived since the last check.
	Used bool
}

// CheckIdle is one idle check of an entity at now. It returns the activity
// to keep and whether the entity has been idle for timeout or longer. An
// entity used since the last check is not idle, and now becomes its
// LastSeen: later than its real last message, so an entity is never
// passivated early. With checks every timeout/2 it is passivated between
// timeout and 1.5 × timeout after its last message, as with a timestamp
// per message. A zero or negative timeout means idle passivation is off:
// nothing is idle.
func CheckIdle(now time.Time, a Activity, timeout time.Duration) (Activity, bool) {
	switch {
	case timeout <= 0:
		return a, false
	case a.Used:
		return Activity{LastSeen: now}, false
	default:
		return a, now.Sub(a.LastSeen) >= timeout
	}
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

// protocolPackage is the protobuf package of protoshard's wire protocol.
var protocolPackage = (&messages.StartEntity{}).ProtoReflect().Descriptor().ParentFile().Package()

// countsAsActivity tells whether a message delivered to an entity keeps it
// active. Only user messages do: the shard's own local messages and the
// messages of protoshard's protocol (whatever route they took) are
// bookkeeping, and an entity that only sees those is idle. StartEntity is
// the exception, as in Akka: starting an entity is using it.
func countsAsActivity(msg any) bool {
	switch msg.(type) {
	case *messages.StartEntity:
		return true
	case *Deliver, Deliver, *GetShardStats, GetShardStats, *GetCurrentShardState, GetCurrentShardState,
		*GetPassivationState, GetPassivationState, *SetActiveEntityLimit, SetActiveEntityLimit:
		return false
	}
	if m, ok := msg.(proto.Message); ok && m.ProtoReflect().Descriptor().ParentFile().Package() == protocolPackage {
		return false
	}
	return true
}

// Names of the replacement policies (Settings.ReplacementPolicy), as in
// Akka's passivation.strategy-defaults.replacement.policy.
const (
	// LeastRecentlyUsedPolicy passivates the least recently used entities:
	// see LeastRecentlyUsed. The default.
	LeastRecentlyUsedPolicy = "least-recently-used"
	// SegmentedLeastRecentlyUsedPolicy passivates the least recently used
	// entities of the lowest segment first: see SegmentedLeastRecentlyUsed
	// (with the proportions 0.2 and 0.8).
	SegmentedLeastRecentlyUsedPolicy = "segmented-least-recently-used"
)

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
	case "", LeastRecentlyUsedPolicy:
		return NewLeastRecentlyUsed(limit), nil
	case SegmentedLeastRecentlyUsedPolicy:
		return NewSegmentedLeastRecentlyUsed(limit)
	}
	return nil, fmt.Errorf("shardactor: unknown replacement policy %q (known: %q, %q)",
		name, LeastRecentlyUsedPolicy, SegmentedLeastRecentlyUsedPolicy)
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
			return fmt.Errorf("shardactor: segment proportion %d is %v; it must be positive", i, p)
		}
		sum += p
	}
	if math.Abs(sum-1) > 1e-9 {
		return fmt.Errorf("shardactor: segment proportions %v add up to %v, not 1", proportions, sum)
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
