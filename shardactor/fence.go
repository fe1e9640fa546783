package shardactor

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/deadletter"
)

// memberStaleReason is why a message is dropped while this node's
// membership is stale.
const memberStaleReason = "this node has not confirmed its membership within the failure detection timeout " +
	"(it was paused or cut off): the others may have removed it and started this shard elsewhere"

// fencedEntityProps is entityProps with a receiver middleware that drops an
// entity's messages while stale says this node may have been removed: a
// message that sat in the entity's own mailbox through a pause (a direct
// route puts it there without the shard) would otherwise be processed as
// the node resumes, next to the entity's incarnation on another node. The
// lifecycle and system messages pass, so the entity still starts and
// stops. The user's props are copied, not changed.
func fencedEntityProps(entityProps *actor.Props, stale func() bool) *actor.Props {
	if entityProps == nil || stale == nil {
		return entityProps
	}
	fenced := *entityProps
	return fenced.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(ctx actor.ReceiverContext, env *actor.MessageEnvelope) {
			if stale() && !lifecycleMessage(env.Message) {
				deadletter.Publish(ctx.ActorSystem(), ctx.Self(), env.Message, env.Sender, memberStaleReason)
				return
			}
			next(ctx, env)
		}
	}))
}

// lifecycleMessage: proto.actor's own messages to the actor, which carry
// no work from a sender.
func lifecycleMessage(msg any) bool {
	switch msg.(type) {
	case actor.SystemMessage, actor.AutoReceiveMessage, *actor.ReceiveTimeout:
		return true
	}
	return false
}
