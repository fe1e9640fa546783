package coordinatoractor

import (
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/messages"
)

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
		State:               stateMessage(cur.State),
		RebalanceInProgress: slices.Clone(cur.RebalanceInProgress),
	}
}
