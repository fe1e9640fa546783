package coordinator

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/membership"
)

func TestShardHomeDecision(t *testing.T) {
	now := time.Unix(100, 0)
	requester := stRegion(2)
	// fixture is the coordinator's data for one case; setup changes it.
	type fixture struct {
		st       State
		handOffs handOffs
		forwards forwardHolds
		regions  regionBook
		min      int
		rejoin   time.Duration
	}
	cases := []struct {
		name      string
		shard     string
		requester *actor.PID
		setup     func(*fixture)
		want      shardHomeStep
		region    string // homeKnown: the region's address
		regions   int    // homeAllocate: how many regions to choose from
		waits     bool   // the request waits in the hand-off or the hold
	}{
		{name: "a placed shard is known", shard: "a", requester: requester, want: homeKnown, region: "127.0.0.1:1"},
		{name: "a placed shard without a requester is known", shard: "a", want: homeKnown, region: "127.0.0.1:1"},
		{name: "an unplaced shard is allocated among the live regions", shard: "b", requester: requester, want: homeAllocate, regions: 2},
		{name: "a shutting-down region gets no shard", shard: "b", requester: requester, want: homeAllocate, regions: 1,
			setup: func(f *fixture) { f.regions.gracefulShutdown(RegionKey(stRegion(1))) }},
		{name: "a shard in hand-off waits for its end", shard: "a", requester: requester, want: homeInHandOff, waits: true,
			setup: func(f *fixture) { _, _, _ = f.handOffs.begin("a", handOffStart{}) }},
		{name: "a remembered shard in hand-off is not allocated", shard: "a", want: homeInHandOff,
			setup: func(f *fixture) { _, _, _ = f.handOffs.begin("a", handOffStart{}) }},
		{name: "a shard whose old home forwards waits for it", shard: "a", requester: requester, want: homeHeld, waits: true,
			setup: func(f *fixture) { f.forwards.handedOff("a", stRegion(3), nil) }},
		{name: "the old home itself is answered during the hold", shard: "a", requester: stRegion(3), want: homeKnown, region: "127.0.0.1:1",
			setup: func(f *fixture) { f.forwards.handedOff("a", stRegion(3), nil) }},
		{name: "fewer regions than min-nr-of-members: ignored", shard: "a", requester: requester, want: homeNotAllRegistered,
			setup: func(f *fixture) { f.min = 3 }},
		{name: "an unplaced shard waits for the regions of live members", shard: "b", requester: requester, want: homeWaitForRegions,
			setup: func(f *fixture) { f.regions.unregister("m2") }},
		{name: "a placed shard does not wait for registrations", shard: "a", requester: requester, want: homeKnown, region: "127.0.0.1:1",
			setup: func(f *fixture) { f.regions.unregister("m2") }},
		{name: "after the register wait an unplaced shard is allocated", shard: "b", requester: requester, want: homeAllocate, regions: 2,
			setup: func(f *fixture) { f.regions.unregister("m2"); f.regions.activatedAt = now.Add(-time.Minute) }},
		{name: "an unplaced shard waits out the re-join hold", shard: "b", requester: requester, want: homeRejoinHold,
			setup: func(f *fixture) { f.rejoin = time.Second }},
		{name: "no live region: nothing to allocate to", shard: "b", requester: requester, want: homeNoRegion,
			setup: func(f *fixture) {
				f.regions.membershipEvent(&membership.CurrentClusterState{})
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := fixture{st: hoPlaced(t, 2, "a@1"), handOffs: newHandOffs(), forwards: newForwardHolds(), regions: newRegionBook(), min: 1}
			f.regions.membershipEvent(&membership.CurrentClusterState{Members: []membership.Member{rbMember(1), rbMember(2)}})
			f.regions.register("m1")
			f.regions.register("m2")
			f.regions.activatedAt = now
			if tc.setup != nil {
				tc.setup(&f)
			}
			in := shardHomeInput{state: &f.st, handOffs: &f.handOffs, forwards: &f.forwards, regions: &f.regions,
				minNrOfMembers: f.min, registerWait: 10 * time.Second, now: now, rejoinHold: func() time.Duration { return f.rejoin }}
			d := shardHome(in, tc.shard, tc.requester)
			if d.step != tc.want || d.region.GetAddress() != tc.region || len(d.regions) != tc.regions {
				t.Fatalf("shardHome = %+v, want step %d, region %q, %d regions", d, tc.want, tc.region, tc.regions)
			}
			// Only a request that is ignored is logged, saying why.
			ignored := d.step == homeNotAllRegistered || d.step == homeWaitForRegions || d.step == homeRejoinHold || d.step == homeNoRegion
			if (d.why != "") != ignored {
				t.Fatalf("shardHome = %+v: a reason to log %q, want one: %v", d, d.why, ignored)
			}
			waiting, _ := f.handOffs.release(tc.shard)
			if held, _ := f.forwards.timedOut(tc.shard, 1); len(held) > 0 {
				waiting = append(waiting, held...)
			}
			if got := len(waiting) == 1 && waiting[0].Equal(tc.requester); got != tc.waits {
				t.Fatalf("waiting after the decision: %v; want the requester waiting: %v", waiting, tc.waits)
			}
		})
	}
}

func TestUsableHome(t *testing.T) {
	st := stBuild(t, false, ShardRegionRegistered{Region: stRegion(1), MemberID: "m1"})
	b := newRegionBook()
	cases := []struct {
		name   string
		region *actor.PID
		setup  func()
		want   bool
	}{
		{"a registered region", stRegion(1), nil, true},
		{"no region", nil, nil, false},
		{"a region not registered", stRegion(2), nil, false},
		{"a region shutting down", stRegion(1), func() { b.gracefulShutdown(RegionKey(stRegion(1))) }, false},
	}
	for _, tc := range cases {
		if tc.setup != nil {
			tc.setup()
		}
		if got := usableHome(&st, &b, tc.region); got != tc.want {
			t.Fatalf("%s: usableHome = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestShardHomesOf(t *testing.T) {
	st := hoPlaced(t, 3, "b@2", "a@1", "c@2", "d@3")
	f := newForwardHolds()
	f.handedOff("c", stRegion(1), nil)
	f.handedOff("d", stRegion(1), nil)
	homes := shardHomesOf(st, 9, &f)
	var got []string
	for _, h := range homes.GetHomes() {
		got = append(got, fmt.Sprintf("%s:%v", h.GetRegion().GetAddress(), h.GetShards()))
	}
	want := []string{"127.0.0.1:1:[a]", "127.0.0.2:1:[b]"}
	if homes.GetEpoch() != 9 || !slices.Equal(got, want) {
		t.Fatalf("shardHomesOf = epoch %d %v, want epoch 9 %v", homes.GetEpoch(), got, want)
	}
	if got := regionAddresses(st); !slices.Equal(got, []string{"127.0.0.1:1", "127.0.0.2:1", "127.0.0.3:1"}) {
		t.Fatalf("regionAddresses = %v", got)
	}
}

func TestRememberedToAllocate(t *testing.T) {
	st := stBuild(t, true,
		ShardRegionRegistered{Region: stRegion(1), MemberID: "m1"},
		ShardHomeAllocated{Shard: "c", Region: stRegion(1)},
		ShardHomeAllocated{Shard: "a", Region: stRegion(1)},
		ShardHomeAllocated{Shard: "b", Region: stRegion(1)},
		ShardRegionTerminated{Region: stRegion(1)},
	)
	h := newHandOffs()
	if got := rememberedToAllocate(&st, &h); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("rememberedToAllocate = %v, want [a b c]", got)
	}
	if _, _, err := h.begin("b", handOffStart{}); err != nil {
		t.Fatal(err)
	}
	if got := rememberedToAllocate(&st, &h); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("rememberedToAllocate with b in hand-off = %v, want [a c]", got)
	}
}

func TestIsHome(t *testing.T) {
	st := hoPlaced(t, 2, "a@1")
	cases := []struct {
		shard  string
		region *actor.PID
		want   bool
	}{{"a", stRegion(1), true}, {"a", stRegion(2), false}, {"b", stRegion(1), false}}
	for _, tc := range cases {
		if got := isHome(&st, tc.shard, tc.region); got != tc.want {
			t.Fatalf("isHome(%s, %s) = %v, want %v", tc.shard, RegionKey(tc.region), got, tc.want)
		}
	}
}
