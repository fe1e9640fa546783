package actorsharding

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Passivate asks the shard of the entity whose context ctx is to stop it
// (Akka's Passivate): the shard sends the entity stopMessage, or stops it
// with proto.actor's PoisonPill when stopMessage is nil, and holds the
// messages that arrive meanwhile for the entity's next incarnation. Call
// it from the entity's Receive. It fails for an actor that is not a
// sharded entity, and for a stop message that cannot be encoded.
func Passivate(ctx actor.Context, stopMessage proto.Message) error {
	if _, err := EntityID(ctx); err != nil {
		return fmt.Errorf("actorsharding: Passivate: %w", err)
	}
	p := &messages.Passivate{}
	if stopMessage != nil {
		stop, err := anypb.New(stopMessage)
		if err != nil {
			return fmt.Errorf("actorsharding: Passivate: stop message %T: %w", stopMessage, err)
		}
		p.StopMessage = stop
	}
	// Request, not Send: the shard knows the entity by the sender.
	ctx.Request(ctx.Parent(), p)
	return nil
}
