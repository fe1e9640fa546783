package coordinator

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
)

func TestTerminationOf(t *testing.T) {
	st := stBuild(t, false,
		ShardRegionRegistered{Region: stRegion(1), MemberID: "m1"},
		ShardRegionProxyRegistered{Proxy: stProxy(2), MemberID: "m2"})
	cases := []struct {
		name string
		who  *actor.PID
		why  actor.TerminatedReason
		want termination
	}{
		{"a region stopped", stRegion(1), actor.TerminatedReason_Stopped, terminationRegion},
		{"a proxy stopped", stProxy(2), actor.TerminatedReason_Stopped, terminationProxy},
		{"a region's connection dropped", stRegion(1), actor.TerminatedReason_AddressTerminated, terminationConnectionLost},
		{"a proxy's connection dropped", stProxy(2), actor.TerminatedReason_AddressTerminated, terminationConnectionLost},
		{"a region not registered", stRegion(3), actor.TerminatedReason_Stopped, terminationIgnored},
		{"a region not found", stRegion(1), actor.TerminatedReason_NotFound, terminationRegion},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := terminationOf(&st, &actor.Terminated{Who: tc.who, Why: tc.why}); got != tc.want {
				t.Fatalf("terminationOf = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestStatsTimeout(t *testing.T) {
	const def = 3 * time.Second
	cases := []struct {
		millis int64
		want   time.Duration
	}{{0, def}, {-5, def}, {250, 250 * time.Millisecond}, {60000, time.Minute}}
	for _, tc := range cases {
		if got := statsTimeout(&messages.GetClusterShardingStats{TimeoutMillis: tc.millis}, def); got != tc.want {
			t.Fatalf("statsTimeout(%d ms) = %v, want %v", tc.millis, got, tc.want)
		}
	}
}

func TestRegionTerminationLevel(t *testing.T) {
	b := newRegionBook()
	b.gracefulShutdown("leaving")
	cases := []struct {
		key    string
		shards int
		want   slog.Level
	}{
		{"crashed", 3, slog.LevelInfo},
		{"crashed", 0, slog.LevelDebug},
		{"leaving", 3, slog.LevelDebug},
		{"leaving", 0, slog.LevelDebug},
	}
	for _, tc := range cases {
		if got := b.terminationLevel(tc.key, tc.shards); got != tc.want {
			t.Fatalf("terminationLevel(%s, %d) = %v, want %v", tc.key, tc.shards, got, tc.want)
		}
	}
}

// TestCanRebalance: no round without regions or before enough of them
// registered; once they have, it holds for good (Akka's
// min-nr-of-members).
func TestCanRebalance(t *testing.T) {
	none := stBuild(t, false)
	one := hoPlaced(t, 1)
	two := hoPlaced(t, 2)
	b := newRegionBook()
	steps := []struct {
		st   *State
		min  int
		want bool
	}{
		{&none, 1, false},
		{&one, 2, false},
		{&two, 2, true},
		{&one, 2, true},   // enough registered once
		{&none, 1, false}, // but none now
	}
	for i, s := range steps {
		if got := b.canRebalance(s.st, s.min); got != s.want {
			t.Fatalf("step %d: canRebalance with %d regions, min %d = %v, want %v", i, len(s.st.Regions), s.min, got, s.want)
		}
	}
}

func TestGracefulShutdownShards(t *testing.T) {
	st := hoPlaced(t, 2, "idle@1", "busy@1", "unwritten@1", "other@2")
	h := hoBusy(t, "busy")
	cases := []struct {
		region *actor.PID
		want   []string
	}{
		{stRegion(1), []string{"idle"}},
		{stRegion(2), []string{"other"}},
		{stRegion(3), nil}, // not registered
	}
	for _, tc := range cases {
		if got := h.gracefulShutdownShards(&st, RegionKey(tc.region), settled); !slices.Equal(got, tc.want) {
			t.Fatalf("gracefulShutdownShards(%s) = %v, want %v", RegionKey(tc.region), got, tc.want)
		}
	}
}

func TestHandOffRecipients(t *testing.T) {
	st := stBuild(t, false,
		ShardRegionRegistered{Region: stRegion(2), MemberID: "m2"},
		ShardRegionProxyRegistered{Proxy: stProxy(3), MemberID: "m3"},
		ShardRegionRegistered{Region: stRegion(1), MemberID: "m1"},
		ShardRegionProxyRegistered{Proxy: stProxy(1), MemberID: "m1"})
	var got []string
	for _, p := range handOffRecipients(&st) {
		got = append(got, RegionKey(p))
	}
	want := []string{RegionKey(stRegion(1)), RegionKey(stRegion(2)), RegionKey(stProxy(1)), RegionKey(stProxy(3))}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("handOffRecipients = %v, want %v", got, want)
	}
	empty := stBuild(t, false)
	if got := handOffRecipients(&empty); len(got) != 0 {
		t.Fatalf("handOffRecipients of an empty state = %v", got)
	}
}

// TestLiveRegistrants drives the member view and asks after each event
// which regions and proxies the coordinator watches.
func TestLiveRegistrants(t *testing.T) {
	st := stBuild(t, false,
		ShardRegionRegistered{Region: stRegion(2), MemberID: "m2"},
		ShardRegionRegistered{Region: stRegion(1), MemberID: "m1"},
		ShardRegionProxyRegistered{Proxy: stProxy(3), MemberID: "m3"})
	b := newRegionBook()
	steps := []struct {
		event any
		want  string
	}{
		{nil, "[]"},
		{&membership.CurrentClusterState{Members: []membership.Member{rbMember(1), rbMember(3)}}, "[127.0.0.1:1/region 127.0.0.3:1/proxy]"},
		{membership.MemberUp{Member: rbMember(2)}, "[127.0.0.1:1/region 127.0.0.2:1/region 127.0.0.3:1/proxy]"},
		{membership.MemberRemoved{Member: rbMember(1)}, "[127.0.0.2:1/region 127.0.0.3:1/proxy]"},
		{membership.MemberRemoved{Member: rbMember(3)}, "[127.0.0.2:1/region]"},
	}
	for i, s := range steps {
		if s.event != nil {
			b.membershipEvent(s.event)
		}
		var got []string
		for _, p := range b.liveRegistrants(&st) {
			got = append(got, RegionKey(p))
		}
		if fmt.Sprint(got) != s.want {
			t.Fatalf("step %d: liveRegistrants = %v, want %s", i, got, s.want)
		}
	}
}
