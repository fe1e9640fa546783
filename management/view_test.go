package management

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
)

var (
	memberA = membership.Member{ID: "a", Address: "10.0.0.1:1", Roles: []string{"backend"}, Age: 1}
	memberB = membership.Member{ID: "b", Address: "10.0.0.2:1", Age: 2}
	memberC = membership.Member{ID: "c", Address: "10.0.0.3:1", Age: 3, Status: membership.Leaving}
)

func regionRecord(m membership.Member, shards ...string) *messages.RegionRecord {
	return &messages.RegionRecord{Ref: actor.NewPID(m.Address, "sharding/Counter"), MemberId: m.ID, Shards: shards}
}

func coordinatorOn(m membership.Member, regions ...*messages.RegionRecord) *messages.ShardCoordinatorState {
	return &messages.ShardCoordinatorState{
		Coordinator: actor.NewPID(m.Address, "sharding/CounterCoordinator/singleton/coordinator"),
		MemberId:    m.ID, StateName: "active", Epoch: 4,
		State: &messages.CoordinatorState{Regions: regions},
	}
}

func statsOf(byAddress map[string]map[string]int32, failed map[string][]string) *messages.ClusterShardingStats {
	out := &messages.ClusterShardingStats{Regions: map[string]*messages.ShardRegionStats{}}
	for addr, st := range byAddress {
		out.Regions[addr] = &messages.ShardRegionStats{Stats: st}
	}
	for addr, f := range failed {
		if out.Regions[addr] == nil {
			out.Regions[addr] = &messages.ShardRegionStats{}
		}
		out.Regions[addr].Failed = f
	}
	return out
}

// column is what a test compares of a node column: its shards as boxes.
type column struct {
	id          string
	status      string
	region      bool
	coordinator bool
	entities    int
	shards      []shardBox
}

func columns(m shardMap) []column {
	var out []column
	for _, n := range m.Nodes {
		out = append(out, column{id: n.ID, status: n.Status, region: n.Region, coordinator: n.Coordinator, entities: n.Entities, shards: n.Shards})
	}
	return out
}

func TestBuildShardMap(t *testing.T) {
	for _, tc := range []struct {
		name      string
		members   []membership.Member
		coord     *messages.ShardCoordinatorState
		stats     *messages.ClusterShardingStats
		want      []column
		handOffs  []handOffView
		shards    int
		entities  int
		unalloced []string
	}{
		{
			name:    "no regions yet: every member a column without a region",
			members: []membership.Member{memberB, memberA},
			coord:   coordinatorOn(memberA),
			stats:   statsOf(nil, nil),
			want: []column{
				{id: "a", status: "Up", coordinator: true, shards: []shardBox{}},
				{id: "b", status: "Up", shards: []shardBox{}},
			},
		},
		{
			name:    "shards sorted by number, counts from the region's address",
			members: []membership.Member{memberA, memberB},
			coord:   coordinatorOn(memberA, regionRecord(memberA, "10", "2"), regionRecord(memberB, "1")),
			stats: statsOf(map[string]map[string]int32{
				memberA.Address: {"10": 3, "2": 1},
				memberB.Address: {"1": 5},
			}, nil),
			want: []column{
				{id: "a", status: "Up", region: true, coordinator: true, entities: 4,
					shards: []shardBox{{ID: "2", Entities: 1}, {ID: "10", Entities: 3}}},
				{id: "b", status: "Up", region: true, entities: 5, shards: []shardBox{{ID: "1", Entities: 5}}},
			},
			shards: 3, entities: 9,
		},
		{
			name:    "a hand-off in progress is marked on the shard's current home",
			members: []membership.Member{memberA, memberB},
			coord: func() *messages.ShardCoordinatorState {
				c := coordinatorOn(memberA, regionRecord(memberA, "1", "2"), regionRecord(memberB))
				c.RebalanceInProgress = []string{"2"}
				return c
			}(),
			stats: statsOf(map[string]map[string]int32{memberA.Address: {"1": 1, "2": 2}}, nil),
			want: []column{
				{id: "a", status: "Up", region: true, coordinator: true, entities: 3,
					shards: []shardBox{{ID: "1", Entities: 1}, {ID: "2", Entities: 2, HandingOff: true}}},
				{id: "b", status: "Up", region: true, shards: []shardBox{}},
			},
			handOffs: []handOffView{{Shard: "2", From: "a"}},
			shards:   2, entities: 3,
		},
		{
			name:    "a shard the region still runs but the coordinator moved is stopping",
			members: []membership.Member{memberA, memberB},
			coord:   coordinatorOn(memberA, regionRecord(memberA), regionRecord(memberB, "7")),
			stats: statsOf(map[string]map[string]int32{
				memberA.Address: {"7": 2},
				memberB.Address: {"7": 0},
			}, nil),
			want: []column{
				{id: "a", status: "Up", region: true, coordinator: true, entities: 2,
					shards: []shardBox{{ID: "7", Entities: 2, Unallocated: true}}},
				{id: "b", status: "Up", region: true, shards: []shardBox{{ID: "7"}}},
			},
			shards: 1, entities: 2,
		},
		{
			name:    "a region that did not answer: its shards failed, no counts",
			members: []membership.Member{memberA},
			coord:   coordinatorOn(memberA, regionRecord(memberA, "1", "2")),
			stats:   statsOf(nil, map[string][]string{memberA.Address: {"1", "2"}}),
			want: []column{
				{id: "a", status: "Up", region: true, coordinator: true,
					shards: []shardBox{{ID: "1", Failed: true}, {ID: "2", Failed: true}}},
			},
			shards: 2,
		},
		{
			name:    "a leaving member keeps its column; a region whose member is gone gets one",
			members: []membership.Member{memberA, memberC},
			coord:   coordinatorOn(memberA, regionRecord(memberA, "1"), regionRecord(memberB, "2"), regionRecord(memberC, "3")),
			stats:   statsOf(map[string]map[string]int32{memberA.Address: {"1": 1}, memberC.Address: {"3": 1}}, nil),
			want: []column{
				{id: "a", status: "Up", region: true, coordinator: true, entities: 1, shards: []shardBox{{ID: "1", Entities: 1}}},
				{id: "c", status: "Leaving", region: true, entities: 1, shards: []shardBox{{ID: "3", Entities: 1}}},
				{id: "b", status: "Removed", region: true, shards: []shardBox{{ID: "2"}}},
			},
			shards: 3, entities: 2,
		},
		{
			name:    "remember-entities shards waiting for a home",
			members: []membership.Member{memberA},
			coord: func() *messages.ShardCoordinatorState {
				c := coordinatorOn(memberA, regionRecord(memberA))
				c.State.UnallocatedShards = []string{"x", "3", "12"}
				return c
			}(),
			stats:     statsOf(nil, nil),
			want:      []column{{id: "a", status: "Up", region: true, coordinator: true, shards: []shardBox{}}},
			unalloced: []string{"3", "12", "x"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := buildShardMap("Counter", tc.members, "a", tc.coord, tc.stats)
			if !reflect.DeepEqual(columns(got), tc.want) {
				t.Errorf("columns\n got %+v\nwant %+v", columns(got), tc.want)
			}
			if tc.handOffs == nil {
				tc.handOffs = []handOffView{}
			}
			if !reflect.DeepEqual(got.HandOffs, tc.handOffs) {
				t.Errorf("hand-offs = %+v, want %+v", got.HandOffs, tc.handOffs)
			}
			if got.Shards != tc.shards || got.Entities != tc.entities {
				t.Errorf("shards, entities = %d, %d, want %d, %d", got.Shards, got.Entities, tc.shards, tc.entities)
			}
			if tc.unalloced == nil {
				tc.unalloced = []string{}
			}
			if !reflect.DeepEqual(got.Unallocated, tc.unalloced) {
				t.Errorf("unallocated = %v, want %v", got.Unallocated, tc.unalloced)
			}
			if got.Coordinator.MemberID != tc.coord.GetMemberId() || got.Coordinator.Address != tc.coord.GetCoordinator().GetAddress() ||
				got.Coordinator.Epoch != 4 || got.Coordinator.State != "active" {
				t.Errorf("coordinator = %+v", got.Coordinator)
			}
		})
	}
}

// The page reads these JSON names; renaming a field breaks it.
func TestShardMapJSONNames(t *testing.T) {
	c := coordinatorOn(memberA, regionRecord(memberA, "1"))
	c.RebalanceInProgress = []string{"1"}
	m := buildShardMap("Counter", []membership.Member{memberA}, "a", c, statsOf(map[string]map[string]int32{memberA.Address: {"1": 2}}, nil))
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Coordinator struct {
			Address, State string
			Epoch          uint64
		}
		Nodes []struct {
			ID, Address, Status string
			Roles               []string
			Age                 uint64
			Self, Region        bool
			Coordinator         bool
			Entities            int
			Shards              []struct {
				ID         string
				Entities   int
				HandingOff bool
			}
		}
		HandOffs []struct{ Shard string }
		Shards   int
		Entities int
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	n := raw.Nodes[0]
	if raw.Coordinator.Address != memberA.Address || raw.Coordinator.State != "active" || raw.Coordinator.Epoch != 4 ||
		n.ID != "a" || n.Address != memberA.Address || n.Status != "Up" || n.Age != 1 || !n.Self || !n.Region || !n.Coordinator ||
		n.Entities != 2 || len(n.Roles) != 1 || len(n.Shards) != 1 || n.Shards[0].ID != "1" || n.Shards[0].Entities != 2 ||
		!n.Shards[0].HandingOff || len(raw.HandOffs) != 1 || raw.Shards != 1 || raw.Entities != 2 {
		t.Errorf("JSON %s decodes to %+v", data, raw)
	}
}

func TestBuildMembers(t *testing.T) {
	got := buildMembers([]membership.Member{memberC, memberB, memberA}, "b")
	var ids, statuses []string
	for _, m := range got.Members {
		ids = append(ids, m.ID)
		statuses = append(statuses, m.Status)
	}
	if !reflect.DeepEqual(ids, []string{"a", "b", "c"}) || !reflect.DeepEqual(statuses, []string{"Up", "Up", "Leaving"}) {
		t.Errorf("members %v %v, want oldest first, the leaving one included", ids, statuses)
	}
	if got.Oldest != "a" || got.Self != "b" || !got.Members[1].Self || got.Members[0].Self {
		t.Errorf("oldest %q, self %q, members %+v", got.Oldest, got.Self, got.Members)
	}
	if got.Members[1].Roles == nil {
		t.Error("roles must be a list, never null")
	}
	if empty := buildMembers(nil, ""); empty.Members == nil || empty.Oldest != "" {
		t.Errorf("no members: %+v", empty)
	}
}

func TestBuildSingletons(t *testing.T) {
	specs := []singletonSpec{{name: "sharding/CounterCoordinator"}, {name: "scheduler", role: "backend"}, {name: "billing", role: "billing"}}
	got := buildSingletons(specs, []membership.Member{memberC, memberB, memberA}, "b")
	owners := map[string]string{}
	for _, s := range got {
		if s.Owner != nil {
			owners[s.Name] = s.Owner.ID
		} else {
			owners[s.Name] = "-"
		}
	}
	// The oldest Up member of the role: c is leaving, so a hands over.
	want := map[string]string{"sharding/CounterCoordinator": "a", "scheduler": "a", "billing": "-"}
	if !reflect.DeepEqual(owners, want) {
		t.Errorf("owners = %v, want %v", owners, want)
	}
	leaving := membership.Member{ID: "d", Age: 0, Status: membership.Leaving, Roles: []string{"backend"}}
	if got := buildSingletons(specs[1:2], []membership.Member{leaving, memberA}, ""); got[0].Owner.ID != "a" {
		t.Errorf("a leaving oldest is no owner: got %v", got[0].Owner)
	}
}

func TestCompareShardIDs(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"2", "10", -1}, {"10", "2", 1}, {"3", "3", 0}, {"9", "a", -1}, {"a", "9", 1}, {"a", "b", -1},
	} {
		if got := compareShardIDs(tc.a, tc.b); got != tc.want {
			t.Errorf("compareShardIDs(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestBuildCoordinatorState(t *testing.T) {
	c := coordinatorOn(memberA, regionRecord(memberA, "2", "1"))
	c.State.RegionProxies = []*messages.RegionRecord{regionRecord(memberB)}
	c.RebalanceInProgress = []string{"10", "2"}
	got := buildCoordinatorState("Counter", c)
	if got.MemberID != "a" || got.Address != memberA.Address || got.Epoch != 4 || got.State != "active" {
		t.Errorf("coordinator = %+v", got.coordinatorView)
	}
	want := []regionRecordView{{Address: memberA.Address, MemberID: "a", Shards: []string{"2", "1"}}}
	if !reflect.DeepEqual(got.Regions, want) {
		t.Errorf("regions = %+v, want %+v (allocation order kept)", got.Regions, want)
	}
	if len(got.Proxies) != 1 || got.Proxies[0].Shards == nil {
		t.Errorf("proxies = %+v, want one, with an empty shard list", got.Proxies)
	}
	if !reflect.DeepEqual(got.RebalanceInProgress, []string{"2", "10"}) || got.Unallocated == nil {
		t.Errorf("rebalance %v, unallocated %v", got.RebalanceInProgress, got.Unallocated)
	}
}
