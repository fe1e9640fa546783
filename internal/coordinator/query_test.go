package coordinator

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

func TestStateAnswer(t *testing.T) {
	a := actor.NewPID("10.0.0.1:1", "sharding/Counter")
	b := actor.NewPID("10.0.0.2:1", "sharding/Counter")
	p := actor.NewPID("10.0.0.3:1", "sharding/Counter")
	self := actor.NewPID("10.0.0.1:1", "sharding/CounterCoordinator/singleton/coordinator")
	st := NewState(false)
	for _, e := range []Event{
		ShardRegionRegistered{Region: a, MemberID: "m-a"},
		ShardRegionRegistered{Region: b, MemberID: "m-b"},
		ShardRegionProxyRegistered{Proxy: p, MemberID: "m-p"},
		ShardHomeAllocated{Shard: "2", Region: b},
		ShardHomeAllocated{Shard: "1", Region: b},
		ShardHomeAllocated{Shard: "3", Region: a},
	} {
		if err := st.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	cur := &CurrentCoordinatorState{Name: StateActive, State: st, Epoch: 7, RebalanceInProgress: []string{"1"}}
	got := stateAnswer(cur, self, "m-a")

	if !got.GetCoordinator().Equal(self) || got.GetCoordinator() == self {
		t.Errorf("coordinator = %v, want a copy of %v", got.GetCoordinator(), self)
	}
	if got.GetMemberId() != "m-a" || got.GetStateName() != StateActive || got.GetEpoch() != 7 {
		t.Errorf("member, state, epoch = %q, %q, %d", got.GetMemberId(), got.GetStateName(), got.GetEpoch())
	}
	regions := got.GetState().GetRegions()
	if len(regions) != 2 {
		t.Fatalf("regions = %v", regions)
	}
	// Regions in RegionKey order, shards in allocation order.
	if regions[0].GetMemberId() != "m-a" || len(regions[0].GetShards()) != 1 || regions[0].GetShards()[0] != "3" {
		t.Errorf("first region = %v", regions[0])
	}
	if s := regions[1].GetShards(); regions[1].GetMemberId() != "m-b" || len(s) != 2 || s[0] != "2" || s[1] != "1" {
		t.Errorf("second region = %v", regions[1])
	}
	if px := got.GetState().GetRegionProxies(); len(px) != 1 || px[0].GetMemberId() != "m-p" {
		t.Errorf("proxies = %v", px)
	}
	cur.RebalanceInProgress[0] = "changed"
	if r := got.GetRebalanceInProgress(); len(r) != 1 || r[0] != "1" {
		t.Errorf("rebalance in progress = %v, want [1], not shared with the state", r)
	}
}
