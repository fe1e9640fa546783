package singleton

import (
	"fmt"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/deadletters"
	"github.com/protoshard/protoshard/internal/staleness"
)

// staleFence keeps the singleton actor of a manager from working while its
// node's membership is stale (membershiphook.Cluster.Stale): the node was
// paused or cut off past its failure detection timeout, so the others may
// have removed it and started their singleton already, and it has not
// heard yet. A paused node's timers fire as it resumes, before its manager
// hears of the removal; without the fence, its singleton carried on next to
// its successor until then (seen for 2.3 to 2.5 s in the chaos command).
//
// The fence is a receiver middleware on the singleton's props: one actor
// per node, so its cost (an envelope per message) does not matter. The
// first message the singleton would receive while stale stops it instead,
// and is dropped with a dead-letter event; its manager starts it again
// once the node has confirmed its membership (see manager.singletonTerminated),
// unless its removal comes first. Stopping rather than only dropping:
// a singleton that re-arms its own timer on each tick would lose the timer
// to a dropped tick for good.
type staleFence struct {
	stale func() bool
	name  string // the manager's, for the reasons
	// stopped: the fence stopped the singleton, and its manager has not
	// seen its termination yet.
	stopped atomic.Bool
}

// middleware is the receiver middleware to put on the singleton's props.
func (f *staleFence) middleware(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(ctx actor.ReceiverContext, env *actor.MessageEnvelope) {
		if !fencedWhileStale(env.Message) || !f.stale() {
			next(ctx, env)
			return
		}
		f.stopped.Store(true)
		deadletters.PublishError(ctx.ActorSystem(), ctx.Self(), env.Message, env.Sender,
			fmt.Errorf("singleton %s: stopped instead of receiving the message: %w", f.name, staleness.ErrStale))
		ctx.ActorSystem().Root.Stop(ctx.Self())
	}
}

// takeStopped reports whether the fence stopped the singleton since the
// last call.
func (f *staleFence) takeStopped() bool { return f.stopped.Swap(false) }

// fencedWhileStale reports whether msg is one the singleton must not
// receive while its node's membership is stale: anything but its own life
// (Started, Stopping, Stopped, Restarting) and proto.actor's messages that
// stop it (PoisonPill and the like).
func fencedWhileStale(msg any) bool {
	switch msg.(type) {
	case *actor.Started, actor.AutoReceiveMessage: // Stopping, Stopped, Restarting, PoisonPill
		return false
	}
	return true
}
