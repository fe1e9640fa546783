package coordinator

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// Helpers of the state tests carry an "st" prefix, to keep them apart from
// the other test files' helpers in this package.

// stApplied returns a copy of s after e, leaving s as it is.
func stApplied(s State, e Event) (State, error) {
	n := s.Clone()
	if err := n.Apply(e); err != nil {
		return s, err
	}
	return n, nil
}

// stUnallocated builds an Unallocated set.
func stUnallocated(shards ...string) map[string]struct{} {
	m := map[string]struct{}{}
	for _, s := range shards {
		m[s] = struct{}{}
	}
	return m
}

// stWant builds the expected state from its parts; regions and proxies map
// a PID to (member id, shards).
type stEntry struct {
	pid    *actor.PID
	member string
	shards []string
}

func stWant(remember bool, regions, proxies []stEntry, unallocated ...string) State {
	s := NewState(remember)
	for _, r := range regions {
		s.Regions[RegionKey(r.pid)] = RegionEntry{PID: r.pid, MemberID: r.member, Shards: r.shards}
		for _, sh := range r.shards {
			s.Shards[sh] = RegionKey(r.pid)
		}
	}
	for _, p := range proxies {
		s.Proxies[RegionKey(p.pid)] = RegionEntry{PID: p.pid, MemberID: p.member}
	}
	s.Unallocated = stUnallocated(unallocated...)
	return s
}

func TestStateApplyHappyPath(t *testing.T) {
	a, b := stRegion(1), stRegion(2)
	pa := stProxy(1)
	cases := []struct {
		name     string
		remember bool
		before   []Event
		event    Event
		want     State
	}{
		{name: "region registered", event: ShardRegionRegistered{Region: a, MemberID: "m1"},
			want: stWant(false, []stEntry{{a, "m1", nil}}, nil)},
		{name: "second region registered", before: []Event{ShardRegionRegistered{Region: a, MemberID: "m1"}},
			event: ShardRegionRegistered{Region: b, MemberID: "m2"},
			want:  stWant(false, []stEntry{{a, "m1", nil}, {b, "m2", nil}}, nil)},
		{name: "proxy registered", event: ShardRegionProxyRegistered{Proxy: pa, MemberID: "m1"},
			want: stWant(false, nil, []stEntry{{pa, "m1", nil}})},
		{name: "a region and a proxy on the same node are distinct",
			before: []Event{ShardRegionProxyRegistered{Proxy: pa, MemberID: "m1"}},
			event:  ShardRegionRegistered{Region: a, MemberID: "m1"},
			want:   stWant(false, []stEntry{{a, "m1", nil}}, []stEntry{{pa, "m1", nil}})},
		{name: "proxy terminated",
			before: []Event{ShardRegionProxyRegistered{Proxy: pa, MemberID: "m1"}, ShardRegionRegistered{Region: a, MemberID: "m1"}},
			event:  ShardRegionProxyTerminated{Proxy: pa},
			want:   stWant(false, []stEntry{{a, "m1", nil}}, nil)},
		{name: "shard allocated", before: []Event{ShardRegionRegistered{Region: a, MemberID: "m1"}},
			event: ShardHomeAllocated{Shard: "s1", Region: a},
			want:  stWant(false, []stEntry{{a, "m1", []string{"s1"}}}, nil)},
		{name: "shards kept in allocation order",
			before: []Event{ShardRegionRegistered{Region: a, MemberID: "m1"}, ShardHomeAllocated{Shard: "s9", Region: a}, ShardHomeAllocated{Shard: "s1", Region: a}},
			event:  ShardHomeAllocated{Shard: "s5", Region: a},
			want:   stWant(false, []stEntry{{a, "m1", []string{"s9", "s1", "s5"}}}, nil)},
		{name: "shard deallocated",
			before: []Event{ShardRegionRegistered{Region: a, MemberID: "m1"}, ShardHomeAllocated{Shard: "s1", Region: a}, ShardHomeAllocated{Shard: "s2", Region: a}, ShardHomeAllocated{Shard: "s3", Region: a}},
			event:  ShardHomeDeallocated{Shard: "s2"},
			want:   stWant(false, []stEntry{{a, "m1", []string{"s1", "s3"}}}, nil)},
		{name: "shard deallocated, remember-entities: unallocated", remember: true,
			before: []Event{ShardRegionRegistered{Region: a, MemberID: "m1"}, ShardHomeAllocated{Shard: "s1", Region: a}, ShardHomeAllocated{Shard: "s2", Region: a}},
			event:  ShardHomeDeallocated{Shard: "s1"},
			want:   stWant(true, []stEntry{{a, "m1", []string{"s2"}}}, nil, "s1")},
		{name: "unallocated shard allocated again, remember-entities", remember: true,
			before: []Event{ShardRegionRegistered{Region: a, MemberID: "m1"}, ShardRegionRegistered{Region: b, MemberID: "m2"},
				ShardHomeAllocated{Shard: "s1", Region: a}, ShardHomeAllocated{Shard: "s2", Region: a}, ShardHomeDeallocated{Shard: "s1"}, ShardHomeDeallocated{Shard: "s2"}},
			event: ShardHomeAllocated{Shard: "s1", Region: b},
			want:  stWant(true, []stEntry{{a, "m1", []string{}}, {b, "m2", []string{"s1"}}}, nil, "s2")},
		{name: "region terminated: its shards deallocated, others kept",
			before: []Event{ShardRegionRegistered{Region: a, MemberID: "m1"}, ShardRegionRegistered{Region: b, MemberID: "m2"},
				ShardHomeAllocated{Shard: "s1", Region: a}, ShardHomeAllocated{Shard: "s2", Region: b}, ShardHomeAllocated{Shard: "s3", Region: a}},
			event: ShardRegionTerminated{Region: a},
			want:  stWant(false, []stEntry{{b, "m2", []string{"s2"}}}, nil)},
		{name: "region terminated, remember-entities: its shards unallocated", remember: true,
			before: []Event{ShardRegionRegistered{Region: a, MemberID: "m1"}, ShardRegionRegistered{Region: b, MemberID: "m2"},
				ShardHomeAllocated{Shard: "s1", Region: a}, ShardHomeAllocated{Shard: "s2", Region: b}, ShardHomeAllocated{Shard: "s3", Region: a}},
			event: ShardRegionTerminated{Region: a},
			want:  stWant(true, []stEntry{{b, "m2", []string{"s2"}}}, nil, "s1", "s3")},
		{name: "region terminated, remember-entities: earlier unallocated kept", remember: true,
			before: []Event{ShardRegionRegistered{Region: a, MemberID: "m1"}, ShardRegionRegistered{Region: b, MemberID: "m2"},
				ShardHomeAllocated{Shard: "s1", Region: a}, ShardHomeAllocated{Shard: "s2", Region: b}, ShardHomeDeallocated{Shard: "s2"}},
			event: ShardRegionTerminated{Region: a},
			want:  stWant(true, []stEntry{{b, "m2", []string{}}}, nil, "s1", "s2")},
		{name: "region with no shards terminated",
			before: []Event{ShardRegionRegistered{Region: a, MemberID: "m1"}},
			event:  ShardRegionTerminated{Region: a},
			want:   stWant(false, nil, nil)},
		{name: "a terminated region registers again (new incarnation)",
			before: []Event{ShardRegionRegistered{Region: a, MemberID: "m1"}, ShardHomeAllocated{Shard: "s1", Region: a}, ShardRegionTerminated{Region: a}},
			event:  ShardRegionRegistered{Region: a, MemberID: "m1-again"},
			want:   stWant(false, []stEntry{{a, "m1-again", nil}}, nil)},
		{name: "a deallocated shard can be allocated to another region",
			before: []Event{ShardRegionRegistered{Region: a, MemberID: "m1"}, ShardRegionRegistered{Region: b, MemberID: "m2"},
				ShardHomeAllocated{Shard: "s1", Region: a}, ShardHomeDeallocated{Shard: "s1"}},
			event: ShardHomeAllocated{Shard: "s1", Region: b},
			want:  stWant(false, []stEntry{{a, "m1", []string{}}, {b, "m2", []string{"s1"}}}, nil)},
		{name: "PIDs compared by value, not pointer",
			before: []Event{ShardRegionRegistered{Region: a, MemberID: "m1"}},
			event:  ShardHomeAllocated{Shard: "s1", Region: actor.NewPID(a.Address, a.Id)},
			want:   stWant(false, []stEntry{{a, "m1", []string{"s1"}}}, nil)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := stBuild(t, tc.remember, tc.before...)
			snapshot := s.Clone()
			before := s.Clone()
			if err := s.Apply(tc.event); err != nil {
				t.Fatalf("Apply(%v): %v", tc.event, err)
			}
			stAssertSame(t, s, tc.want)
			stAssertInvariants(t, s)
			// A snapshot (what a write carries) does not change with it.
			if !reflect.DeepEqual(snapshot, before) {
				t.Fatalf("Apply(%v) changed a Clone taken before:\n got %+v\nwant %+v", tc.event, snapshot, before)
			}
		})
	}
}

// stAssertSame compares states, treating nil and empty shard lists alike.
func stAssertSame(t *testing.T, got, want State) {
	t.Helper()
	norm := func(s State) State {
		s = s.Clone()
		for k, r := range s.Regions {
			if len(r.Shards) == 0 {
				r.Shards = nil
			}
			s.Regions[k] = r
		}
		return s
	}
	if g, w := norm(got), norm(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("state:\n got %+v\nwant %+v", g, w)
	}
}

// stAssertInvariants checks the invariants that tie Shards to the regions'
// lists: every allocated shard is in exactly its region's list, and
// nothing allocated is also unallocated.
func stAssertInvariants(t *testing.T, s State) {
	t.Helper()
	count := 0
	for key, r := range s.Regions {
		if RegionKey(r.PID) != key {
			t.Fatalf("region %s stored under key %s", RegionKey(r.PID), key)
		}
		for _, sh := range r.Shards {
			count++
			if s.Shards[sh] != key {
				t.Fatalf("shard %s in %s's list but mapped to %q", sh, key, s.Shards[sh])
			}
		}
	}
	if count != len(s.Shards) {
		t.Fatalf("%d shards in region lists, %d in Shards", count, len(s.Shards))
	}
	for key, p := range s.Proxies {
		if len(p.Shards) != 0 || RegionKey(p.PID) != key {
			t.Fatalf("bad proxy entry %s: %+v", key, p)
		}
	}
	for sh := range s.Unallocated {
		if _, ok := s.Shards[sh]; ok {
			t.Fatalf("shard %s both allocated and unallocated", sh)
		}
	}
	if !s.RememberEntities && len(s.Unallocated) != 0 {
		t.Fatalf("unallocated %v without remember-entities", s.Unallocated)
	}
}

// stBogusEvent is an Event that Apply does not know.
type stBogusEvent struct{}

func (stBogusEvent) domainEvent()   {}
func (stBogusEvent) String() string { return "bogus" }

func TestStateApplyErrors(t *testing.T) {
	a, b := stRegion(1), stRegion(2)
	pa := stProxy(1)
	withA := []Event{ShardRegionRegistered{Region: a, MemberID: "m1"}}
	withS1 := []Event{ShardRegionRegistered{Region: a, MemberID: "m1"}, ShardRegionRegistered{Region: b, MemberID: "m2"}, ShardHomeAllocated{Shard: "s1", Region: a}}
	cases := []struct {
		name    string
		before  []Event
		event   Event
		wantErr string
	}{
		{"region registered twice", withA, ShardRegionRegistered{Region: a, MemberID: "m1"}, "region already registered"},
		{"region registered twice, other member id", withA, ShardRegionRegistered{Region: actor.NewPID(a.Address, a.Id), MemberID: "m9"}, "region already registered"},
		{"region registered twice, its extractor said by another member id", withA,
			ShardRegionRegistered{Region: a, MemberID: "m9", Extractor: ExtractorIdentity{Name: "hash-code", NumberOfShards: 100}}, "region already registered"},
		{"a region's extractor recorded twice",
			[]Event{ShardRegionRegistered{Region: a, MemberID: "m1", Extractor: ExtractorIdentity{Name: "hash-code", NumberOfShards: 100}}},
			ShardRegionRegistered{Region: a, MemberID: "m1", Extractor: ExtractorIdentity{Name: "hash-code", NumberOfShards: 1000}}, "region already registered"},
		{"nil region registered", nil, ShardRegionRegistered{MemberID: "m1"}, "nil region"},
		{"proxy registered twice", []Event{ShardRegionProxyRegistered{Proxy: pa, MemberID: "m1"}}, ShardRegionProxyRegistered{Proxy: pa, MemberID: "m1"}, "proxy already registered"},
		{"nil proxy registered", nil, ShardRegionProxyRegistered{MemberID: "m1"}, "nil proxy"},
		{"allocate to an unregistered region", withA, ShardHomeAllocated{Shard: "s1", Region: b}, "region not registered"},
		{"allocate to a proxy", []Event{ShardRegionProxyRegistered{Proxy: pa, MemberID: "m1"}}, ShardHomeAllocated{Shard: "s1", Region: pa}, "region not registered"},
		{"allocate to a nil region", withA, ShardHomeAllocated{Shard: "s1"}, "region not registered"},
		{"allocate an empty shard id", withA, ShardHomeAllocated{Shard: "", Region: a}, "empty shard id"},
		{"allocate twice to the same region", withS1, ShardHomeAllocated{Shard: "s1", Region: a}, "shard already allocated"},
		{"allocate twice to another region", withS1, ShardHomeAllocated{Shard: "s1", Region: b}, "shard already allocated"},
		{"deallocate an unknown shard", withS1, ShardHomeDeallocated{Shard: "s2"}, "shard not allocated"},
		{"deallocate twice", append(slices.Clone(withS1), ShardHomeDeallocated{Shard: "s1"}), ShardHomeDeallocated{Shard: "s1"}, "shard not allocated"},
		{"deallocate a shard of a terminated region", append(slices.Clone(withS1), ShardRegionTerminated{Region: a}), ShardHomeDeallocated{Shard: "s1"}, "shard not allocated"},
		{"terminate an unknown region", withA, ShardRegionTerminated{Region: b}, "region not registered"},
		{"terminate a region twice", append(slices.Clone(withA), ShardRegionTerminated{Region: a}), ShardRegionTerminated{Region: a}, "region not registered"},
		{"terminate a proxy as a region", []Event{ShardRegionProxyRegistered{Proxy: pa, MemberID: "m1"}}, ShardRegionTerminated{Region: pa}, "region not registered"},
		{"terminate a nil region", withA, ShardRegionTerminated{}, "region not registered"},
		{"terminate an unknown proxy", withA, ShardRegionProxyTerminated{Proxy: pa}, "proxy not registered"},
		{"terminate a region as a proxy", withA, ShardRegionProxyTerminated{Proxy: a}, "proxy not registered"},
		{"terminate a nil proxy", withA, ShardRegionProxyTerminated{}, "proxy not registered"},
		{"nil event", withS1, nil, "nil event"},
		{"unknown event", withS1, stBogusEvent{}, "unknown event"},
		{"pointer event", withA, &ShardHomeAllocated{Shard: "s1", Region: a}, "unknown event"},
	}
	for _, tc := range cases {
		for _, remember := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/remember=%v", tc.name, remember), func(t *testing.T) {
				s := stBuild(t, remember, tc.before...)
				snapshot := s.Clone()
				err := s.Apply(tc.event)
				if err == nil {
					t.Fatalf("Apply(%v) = nil error, want %q", tc.event, tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Apply(%v) error %q, want it to contain %q", tc.event, err, tc.wantErr)
				}
				if !reflect.DeepEqual(s, snapshot) {
					t.Fatalf("Apply(%v) failed but changed the state:\n got %+v\nwant %+v", tc.event, s, snapshot)
				}
			})
		}
	}
}

func TestStateCloneDoesNotShareShardLists(t *testing.T) {
	// Apply changes a state in place; a Clone (the snapshot a write
	// carries, the state last written) must not share the backing array
	// of a region's shard list with it: appending "y" to one must not
	// show up as "z" in another, nor a deallocation shift another's list.
	a := stRegion(1)
	parent := stBuild(t, false, ShardRegionRegistered{Region: a, MemberID: "m1"},
		ShardHomeAllocated{Shard: "w", Region: a}, ShardHomeAllocated{Shard: "x", Region: a})
	left, err := stApplied(parent, ShardHomeAllocated{Shard: "y", Region: a})
	if err != nil {
		t.Fatal(err)
	}
	right, err := stApplied(parent, ShardHomeAllocated{Shard: "z", Region: a})
	if err != nil {
		t.Fatal(err)
	}
	dealloc, err := stApplied(parent, ShardHomeDeallocated{Shard: "w"})
	if err != nil {
		t.Fatal(err)
	}
	key := RegionKey(a)
	for _, c := range []struct {
		name string
		s    State
		want []string
	}{
		{"parent", parent, []string{"w", "x"}},
		{"left", left, []string{"w", "x", "y"}},
		{"right", right, []string{"w", "x", "z"}},
		{"dealloc", dealloc, []string{"x"}},
	} {
		if got := c.s.Regions[key].Shards; !slices.Equal(got, c.want) {
			t.Errorf("%s: shards %v, want %v", c.name, got, c.want)
		}
	}
	// Changing a result in place does not reach the parent either.
	left.Regions[key].Shards[0] = "changed"
	left.Shards["new"] = key
	left.Unallocated["u"] = struct{}{}
	if parent.Regions[key].Shards[0] != "w" || len(parent.Shards) != 2 || len(parent.Unallocated) != 0 {
		t.Fatalf("parent changed through a child: %+v", parent)
	}
}

func TestStateReplayOfAnEventLog(t *testing.T) {
	// A coordinator's life, replayed event by event with remember-entities:
	// two regions and a proxy register, shards spread, one is rebalanced,
	// a region crashes, its shards are started on the other.
	a, b, p := stRegion(1), stRegion(2), stProxy(3)
	log := []Event{
		ShardRegionRegistered{Region: a, MemberID: "m1"},
		ShardRegionProxyRegistered{Proxy: p, MemberID: "m3"},
		ShardHomeAllocated{Shard: "s1", Region: a},
		ShardHomeAllocated{Shard: "s2", Region: a},
		ShardRegionRegistered{Region: b, MemberID: "m2"},
		ShardHomeAllocated{Shard: "s3", Region: b},
		ShardHomeDeallocated{Shard: "s1"}, // rebalance: s1 handed off
		ShardHomeAllocated{Shard: "s1", Region: b},
		ShardRegionTerminated{Region: a}, // a crashed with s2
		ShardHomeAllocated{Shard: "s2", Region: b},
		ShardRegionProxyTerminated{Proxy: p},
	}
	s := NewState(true)
	states := []State{s.Clone()}
	for i, e := range log {
		if err := s.Apply(e); err != nil {
			t.Fatalf("event %d %v: %v", i, e, err)
		}
		stAssertInvariants(t, s)
		states = append(states, s.Clone())
	}
	stAssertSame(t, s, stWant(true, []stEntry{{b, "m2", []string{"s3", "s1", "s2"}}}, nil))
	// Every snapshot taken on the way is still what it was when taken.
	if len(states[0].Regions) != 0 || len(states[1].Regions) != 1 || len(states[4].Regions[RegionKey(a)].Shards) != 2 {
		t.Fatalf("an earlier state changed: %+v", states)
	}
	if _, ok := states[9].Unallocated["s2"]; !ok {
		t.Fatalf("after the crash s2 should be unallocated: %+v", states[9])
	}
	if r, ok := s.RegionOf("s2"); !ok || RegionKey(r) != RegionKey(b) {
		t.Fatalf("RegionOf(s2) = %v, %v", r, ok)
	}
	if _, ok := s.RegionOf("nope"); ok {
		t.Fatalf("RegionOf(nope) found")
	}
	if !s.IsRegion(b) || s.IsRegion(a) || s.IsProxy(p) || s.IsProxy(b) {
		t.Fatalf("IsRegion/IsProxy wrong: %+v", s)
	}
}

func TestStateZeroValue(t *testing.T) {
	// The zero State (not NewState) works as the empty state: Apply
	// allocates its maps instead of writing to nil ones.
	var zero State
	if err := zero.Apply(ShardHomeDeallocated{Shard: "s1"}); err == nil {
		t.Fatalf("deallocate on the zero state: want an error")
	}
	if zero.Regions != nil || zero.Shards != nil {
		t.Fatalf("a failed Apply changed the zero state: %+v", zero)
	}
	var s State
	if err := s.Apply(ShardRegionRegistered{Region: stRegion(1), MemberID: "m1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ShardHomeAllocated{Shard: "s1", Region: stRegion(1)}); err != nil {
		t.Fatal(err)
	}
	stAssertInvariants(t, s)
	remember := State{RememberEntities: true, Regions: map[string]RegionEntry{RegionKey(stRegion(1)): {PID: stRegion(1), Shards: []string{"s1"}}},
		Shards: map[string]string{"s1": RegionKey(stRegion(1))}}
	if err := remember.Apply(ShardRegionTerminated{Region: stRegion(1)}); err != nil {
		t.Fatal(err)
	}
	if _, ok := remember.Unallocated["s1"]; !ok {
		t.Fatalf("a terminated region's shard is not unallocated: %+v", remember)
	}
	c := zero.Clone()
	if c.Regions == nil || c.Proxies == nil || c.Shards == nil || c.Unallocated == nil {
		t.Fatalf("Clone of the zero state has nil maps: %+v", c)
	}
}

func TestStateEventStrings(t *testing.T) {
	a := stRegion(1)
	for _, c := range []struct {
		e    Event
		want string
	}{
		{ShardRegionRegistered{Region: a, MemberID: "m1"}, "ShardRegionRegistered(127.0.0.1:1/region, member m1)"},
		{ShardRegionRegistered{Region: a, MemberID: "m1", Extractor: ExtractorIdentity{Name: "hash-code", NumberOfShards: 100}},
			"ShardRegionRegistered(127.0.0.1:1/region, member m1, hash-code with 100 shards)"},
		{ShardRegionRegistered{Region: a, MemberID: "m1", Extractor: ExtractorIdentity{Name: "main.orders"}},
			"ShardRegionRegistered(127.0.0.1:1/region, member m1, main.orders)"},
		{ShardRegionProxyRegistered{Proxy: a, MemberID: "m1"}, "ShardRegionProxyRegistered(127.0.0.1:1/region, member m1)"},
		{ShardRegionTerminated{Region: a}, "ShardRegionTerminated(127.0.0.1:1/region)"},
		{ShardRegionProxyTerminated{Proxy: a}, "ShardRegionProxyTerminated(127.0.0.1:1/region)"},
		{ShardHomeAllocated{Shard: "s1", Region: a}, "ShardHomeAllocated(s1, 127.0.0.1:1/region)"},
		{ShardHomeDeallocated{Shard: "s1"}, "ShardHomeDeallocated(s1)"},
		{ShardRegionTerminated{}, "ShardRegionTerminated()"},
	} {
		if got := c.e.String(); got != c.want {
			t.Errorf("String() = %q, want %q", got, c.want)
		}
	}
}

func TestStateInconsistentInput(t *testing.T) {
	// A state decoded from a store could map a shard to a region that is
	// not registered; Apply refuses to deallocate it instead of inventing
	// a region entry, and RegionOf does not report a home.
	s := NewState(true)
	s.Shards["s1"] = "127.0.0.9:1/ghost"
	snapshot := s.Clone()
	err := s.Apply(ShardHomeDeallocated{Shard: "s1"})
	if err == nil || !strings.Contains(err.Error(), "not registered") {
		t.Fatalf("Apply = %v, want a region not registered error", err)
	}
	if !reflect.DeepEqual(s, snapshot) {
		t.Fatalf("state changed on error")
	}
	if _, ok := s.RegionOf("s1"); ok {
		t.Fatalf("RegionOf found a home in an unregistered region")
	}
}

// A region's extractor is kept in the state with the region: registered
// with it, or recorded when the region, registered without it with a
// coordinator of an older version, registers again and says it. Its
// shards and member stay as they were.
func TestStateApplyRecordsTheExtractor(t *testing.T) {
	a, b := stRegion(1), stRegion(2)
	hundred := ExtractorIdentity{Name: "hash-code", NumberOfShards: 100}
	cases := []struct {
		name   string
		before []Event
		event  ShardRegionRegistered
		want   map[string]ExtractorIdentity // by region key
	}{
		{"registered with it", nil, ShardRegionRegistered{Region: a, MemberID: "m1", Extractor: hundred},
			map[string]ExtractorIdentity{RegionKey(a): hundred}},
		{"registered without it (an older version)", nil, ShardRegionRegistered{Region: a, MemberID: "m1"},
			map[string]ExtractorIdentity{RegionKey(a): {}}},
		{"recorded when the region says it again",
			[]Event{ShardRegionRegistered{Region: a, MemberID: "m1"}, ShardHomeAllocated{Shard: "s1", Region: a},
				ShardRegionRegistered{Region: b, MemberID: "m2"}},
			ShardRegionRegistered{Region: actor.NewPID(a.Address, a.Id), MemberID: "m1", Extractor: hundred},
			map[string]ExtractorIdentity{RegionKey(a): hundred, RegionKey(b): {}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := stBuild(t, false, tc.before...)
			before := s.Clone()
			if err := s.Apply(tc.event); err != nil {
				t.Fatalf("Apply(%v): %v", tc.event, err)
			}
			stAssertInvariants(t, s)
			for key, want := range tc.want {
				if got := s.Regions[key].Extractor; got != want {
					t.Errorf("extractor of %s = %v, want %v", key, got, want)
				}
			}
			for key, r := range before.Regions {
				if now := s.Regions[key]; now.MemberID != r.MemberID || !slices.Equal(now.Shards, r.Shards) {
					t.Errorf("region %s changed from %+v to %+v", key, r, now)
				}
			}
		})
	}
}
