package coordinator

import (
	"slices"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/messages"
)

// GetCoordinatorState asks a coordinator for a copy of its State; the
// answer is a *CurrentCoordinatorState. Local only (tests, diagnostics).
type GetCoordinatorState struct{}

// CurrentCoordinatorState answers GetCoordinatorState.
type CurrentCoordinatorState struct {
	Name                string   // StateWaitingForState or StateActive
	State               State    // the coordinator's state, as last written to the store
	Version             uint64   // the store's version of that state (Consul: its ModifyIndex)
	Epoch               uint64   // the version the coordinator claimed at its start; its commands carry it
	RebalanceInProgress []string // shards being handed off now
}

// currentState is the coordinator's answer to GetCoordinatorState in its
// state name: the state as written, not what waits for a write.
func currentState(name string, writes *stateWrites, epoch uint64, handOffs *handOffs) *CurrentCoordinatorState {
	// Clone turns the zero State (before the load) into the empty one.
	return &CurrentCoordinatorState{Name: name, State: writes.durable.Clone(), Version: writes.version,
		Epoch: epoch, RebalanceInProgress: handOffs.shards()}
}

// stateAnswer is the answer to messages.GetShardCoordinatorState: cur as
// the coordinator self, running on member memberID, would report it.
// Unlike GetCoordinatorState it crosses nodes, so admin tools on any node
// see which node holds the coordinator and which shards move.
func stateAnswer(cur *CurrentCoordinatorState, self *actor.PID, memberID string) *messages.ShardCoordinatorState {
	return &messages.ShardCoordinatorState{
		Coordinator:         copyPID(self),
		MemberId:            memberID,
		StateName:           cur.Name,
		Epoch:               cur.Epoch,
		State:               StateMessage(cur.State),
		RebalanceInProgress: slices.Clone(cur.RebalanceInProgress),
	}
}

// regionAddresses lists the addresses of the regions of st (the state as
// written), sorted, each once.
func regionAddresses(st State) []string {
	var out []string
	for _, r := range st.Regions {
		out = append(out, r.PID.Address)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// askShardingStats asks every region for its stats off the actor and
// sends requester the ClusterShardingStats: the answer waits for the
// slowest region, up to the timeout. A region that does not answer is
// listed with every shard the coordinator allocated to it as failed.
func askShardingStats(root *actor.RootContext, regions []RegionEntry, timeout time.Duration, requester *actor.PID) {
	go func() {
		type answer struct {
			addr  string
			stats *messages.ShardRegionStats
		}
		answers := make(chan answer, len(regions))
		for _, r := range regions {
			go func(r RegionEntry) {
				res, err := root.RequestFuture(r.PID, &messages.GetShardRegionStats{}, timeout).Result()
				st, ok := res.(*messages.ShardRegionStats)
				if err != nil || !ok {
					st = &messages.ShardRegionStats{Stats: map[string]int32{}, Failed: slices.Clone(r.Shards)}
				}
				answers <- answer{addr: r.PID.Address, stats: st}
			}(r)
		}
		out := &messages.ClusterShardingStats{Regions: map[string]*messages.ShardRegionStats{}}
		for range regions {
			a := <-answers
			out.Regions[a.addr] = a.stats
		}
		root.Send(requester, out)
	}()
}
