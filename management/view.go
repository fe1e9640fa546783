package management

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
)

// memberView is one member in the JSON routes.
type memberView struct {
	ID      string   `json:"id"`
	Address string   `json:"address"`
	Roles   []string `json:"roles"`
	Status  string   `json:"status"` // Up, Leaving; Removed for a region whose member is gone
	Age     uint64   `json:"age"`    // join order: smaller is older
	Self    bool     `json:"self,omitempty"`
}

// membersView answers /cluster/members.
type membersView struct {
	// Cluster is the cluster's name (membership.Cluster.Name), under which
	// its keys in Consul live.
	Cluster string       `json:"cluster"`
	Self    string       `json:"self"`
	Oldest  string       `json:"oldest,omitempty"` // the oldest Up member
	Members []memberView `json:"members"`          // oldest first
}

func newMemberView(m membership.Member, selfID string) memberView {
	roles := m.Roles
	if roles == nil {
		roles = []string{}
	}
	return memberView{ID: m.ID, Address: m.Address, Roles: roles, Status: m.Status.String(), Age: m.Age, Self: m.ID == selfID}
}

// buildMembers lists members oldest first, Leaving ones included.
func buildMembers(members []membership.Member, selfID string) membersView {
	out := membersView{Self: selfID, Members: []memberView{}}
	for _, m := range membership.ByAge(members, "", true) {
		out.Members = append(out.Members, newMemberView(m, selfID))
	}
	if o, ok := membership.Oldest(members, ""); ok {
		out.Oldest = o.ID
	}
	return out
}

// shardBox is one shard in a node's column of the shard map.
type shardBox struct {
	ID       string `json:"id"`
	Entities int    `json:"entities"`
	// HandingOff: the coordinator is moving the shard away from this node.
	HandingOff bool `json:"handingOff,omitempty"`
	// Failed: the region did not report the shard's entities in time.
	Failed bool `json:"failed,omitempty"`
	// Unallocated: the region runs the shard, but the coordinator has it
	// elsewhere or nowhere: it is stopping after a hand-off.
	Unallocated bool `json:"unallocated,omitempty"`
}

// nodeColumn is one member (or a region whose member is gone) in the
// shard map, with the shards its region hosts.
type nodeColumn struct {
	memberView
	// Region: the member has a region of the type registered with the
	// coordinator; a member without one hosts nothing (a proxy, or a
	// member without the type's role).
	Region      bool       `json:"region"`
	Coordinator bool       `json:"coordinator,omitempty"` // the coordinator runs here
	Entities    int        `json:"entities"`
	Shards      []shardBox `json:"shards"`
}

// coordinatorView is where a type's coordinator runs and in which state.
type coordinatorView struct {
	MemberID string `json:"memberId"`
	Address  string `json:"address"`
	State    string `json:"state"`
	Epoch    uint64 `json:"epoch"`
}

// handOffView is a shard the coordinator is moving, and its current home.
type handOffView struct {
	Shard string `json:"shard"`
	From  string `json:"from,omitempty"` // member id; empty if not allocated
}

// shardMap answers /cluster/shards/{type}/map: what the page draws.
type shardMap struct {
	Cluster     string          `json:"cluster"` // the cluster's name, as in membersView
	Type        string          `json:"type"`
	Coordinator coordinatorView `json:"coordinator"`
	Nodes       []nodeColumn    `json:"nodes"`
	HandOffs    []handOffView   `json:"handOffs"`
	Unallocated []string        `json:"unallocated"` // remember-entities shards to start again
	Shards      int             `json:"shards"`      // allocated shards
	Entities    int             `json:"entities"`
}

// buildShardMap combines the members (oldest first), the coordinator's
// state (which region holds which shard) and the regions' entity counts
// (by region address) into the shard map. The coordinator decides where
// a shard is; the stats add the counts, and the shards a region still
// runs that the coordinator no longer gives it.
func buildShardMap(typeName string, members []membership.Member, selfID string,
	coord *messages.ShardCoordinatorState, stats *messages.ClusterShardingStats) shardMap {
	out := shardMap{Type: typeName, Nodes: []nodeColumn{}, HandOffs: []handOffView{}, Unallocated: []string{}}
	out.Coordinator = coordinatorView{MemberID: coord.GetMemberId(), Address: coord.GetCoordinator().GetAddress(),
		State: coord.GetStateName(), Epoch: coord.GetEpoch()}
	moving := map[string]bool{}
	for _, s := range coord.GetRebalanceInProgress() {
		moving[s] = true
	}
	column := map[string]int{} // member id -> index in out.Nodes
	for _, m := range membership.ByAge(members, "", true) {
		column[m.ID] = len(out.Nodes)
		out.Nodes = append(out.Nodes, nodeColumn{memberView: newMemberView(m, selfID), Shards: []shardBox{}})
	}
	home := map[string]string{} // shard -> member id
	for _, r := range coord.GetState().GetRegions() {
		i, ok := column[r.GetMemberId()]
		if !ok {
			// The coordinator still lists a region whose member this node
			// no longer sees (its removal is being handled).
			i = len(out.Nodes)
			column[r.GetMemberId()] = i
			out.Nodes = append(out.Nodes, nodeColumn{memberView: memberView{ID: r.GetMemberId(), Address: r.GetRef().GetAddress(),
				Roles: []string{}, Status: "Removed"}, Shards: []shardBox{}})
		}
		col := &out.Nodes[i]
		col.Region = true
		regionStats := stats.GetRegions()[r.GetRef().GetAddress()]
		failed := map[string]bool{}
		for _, s := range regionStats.GetFailed() {
			failed[s] = true
		}
		allocated := map[string]bool{}
		for _, s := range r.GetShards() {
			allocated[s] = true
			home[s] = r.GetMemberId()
			col.Shards = append(col.Shards, shardBox{ID: s, Entities: int(regionStats.GetStats()[s]), HandingOff: moving[s], Failed: failed[s]})
		}
		for s, n := range regionStats.GetStats() {
			if !allocated[s] {
				col.Shards = append(col.Shards, shardBox{ID: s, Entities: int(n), Unallocated: true, HandingOff: moving[s]})
			}
		}
	}
	for i := range out.Nodes {
		col := &out.Nodes[i]
		col.Coordinator = col.ID != "" && col.ID == coord.GetMemberId()
		slices.SortFunc(col.Shards, func(a, b shardBox) int { return compareShardIDs(a.ID, b.ID) })
		for _, s := range col.Shards {
			col.Entities += s.Entities
		}
		out.Entities += col.Entities
	}
	out.Shards = len(home)
	for _, s := range sortedShardIDs(coord.GetRebalanceInProgress()) {
		out.HandOffs = append(out.HandOffs, handOffView{Shard: s, From: home[s]})
	}
	out.Unallocated = append(out.Unallocated, sortedShardIDs(coord.GetState().GetUnallocatedShards())...)
	return out
}

// compareShardIDs orders numeric shard IDs (the hash-code extractor's) by
// number, and any other after them by text.
func compareShardIDs(a, b string) int {
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	switch {
	case errA == nil && errB == nil:
		return cmp.Compare(x, y)
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return strings.Compare(a, b)
}

func sortedShardIDs(ids []string) []string {
	out := slices.Clone(ids)
	slices.SortFunc(out, compareShardIDs)
	return out
}

// singletonView is a cluster singleton and the member that owns it.
type singletonView struct {
	Name  string      `json:"name"` // the manager's actor name
	Role  string      `json:"role"`
	Owner *memberView `json:"owner"` // null: no Up member has the role
}

// buildSingletons names each singleton's owner: the oldest Up member of
// its role, where its ClusterSingletonManager runs it (during a hand-over
// the previous owner may still be stopping it).
func buildSingletons(singletons []singletonSpec, members []membership.Member, selfID string) []singletonView {
	out := make([]singletonView, 0, len(singletons))
	for _, s := range singletons {
		v := singletonView{Name: s.name, Role: s.role}
		if o, ok := membership.Oldest(members, s.role); ok {
			m := newMemberView(o, selfID)
			v.Owner = &m
		}
		out = append(out, v)
	}
	return out
}
