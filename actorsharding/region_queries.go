package actorsharding

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/guard"
	"github.com/protoshard/protoshard/internal/shardproto"
	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/proto"
)

// askCoordinator forwards a query the coordinator answers; without a
// coordinator the answer is empty at once (as Akka's region).
func (r *region) askCoordinator(ctx actor.Context, empty proto.Message) {
	if !r.link.registered() {
		ctx.Respond(empty)
		return
	}
	ctx.Forward(r.link.coordinator)
}

// status answers GetShardRegionStatus, from the region's own state.
func (r *region) status() *messages.ShardRegionStatus {
	st := &messages.ShardRegionStatus{TypeName: r.typeName, RegisteredMemberId: r.link.registeredAs, Proxy: r.proxyOnly()}
	if r.link.registered() {
		st.RegisteredWithCoordinator, st.Coordinator, st.Epoch = true, r.link.coordinator, r.link.epoch
	}
	return st
}

// onGetShardRegionStats answers with the entity count of every local shard.
func (r *region) onGetShardRegionStats(ctx actor.Context) {
	r.queryShards(ctx, &shardproto.GetShardStats{}, func(answers []shardAnswer) proto.Message {
		out := &messages.ShardRegionStats{Stats: map[string]int32{}}
		for _, a := range answers {
			if st, ok := a.answer.(*shardproto.ShardStats); ok {
				out.Stats[a.shard] = int32(st.EntityCount)
			} else {
				out.Failed = append(out.Failed, a.shard)
			}
		}
		return out
	})
}

// onGetShardRegionState answers with the entity IDs of every local shard.
func (r *region) onGetShardRegionState(ctx actor.Context) {
	r.queryShards(ctx, &shardproto.GetCurrentShardState{}, func(answers []shardAnswer) proto.Message {
		out := &messages.CurrentShardRegionState{}
		for _, a := range answers {
			if st, ok := a.answer.(*shardproto.CurrentShardState); ok {
				out.Shards = append(out.Shards, &messages.ShardState{ShardId: a.shard, EntityIds: st.EntityIDs})
			} else {
				out.Failed = append(out.Failed, a.shard)
			}
		}
		return out
	})
}

// queryShards asks every local shard q off the actor (the answer waits for
// the slowest shard, up to the query timeout) and sends the sender what
// build makes of the answers; a shard that does not answer has a nil one.
func (r *region) queryShards(ctx actor.Context, q any, build func([]shardAnswer) proto.Message) {
	requester := ctx.Sender()
	if requester == nil {
		return
	}
	shards := r.table.runningShards()
	root := guard.Root(ctx.ActorSystem(), r.settings.MaxMessageSize)
	timeout := r.settings.ShardRegionQueryTimeout
	go func() {
		root.Send(requester, build(askShards(root, shards, q, timeout)))
	}()
}

type shardRef struct {
	shard string
	pid   *actor.PID
}

type shardAnswer struct {
	shard  string
	answer any
}

// askShards asks every shard at once and waits for all answers or the
// timeout; a shard that fails has a nil answer.
func askShards(root *actor.RootContext, shards []shardRef, q any, timeout time.Duration) []shardAnswer {
	futures := make([]*actor.Future, len(shards))
	for i, s := range shards {
		futures[i] = root.RequestFuture(s.pid, q, timeout)
	}
	out := make([]shardAnswer, len(shards))
	for i, f := range futures {
		res, err := f.Result()
		if err != nil {
			res = nil
		}
		out[i] = shardAnswer{shard: shards[i].shard, answer: res}
	}
	return out
}

// shareEntityLimit tells every shard its share of the region's limit; the
// shares change with the number of shards (as Akka's region does).
func (r *region) shareEntityLimit(ctx actor.Context) {
	if r.activeEntityLimit <= 0 && !r.limitShared {
		return // no limit was ever set: nothing to tell
	}
	r.limitShared = true
	running := r.table.runningShards()
	share := shardLimit(r.activeEntityLimit, len(running))
	for _, s := range running {
		ctx.Send(s.pid, &shardproto.SetActiveEntityLimit{Limit: share})
	}
}
