package shardeddaemonprocess

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/behavior"
	"github.com/protoshard/protoshard/internal/deadletters"
	"github.com/protoshard/protoshard/messages"
)

// handOffWorker is the hand-off stop message of the workers' shards (sent
// within a member only).
type handOffWorker struct{}

// worker is the entity of one worker: it asks the coordinator whether its
// revision is the current one before it runs the user's behavior as its
// child, and stops that child when the coordinator stops its revision.
type worker struct {
	coordinator   *actor.PID
	factory       func(id int) *actor.Props
	retryInterval time.Duration
	stopMessage   any

	states behavior.States
	id     string
	index  int
	child  *actor.PID
}

func (w *worker) Receive(ctx actor.Context) {
	if w.states.Name() == "" {
		w.become(ctx, "starting", w.starting)
	}
	w.states.Receive(ctx)
}

func (w *worker) become(ctx actor.Context, name string, receive actor.ReceiveFunc) {
	w.states.Become(ctx, "sharded daemon process worker", name, receive, "worker", w.id)
}

// starting: the entity has just been created.
func (w *worker) starting(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); !ok {
		w.unhandled(ctx)
		return
	}
	id, err := actorsharding.EntityID(ctx)
	var parsed workerID
	if err == nil {
		parsed, err = parseWorkerID(id)
	}
	if err != nil {
		ctx.Logger().Warn("sharded daemon process: stopping a worker of a malformed ID", "error", err)
		ctx.Stop(ctx.Self())
		return
	}
	w.id, w.index = id, parsed.index
	w.askToStart(ctx)
	w.become(ctx, "waiting", w.waiting)
}

func (w *worker) askToStart(ctx actor.Context) {
	ctx.Request(w.coordinator, &messages.DaemonWorkerStarting{EntityId: w.id})
	ctx.SetReceiveTimeout(w.retryInterval)
}

// waiting: the coordinator has not yet said whether this revision runs.
func (w *worker) waiting(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.ReceiveTimeout:
		w.askToStart(ctx)
	case *messages.DaemonWorkerAllowed:
		if m.GetEntityId() != w.id {
			return
		}
		ctx.CancelReceiveTimeout()
		if !m.GetAllowed() {
			ctx.Logger().Debug("sharded daemon process: a worker of another revision stops", "worker", w.id)
			ctx.Stop(ctx.Self())
			return
		}
		props := w.factory(w.index)
		if props == nil {
			ctx.Logger().Error("sharded daemon process: the behavior factory returned no Props", "worker", w.id)
			ctx.Stop(ctx.Self())
			return
		}
		w.child = ctx.Spawn(props)
		w.become(ctx, "running", w.running)
	case *messages.DaemonStopWorker:
		ctx.CancelReceiveTimeout()
		w.reportStopped(ctx)
	case handOffWorker:
		ctx.Stop(ctx.Self())
	default:
		w.unhandled(ctx)
	}
}

// running: the user's behavior runs as the child.
func (w *worker) running(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.DaemonStopWorker, handOffWorker:
		if w.stopMessage != nil {
			ctx.Send(w.child, w.stopMessage)
		} else {
			ctx.Stop(w.child)
		}
		w.become(ctx, "stopping", w.stopping)
	case *actor.Terminated:
		if m.GetWho().Equal(w.child) {
			// The worker stopped by itself: the next keep-alive starts it again.
			ctx.Stop(ctx.Self())
		}
	case *messages.DaemonWorkerAllowed, *actor.ReceiveTimeout:
		// A late answer to a repeated ask, or a timeout queued before the
		// answer cancelled it.
	default:
		w.unhandled(ctx)
	}
}

// stopping: the child is stopping for DaemonStopWorker or a hand-off.
func (w *worker) stopping(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Terminated:
		if m.GetWho().Equal(w.child) {
			w.reportStopped(ctx)
		}
	case *messages.DaemonStopWorker, *messages.DaemonWorkerAllowed, handOffWorker, *actor.ReceiveTimeout:
	default:
		w.unhandled(ctx)
	}
}

// reportStopped tells the coordinator that this worker runs nothing and
// stops it.
func (w *worker) reportStopped(ctx actor.Context) {
	ctx.Send(w.coordinator, &messages.DaemonWorkerStopped{EntityId: w.id})
	ctx.Stop(ctx.Self())
}

func (w *worker) unhandled(ctx actor.Context) {
	switch ctx.Message().(type) {
	case actor.SystemMessage, actor.AutoReceiveMessage, *actor.Stopped, *actor.Stopping, *actor.Restarting:
		return
	}
	deadletters.Publish(ctx.ActorSystem(), ctx.Self(), ctx.Message(), ctx.Sender(), "a sharded daemon process's worker takes no messages")
}
