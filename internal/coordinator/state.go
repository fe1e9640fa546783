package coordinator

import (
	"fmt"
	"maps"
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/pidkey"
)

// RegionKey is the map key of a region or proxy PID. PIDs are pointers
// (and carry a cached process), so they are never compared by identity.
func RegionKey(pid *actor.PID) string { return pidkey.Of(pid) }

// RegionEntry is a registered region (or proxy): its PID, the member
// incarnation it runs on and, for a region, its shards in allocation order
// and its extractor.
type RegionEntry struct {
	PID      *actor.PID // the region's (or proxy's) PID
	MemberID string     // the member incarnation it runs on
	Shards   []string   // the region's shards, in allocation order; nil for a proxy
	// Extractor is the region's extractor as it registered; unknown for a
	// proxy, and for a region of an older version.
	Extractor ExtractorIdentity
}

// ExtractorIdentity names how a region's message extractor maps entity
// IDs to shards. Two regions whose identities differ may put the same
// entity in two shards, each hosted somewhere: two live incarnations. The
// zero value is unknown: a region of an older version, which does not say.
type ExtractorIdentity struct {
	// Name names the mapping: "hash-code" for the default extractor, else
	// the extractor's own name or its Go type. "" is unknown.
	Name string
	// NumberOfShards is the number of shards it spreads entities over; 0
	// when the extractor does not say.
	NumberOfShards int
}

// Known reports whether the region said what its extractor is.
func (e ExtractorIdentity) Known() bool { return e.Name != "" }

// Compatible reports whether regions with extractors e and o may run side
// by side: both are the same, or one is unknown (nothing can be told about
// a region of an older version, and refusing it would make upgrading to
// this version impossible without a full restart).
func (e ExtractorIdentity) Compatible(o ExtractorIdentity) bool {
	return !e.Known() || !o.Known() || e == o
}

// String describes the extractor, for logs and refusals.
func (e ExtractorIdentity) String() string {
	switch {
	case !e.Known():
		return "an unknown extractor (an older version)"
	case e.NumberOfShards > 0:
		return fmt.Sprintf("%s with %d shards", e.Name, e.NumberOfShards)
	default:
		return e.Name
	}
}

// State is Akka's ShardCoordinator.Internal.State: which regions and
// proxies are registered and where every allocated shard lives. Apply
// changes it in place; Clone is a deep copy (the coordinator keeps the
// state as last written apart from the one it changes, see stateWrites).
type State struct {
	// Regions by RegionKey.
	Regions map[string]RegionEntry
	// Proxies by RegionKey; their Shards are always empty.
	Proxies map[string]RegionEntry
	// Shards maps every allocated shard to its region's RegionKey.
	Shards map[string]string
	// Unallocated holds the shards that must be started again somewhere
	// (remember-entities only): deallocated or on a terminated region.
	Unallocated map[string]struct{}
	// RememberEntities switches the Unallocated bookkeeping on.
	RememberEntities bool
}

// NewState returns the empty state.
func NewState(rememberEntities bool) State {
	return State{
		Regions:          map[string]RegionEntry{},
		Proxies:          map[string]RegionEntry{},
		Shards:           map[string]string{},
		Unallocated:      map[string]struct{}{},
		RememberEntities: rememberEntities,
	}
}

// Clone returns a deep copy.
func (s State) Clone() State {
	c := State{
		Regions:          make(map[string]RegionEntry, len(s.Regions)),
		Proxies:          make(map[string]RegionEntry, len(s.Proxies)),
		Shards:           maps.Clone(s.Shards),
		Unallocated:      maps.Clone(s.Unallocated),
		RememberEntities: s.RememberEntities,
	}
	if c.Shards == nil {
		c.Shards = map[string]string{}
	}
	if c.Unallocated == nil {
		c.Unallocated = map[string]struct{}{}
	}
	for k, r := range s.Regions {
		r.Shards = slices.Clone(r.Shards)
		c.Regions[k] = r
	}
	for k, p := range s.Proxies {
		p.Shards = nil
		c.Proxies[k] = p
	}
	return c
}

// RegionOf returns the region that hosts shard.
func (s State) RegionOf(shard string) (*actor.PID, bool) {
	key, ok := s.Shards[shard]
	if !ok {
		return nil, false
	}
	r, ok := s.Regions[key]
	if !ok {
		return nil, false
	}
	return r.PID, true
}

// IsRegion reports whether pid is a registered region.
func (s State) IsRegion(pid *actor.PID) bool {
	_, ok := s.Regions[RegionKey(pid)]
	return ok
}

// IsProxy reports whether pid is a registered proxy.
func (s State) IsProxy(pid *actor.PID) bool {
	_, ok := s.Proxies[RegionKey(pid)]
	return ok
}

// Event is a change of the coordinator's State (Akka's
// ShardCoordinator.Internal.DomainEvent).
type Event interface {
	fmt.Stringer
	domainEvent()
}

// ShardRegionRegistered: a region registered. Registered again by the
// same member incarnation, a region whose extractor the state does not
// know yet (it registered with a coordinator of an older version) has it
// recorded.
type ShardRegionRegistered struct {
	Region    *actor.PID        // the region
	MemberID  string            // the member incarnation it runs on
	Extractor ExtractorIdentity // its extractor; the zero value if it did not say
}

// ShardRegionProxyRegistered: a proxy registered.
type ShardRegionProxyRegistered struct {
	Proxy    *actor.PID // the proxy
	MemberID string     // the member incarnation it runs on
}

// ShardRegionTerminated: a region stopped, left or crashed; its shards are
// deallocated.
type ShardRegionTerminated struct {
	Region *actor.PID // the region that is gone
}

// ShardRegionProxyTerminated: a proxy stopped, left or crashed.
type ShardRegionProxyTerminated struct {
	Proxy *actor.PID // the proxy that is gone
}

// ShardHomeAllocated: shard now lives on region.
type ShardHomeAllocated struct {
	Shard  string     // the shard
	Region *actor.PID // its new home
}

// ShardHomeDeallocated: shard lives nowhere (after a hand-off).
type ShardHomeDeallocated struct {
	Shard string // the shard that lives nowhere now
}

func (ShardRegionRegistered) domainEvent()      {}
func (ShardRegionProxyRegistered) domainEvent() {}
func (ShardRegionTerminated) domainEvent()      {}
func (ShardRegionProxyTerminated) domainEvent() {}
func (ShardHomeAllocated) domainEvent()         {}
func (ShardHomeDeallocated) domainEvent()       {}

// String names the event and its region, for logs.
func (e ShardRegionRegistered) String() string {
	if !e.Extractor.Known() {
		return fmt.Sprintf("ShardRegionRegistered(%s, member %s)", RegionKey(e.Region), e.MemberID)
	}
	return fmt.Sprintf("ShardRegionRegistered(%s, member %s, %s)", RegionKey(e.Region), e.MemberID, e.Extractor)
}

// String names the event and its proxy, for logs.
func (e ShardRegionProxyRegistered) String() string {
	return fmt.Sprintf("ShardRegionProxyRegistered(%s, member %s)", RegionKey(e.Proxy), e.MemberID)
}

// String names the event and its region, for logs.
func (e ShardRegionTerminated) String() string {
	return fmt.Sprintf("ShardRegionTerminated(%s)", RegionKey(e.Region))
}

// String names the event and its proxy, for logs.
func (e ShardRegionProxyTerminated) String() string {
	return fmt.Sprintf("ShardRegionProxyTerminated(%s)", RegionKey(e.Proxy))
}

// String names the event, its shard and region, for logs.
func (e ShardHomeAllocated) String() string {
	return fmt.Sprintf("ShardHomeAllocated(%s, %s)", e.Shard, RegionKey(e.Region))
}

// String names the event and its shard, for logs.
func (e ShardHomeDeallocated) String() string {
	return fmt.Sprintf("ShardHomeDeallocated(%s)", e.Shard)
}

// Apply changes s to the state after e, in place and in time independent
// of the state's size for every event but a region's termination and a
// shard's deallocation (linear in the region's shards): the coordinator
// applies an event per allocation, and a copy of the whole state each time
// cost up to a millisecond at 20,000 shards. A State that must not change
// with s (the snapshot a write carries) is a Clone.
//
// When e does not fit the state, Apply returns an error and s is as it
// was: these are Akka's `require`s, which there throw and restart the
// coordinator; here the caller logs and ignores.
func (s *State) Apply(e Event) error {
	switch e := e.(type) {
	case ShardRegionRegistered:
		key := RegionKey(e.Region)
		if key == "" {
			return fmt.Errorf("%v: nil region", e)
		}
		if r, ok := s.Regions[key]; ok {
			if r.MemberID != e.MemberID || r.Extractor.Known() || !e.Extractor.Known() {
				return fmt.Errorf("%v: region already registered", e)
			}
			r.Extractor = e.Extractor
			s.Regions[key] = r
			return nil
		}
		s.ensureMaps()
		s.Regions[key] = RegionEntry{PID: e.Region, MemberID: e.MemberID, Extractor: e.Extractor}
	case ShardRegionProxyRegistered:
		key := RegionKey(e.Proxy)
		if key == "" {
			return fmt.Errorf("%v: nil proxy", e)
		}
		if _, ok := s.Proxies[key]; ok {
			return fmt.Errorf("%v: proxy already registered", e)
		}
		s.ensureMaps()
		s.Proxies[key] = RegionEntry{PID: e.Proxy, MemberID: e.MemberID}
	case ShardRegionTerminated:
		key := RegionKey(e.Region)
		r, ok := s.Regions[key]
		if !ok {
			return fmt.Errorf("%v: region not registered", e)
		}
		s.ensureMaps()
		for _, shard := range r.Shards {
			delete(s.Shards, shard)
			if s.RememberEntities {
				s.Unallocated[shard] = struct{}{}
			}
		}
		delete(s.Regions, key)
	case ShardRegionProxyTerminated:
		key := RegionKey(e.Proxy)
		if _, ok := s.Proxies[key]; !ok {
			return fmt.Errorf("%v: proxy not registered", e)
		}
		delete(s.Proxies, key)
	case ShardHomeAllocated:
		key := RegionKey(e.Region)
		if e.Shard == "" {
			return fmt.Errorf("%v: empty shard id", e)
		}
		if _, ok := s.Regions[key]; !ok {
			return fmt.Errorf("%v: region not registered", e)
		}
		if _, ok := s.Shards[e.Shard]; ok {
			return fmt.Errorf("%v: shard already allocated", e)
		}
		s.ensureMaps()
		s.Shards[e.Shard] = key
		r := s.Regions[key]
		r.Shards = append(r.Shards, e.Shard)
		s.Regions[key] = r
		delete(s.Unallocated, e.Shard)
	case ShardHomeDeallocated:
		key, ok := s.Shards[e.Shard]
		if !ok {
			return fmt.Errorf("%v: shard not allocated", e)
		}
		if _, ok := s.Regions[key]; !ok {
			return fmt.Errorf("%v: region %s not registered", e, key)
		}
		delete(s.Shards, e.Shard)
		r := s.Regions[key]
		if i := slices.Index(r.Shards, e.Shard); i >= 0 {
			r.Shards = slices.Delete(r.Shards, i, i+1)
		}
		s.Regions[key] = r
		if s.RememberEntities {
			s.ensureMaps()
			s.Unallocated[e.Shard] = struct{}{}
		}
	case nil:
		return fmt.Errorf("nil event")
	default:
		return fmt.Errorf("unknown event %T", e)
	}
	return nil
}

// ensureMaps allocates the maps of a zero State, which works as the empty
// state.
func (s *State) ensureMaps() {
	if s.Regions == nil {
		s.Regions = map[string]RegionEntry{}
	}
	if s.Proxies == nil {
		s.Proxies = map[string]RegionEntry{}
	}
	if s.Shards == nil {
		s.Shards = map[string]string{}
	}
	if s.Unallocated == nil {
		s.Unallocated = map[string]struct{}{}
	}
}
