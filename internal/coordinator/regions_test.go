package coordinator

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/membership"
)

func rbMember(i int) membership.Member {
	return membership.Member{ID: fmt.Sprintf("m%d", i), Address: fmt.Sprintf("127.0.0.%d:1", i), Status: membership.Up}
}

// rbDescribe writes goneMembers' steps as "wait 127.0.0.1:1 5s",
// "region 127.0.0.1:1" or "proxy 127.0.0.1:1".
func rbDescribe(steps []goneStep) string {
	var out []string
	for _, s := range steps {
		switch {
		case s.wait > 0:
			out = append(out, fmt.Sprintf("wait %s %v", s.region.GetAddress(), s.wait))
		case s.region != nil:
			out = append(out, "region "+s.region.GetAddress())
		default:
			out = append(out, "proxy "+s.proxy.GetAddress())
		}
	}
	return strings.Join(out, ", ")
}

// TestRegionBookGoneMembers drives the member view message by message and
// asks after each what to do with the regions and proxies of the state.
func TestRegionBookGoneMembers(t *testing.T) {
	st := stBuild(t, false,
		ShardRegionRegistered{Region: stRegion(1), MemberID: "m1"},
		ShardRegionRegistered{Region: stRegion(2), MemberID: "m2"},
		ShardRegionProxyRegistered{Proxy: stProxy(3), MemberID: "m3"},
	)
	now := time.Unix(100, 0)
	const margin = 10 * time.Second
	// m2 was removed 4s ago without leaving; m3 left gracefully.
	removed := map[string]membershiphook.Removal{
		"m2": {At: now.Add(-4 * time.Second)},
		"m3": {At: now, Graceful: true},
	}
	removal := func(id string) (membershiphook.Removal, bool) { r, ok := removed[id]; return r, ok }
	type step struct {
		msg       any
		handled   bool
		checkGone bool
		at        time.Duration // after now
		want      string        // goneMembers' steps
	}
	steps := []step{
		{msg: &membership.CurrentClusterState{Members: []membership.Member{rbMember(1), rbMember(2), rbMember(3)}},
			handled: true, checkGone: true, want: ""},
		{msg: "not membership", want: ""},
		{msg: membership.MemberLeft{Member: rbMember(1)}, handled: true, want: ""},
		{msg: membership.MemberRemoved{Member: rbMember(2)}, handled: true, checkGone: true, want: "wait 127.0.0.2:1 6s"},
		// The wait is told once; a later look finds nothing new to do.
		{msg: membership.MemberUp{Member: rbMember(1)}, handled: true, at: time.Second, want: ""},
		{msg: membership.MemberRemoved{Member: rbMember(3), Graceful: true}, handled: true, checkGone: true, at: 2 * time.Second,
			want: "proxy 127.0.0.3:1"},
		// Past the margin the region is terminated.
		{msg: "tick", at: 6 * time.Second, want: "region 127.0.0.2:1, proxy 127.0.0.3:1"},
		{msg: membership.MemberRemoved{Member: rbMember(1)}, handled: true, checkGone: true, at: 7 * time.Second,
			want: "region 127.0.0.1:1, region 127.0.0.2:1, proxy 127.0.0.3:1"},
	}
	b := newRegionBook()
	for i, s := range steps {
		handled, checkGone := b.membershipEvent(s.msg)
		if handled != s.handled || checkGone != s.checkGone {
			t.Fatalf("step %d %T: handled %v, checkGone %v; want %v, %v", i, s.msg, handled, checkGone, s.handled, s.checkGone)
		}
		if got := rbDescribe(b.goneMembers(&st, removal, margin, now.Add(s.at))); got != s.want {
			t.Fatalf("step %d %T: goneMembers = %q, want %q", i, s.msg, got, s.want)
		}
	}
}

func TestRegionBookRegistrations(t *testing.T) {
	st := stBuild(t, false,
		ShardRegionRegistered{Region: stRegion(1), MemberID: "m1"},
		ShardHomeAllocated{Shard: "a", Region: stRegion(1)},
		ShardRegionRegistered{Region: stRegion(2), MemberID: "m2"},
	)
	start := time.Unix(100, 0)
	const wait = 10 * time.Second
	b := newRegionBook()
	b.membershipEvent(&membership.CurrentClusterState{Members: []membership.Member{rbMember(1), rbMember(2)}})
	b.activatedAt = start
	type step struct {
		op       string // register, unregister, shutdown, terminated
		arg      string
		want     bool     // register, shutdown: first
		waiting  []string // waitingForRegions after the step, at start+1s
		allocate []string // addresses of allocations(forAllocation) after the step
	}
	steps := []step{
		{op: "register", arg: "m1", want: true, waiting: []string{"m2"}, allocate: []string{"127.0.0.1:1", "127.0.0.2:1"}},
		{op: "register", arg: "m1", want: false, waiting: []string{"m2"}, allocate: []string{"127.0.0.1:1", "127.0.0.2:1"}},
		{op: "unregister", arg: "m1", waiting: []string{"m1", "m2"}, allocate: []string{"127.0.0.1:1", "127.0.0.2:1"}},
		{op: "register", arg: "m1", want: true, waiting: []string{"m2"}, allocate: []string{"127.0.0.1:1", "127.0.0.2:1"}},
		{op: "register", arg: "m2", want: true, allocate: []string{"127.0.0.1:1", "127.0.0.2:1"}},
		{op: "shutdown", arg: RegionKey(stRegion(1)), want: true, allocate: []string{"127.0.0.2:1"}},
		{op: "shutdown", arg: RegionKey(stRegion(1)), want: false, allocate: []string{"127.0.0.2:1"}},
		{op: "terminated", arg: RegionKey(stRegion(1)), allocate: []string{"127.0.0.1:1", "127.0.0.2:1"}},
	}
	for i, s := range steps {
		var got bool
		switch s.op {
		case "register":
			got = b.register(s.arg)
		case "unregister":
			b.unregister(s.arg)
		case "shutdown":
			got = b.gracefulShutdown(s.arg)
		case "terminated":
			b.terminated(s.arg)
		}
		if got != s.want {
			t.Fatalf("step %d %s %s = %v, want %v", i, s.op, s.arg, got, s.want)
		}
		if w := b.waitingForRegions(start.Add(time.Second), wait, ""); !slices.Equal(w, s.waiting) {
			t.Fatalf("step %d %s %s: waiting for %v, want %v", i, s.op, s.arg, w, s.waiting)
		}
		if w := b.waitingForRegions(start.Add(wait), wait, ""); w != nil {
			t.Fatalf("step %d: waiting for %v after RegisterWaitTimeout", i, w)
		}
		var addrs []string
		for _, a := range b.allocations(&st, true) {
			addrs = append(addrs, a.Region.GetAddress())
		}
		if !slices.Equal(addrs, s.allocate) {
			t.Fatalf("step %d %s %s: allocations %v, want %v", i, s.op, s.arg, addrs, s.allocate)
		}
		if all := b.allocations(&st, false); len(all) != 2 || !slices.Equal(all[0].Shards, []string{"a"}) {
			t.Fatalf("step %d: allocations for the rebalance %+v, want both regions, a on the first", i, all)
		}
	}
}

func TestRegionBookAllRegionsRegisteredHoldsForGood(t *testing.T) {
	cases := []struct {
		regions []int // registered regions at each check
		want    []bool
	}{
		{[]int{0, 1, 2, 1, 0}, []bool{false, false, true, true, true}},
		{[]int{3}, []bool{true}},
	}
	for _, tc := range cases {
		b := newRegionBook()
		for i, n := range tc.regions {
			if got := b.hasAllRegionsRegistered(n, 2); got != tc.want[i] {
				t.Fatalf("%v: check %d with %d regions = %v, want %v", tc.regions, i, n, got, tc.want[i])
			}
		}
	}
}
