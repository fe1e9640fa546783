package coordinator

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/internal/wire"
	"github.com/protoshard/protoshard/membership"
)

func TestCheckRegistration(t *testing.T) {
	region := actor.NewPID("127.0.0.1:1", "sharding/T")
	members := map[string]membership.Member{
		"m1": {ID: "m1", Address: "127.0.0.1:1"},
		"m2": {ID: "m2", Address: "127.0.0.1:2"},
	}
	cases := []struct {
		name   string
		region *actor.PID
		member string
		shards []string
		want   string // "" for valid, else part of the reason
	}{
		{"valid", region, "m1", []string{"1", "2"}, ""},
		{"nil PID", nil, "m1", nil, "without a PID"},
		{"empty PID id (stalled the coordinator once)", &actor.PID{Address: "127.0.0.1:1"}, "m1", nil, "empty id"},
		{"PID before remote started", actor.NewPID("nonhost", "sharding/T"), "m1", nil, "no remote address"},
		{"no member id", region, "", nil, "without a member id"},
		{"not a live member", region, "m9", nil, "not a live member"},
		{"address of another member", region, "m2", nil, "runs at 127.0.0.1:2"},
		{"an empty shard", region, "m1", []string{"1", ""}, "bad shard"},
		{"a shard id past the limit", region, "m1", []string{strings.Repeat("s", wire.MaxShardIDLength+1)}, "bad shard"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkRegistration("Register", tc.region, tc.member, tc.shards, members)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("valid registration rejected: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalidMessage) {
				t.Fatalf("checkRegistration = %v, want an ErrInvalidMessage naming %q", err, tc.want)
			}
		})
	}
}

func TestCheckFromRegion(t *testing.T) {
	st := stBuild(t, false, ShardRegionRegistered{Region: stRegion(1), MemberID: "m1"})
	cases := []struct {
		name    string
		named   *actor.PID
		sender  *actor.PID
		ok      bool
		unknown bool // errUnknownRegion: ignored, not rejected
	}{
		{"the region itself", stRegion(1), stRegion(1), true, false},
		{"the region, as a copy", stRegion(1), actor.NewPID(stRegion(1).Address, stRegion(1).Id), true, false},
		{"sent by someone else (it would move a live region's shards)", stRegion(1), stRegion(2), false, false},
		{"no sender", stRegion(1), nil, false, false},
		{"not registered (any more)", stRegion(2), stRegion(2), false, true},
		{"not registered, and sent by someone else", stRegion(2), stRegion(1), false, false},
		{"nil region", nil, stRegion(1), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkFromRegion("RegionStopped", tc.named, tc.sender, st)
			if (err == nil) != tc.ok || errors.Is(err, errUnknownRegion) != tc.unknown || errors.Is(err, ErrInvalidMessage) == (tc.ok || tc.unknown) {
				t.Fatalf("checkFromRegion = %v, want ok=%v, unknown region=%v", err, tc.ok, tc.unknown)
			}
		})
	}
}

func TestAdoptions(t *testing.T) {
	st := stBuild(t, false,
		ShardRegionRegistered{Region: stRegion(1), MemberID: "m1"},
		ShardRegionRegistered{Region: stRegion(2), MemberID: "m2"},
		ShardHomeAllocated{Shard: "a", Region: stRegion(1)},
		ShardHomeAllocated{Shard: "b", Region: stRegion(2)},
	)
	inProgress := map[string][]*actor.PID{"busy": nil}
	cases := []struct {
		name   string
		hosted []string
		want   []adoption
	}{
		{"nothing hosted", nil, nil},
		{"what the state says", []string{"a"}, nil},
		{"unplaced shards are adopted (a wiped store)", []string{"c", "a", "c"}, []adoption{{shard: "c"}}},
		{"a shard the state places elsewhere moves to where it runs", []string{"b"}, []adoption{{shard: "b", from: RegionKey(stRegion(2))}}},
		{"a shard being handed off is left alone", []string{"busy"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := adoptions(st, stRegion(1), tc.hosted, inProgress); !slices.Equal(got, tc.want) {
				t.Fatalf("adoptions = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestRemovalWait(t *testing.T) {
	now := time.Now()
	margin := 5 * time.Second
	cases := []struct {
		name string
		rm   membershiphook.Removal
		seen bool
		want time.Duration
	}{
		{"a crash just now waits the margin", membershiphook.Removal{At: now}, true, margin},
		{"a crash 2s ago waits the rest", membershiphook.Removal{At: now.Add(-2 * time.Second)}, true, 3 * time.Second},
		{"a crash long ago waits nothing", membershiphook.Removal{At: now.Add(-time.Minute)}, true, 0},
		{"a graceful leave waits nothing", membershiphook.Removal{At: now, Graceful: true}, true, 0},
		{"a removal never seen waits nothing", membershiphook.Removal{}, false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := removalWait(tc.rm, tc.seen, margin, now); got != tc.want {
				t.Fatalf("removalWait = %v, want %v", got, tc.want)
			}
		})
	}
	if got := removalWait(membershiphook.Removal{At: now}, true, 0, now); got != 0 {
		t.Fatalf("no margin: %v", got)
	}
}

func TestUnregisteredMembers(t *testing.T) {
	members := map[string]membership.Member{
		"m1": {ID: "m1", Status: membership.Up, Roles: []string{"shards"}},
		"m2": {ID: "m2", Status: membership.Up, Roles: []string{"shards"}},
		"m3": {ID: "m3", Status: membership.Leaving, Roles: []string{"shards"}},
		"m4": {ID: "m4", Status: membership.Up},
	}
	got := unregisteredMembers(members, "shards", map[string]bool{"m1": true})
	if !slices.Equal(got, []string{"m2"}) {
		t.Fatalf("unregisteredMembers = %v, want m2 (m1 registered, m3 leaving, m4 without the role)", got)
	}
	if got := unregisteredMembers(members, "", map[string]bool{"m1": true, "m2": true}); !slices.Equal(got, []string{"m4"}) {
		t.Fatalf("no role: %v, want m4", got)
	}
}

func TestExtractorIdentityCompatible(t *testing.T) {
	hundred := ExtractorIdentity{Name: "hash-code", NumberOfShards: 100}
	cases := []struct {
		name string
		a, b ExtractorIdentity
		want bool
	}{
		{"the same", hundred, hundred, true},
		{"another number of shards", hundred, ExtractorIdentity{Name: "hash-code", NumberOfShards: 1000}, false},
		{"another extractor, same number", hundred, ExtractorIdentity{Name: "main.orders", NumberOfShards: 100}, false},
		{"one says its number of shards, the other not", hundred, ExtractorIdentity{Name: "hash-code"}, false},
		{"another user extractor", ExtractorIdentity{Name: "main.orders"}, ExtractorIdentity{Name: "main.ordersV2"}, false},
		{"unknown (an older version) agrees with any", ExtractorIdentity{}, hundred, true},
		{"with any, both ways", hundred, ExtractorIdentity{}, true},
		{"a number of shards without a name is unknown", ExtractorIdentity{NumberOfShards: 7}, hundred, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.Compatible(tc.b); got != tc.want {
				t.Fatalf("%v.Compatible(%v) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
		})
	}
}

func TestExtractorDisagreement(t *testing.T) {
	hundred := ExtractorIdentity{Name: "hash-code", NumberOfShards: 100}
	thousand := ExtractorIdentity{Name: "hash-code", NumberOfShards: 1000}
	st := stBuild(t, false,
		ShardRegionRegistered{Region: stRegion(1), MemberID: "m1", Extractor: hundred},
		ShardRegionRegistered{Region: stRegion(2), MemberID: "m2", Extractor: hundred},
		ShardRegionRegistered{Region: stRegion(3), MemberID: "m3"}, // an older version
	)
	mixed := stBuild(t, false,
		ShardRegionRegistered{Region: stRegion(1), MemberID: "m1", Extractor: hundred},
		ShardRegionRegistered{Region: stRegion(2), MemberID: "m2", Extractor: thousand},
	)
	var many []Event
	for i := 1; i <= 7; i++ {
		many = append(many, ShardRegionRegistered{Region: stRegion(i), MemberID: fmt.Sprint("m", i), Extractor: hundred})
	}
	cases := []struct {
		name string
		st   State
		key  string
		id   ExtractorIdentity
		want []string // nil: may register; else what the reason names
	}{
		{"the first region", NewState(false), RegionKey(stRegion(9)), thousand, nil},
		{"agrees", st, RegionKey(stRegion(9)), hundred, nil},
		{"an older version is never refused", st, RegionKey(stRegion(9)), ExtractorIdentity{}, nil},
		{"another number of shards", st, RegionKey(stRegion(9)), thousand,
			[]string{"its extractor is hash-code with 1000 shards", "hash-code with 100 shards at 127.0.0.1:1, 127.0.0.2:1 (", "restart every node"}},
		{"another extractor", st, RegionKey(stRegion(9)), ExtractorIdentity{Name: "main.orders"}, []string{"its extractor is main.orders,"}},
		{"only regions of older versions registered", stBuild(t, false, ShardRegionRegistered{Region: stRegion(3), MemberID: "m3"}),
			RegionKey(stRegion(9)), thousand, nil},
		{"a region is not compared with itself", stBuild(t, false, ShardRegionRegistered{Region: stRegion(1), MemberID: "m1", Extractor: hundred}),
			RegionKey(stRegion(1)), thousand, nil},
		{"registered regions that disagree already: any is refused", mixed, RegionKey(stRegion(9)), hundred,
			[]string{"hash-code with 1000 shards at 127.0.0.2:1"}},
		{"both of them named", mixed, RegionKey(stRegion(9)), ExtractorIdentity{Name: "x"},
			[]string{"hash-code with 100 shards at 127.0.0.1:1; hash-code with 1000 shards at 127.0.0.2:1"}},
		{"a long list is cut", stBuild(t, false, many...), RegionKey(stRegion(9)), thousand, []string{"127.0.0.5:1 and 2 more"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := extractorDisagreement(tc.st, tc.key, tc.id)
			if tc.want == nil {
				if got != "" {
					t.Fatalf("refused: %s", got)
				}
				return
			}
			if got == "" {
				t.Fatal("not refused")
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Fatalf("reason %q does not say %q", got, w)
				}
			}
		})
	}
}

func TestExtractorIdentityOfARegistration(t *testing.T) {
	region := actor.NewPID("127.0.0.1:1", "sharding/T")
	cases := []struct {
		name    string
		extName string
		shards  uint32
		want    ExtractorIdentity
		wantErr bool
	}{
		{"hash-code", "hash-code", 100, ExtractorIdentity{Name: "hash-code", NumberOfShards: 100}, false},
		{"a user extractor without a number", "main.orders", 0, ExtractorIdentity{Name: "main.orders"}, false},
		{"an older version says nothing", "", 0, ExtractorIdentity{}, false},
		{"a number without a name is unknown", "", 100, ExtractorIdentity{}, false},
		{"a name at the limit", strings.Repeat("x", wire.MaxExtractorNameLength), 1, ExtractorIdentity{Name: strings.Repeat("x", wire.MaxExtractorNameLength), NumberOfShards: 1}, false},
		{"a name past the limit", strings.Repeat("x", wire.MaxExtractorNameLength+1), 1, ExtractorIdentity{}, true},
		{"a number past int32", "hash-code", 1 << 31, ExtractorIdentity{}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := extractorIdentity("Register", region, tc.extName, tc.shards)
			if tc.wantErr {
				if err == nil || !errors.Is(err, ErrInvalidMessage) {
					t.Fatalf("extractorIdentity = %v, %v; want an ErrInvalidMessage", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("extractorIdentity = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
