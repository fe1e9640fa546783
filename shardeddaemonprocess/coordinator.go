package shardeddaemonprocess

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/protoshard/protoshard/internal/behavior"
	"github.com/protoshard/protoshard/internal/ticker"
	"github.com/protoshard/protoshard/messages"
)

// storeTimeout bounds one Load or Save of the coordinator. The
// coordinator reads and writes inline, not in a goroutine: the singleton
// hands over only once this actor stopped, and an actor stops between
// messages, so no write of a coordinator lands after its successor
// loaded. The writes are few (start, and two per change), so the wait
// holds up little.
const storeTimeout = 5 * time.Second

// coordinatorActor is Akka's ShardedDaemonProcessCoordinator, run as a
// cluster singleton: it keeps the number of processes and its revision,
// tells workers whether they may run, and carries out
// ChangeNumberOfProcesses: store the new revision (not completed), stop
// every worker of the previous one, store it completed.
type coordinatorActor struct {
	store         Store
	initialCount  int
	region        *actor.PID
	retryInterval time.Duration

	states    behavior.States
	processes Processes
	round     stopRound
	// waiting are the senders of the change under way, answered when it
	// completes.
	waiting []*actor.PID
	cancel  scheduler.CancelFunc
}

// retryTick repeats what a state waits for: loading, stopping workers,
// storing the completed change. A timer rather than a receive timeout,
// which every query would push back.
type retryTick struct{}

func (c *coordinatorActor) Receive(ctx actor.Context) {
	if c.states.Name() == "" {
		c.become(ctx, "loading", c.loading)
	}
	switch ctx.Message().(type) {
	case *actor.Started:
		c.cancel = ticker.SendRepeatedly(ctx, c.retryInterval, c.retryInterval, ctx.Self(), retryTick{})
	case *actor.Stopping:
		c.cancel()
	}
	c.states.Receive(ctx)
}

func (c *coordinatorActor) become(ctx actor.Context, name string, receive actor.ReceiveFunc) {
	c.states.Become(ctx, "sharded daemon process coordinator", name, receive,
		"revision", c.processes.Revision, "count", c.processes.Count)
}

// loading: the stored state is read at start, and again every retry
// interval until the store answers.
func (c *coordinatorActor) loading(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started, retryTick:
		c.load(ctx)
	case *messages.ChangeNumberOfProcesses:
		ctx.Respond(&messages.ChangeNumberOfProcessesResult{Error: "the coordinator has not loaded its state yet"})
	}
	// Workers and pingers ask again; they get no answer meanwhile.
}

func (c *coordinatorActor) load(ctx actor.Context) {
	sctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	p, ok, err := c.store.Load(sctx)
	if err == nil && !ok {
		p = initialProcesses(c.initialCount, time.Now())
		err = c.store.Save(sctx, p)
	}
	if err != nil {
		ctx.Logger().Warn("sharded daemon process coordinator: cannot load the number of processes", "error", err)
		return
	}
	c.processes = p
	if p.Completed {
		c.become(ctx, "idle", c.idle)
		return
	}
	c.startStopping(ctx)
}

// idle: the current revision's workers may run.
func (c *coordinatorActor) idle(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.ChangeNumberOfProcesses:
		next, err := c.processes.change(int(m.GetNumberOfProcesses()), time.Now())
		if err == nil && next == c.processes {
			ctx.Respond(&messages.ChangeNumberOfProcessesResult{Revision: next.Revision})
			return
		}
		if err == nil {
			err = c.save(next)
		}
		if err != nil {
			ctx.Respond(&messages.ChangeNumberOfProcessesResult{Revision: c.processes.Revision, Error: err.Error()})
			return
		}
		ctx.Logger().Info("sharded daemon process: changing the number of processes",
			"from", c.processes.Count, "to", next.Count, "revision", next.Revision)
		c.processes = next
		if ctx.Sender() != nil {
			c.waiting = append(c.waiting, ctx.Sender())
		}
		c.startStopping(ctx)
	default:
		c.answerQueries(ctx)
	}
}

// startStopping sends DaemonStopWorker to each worker of the previous
// revision, and again every retry interval to those that did not answer.
func (c *coordinatorActor) startStopping(ctx actor.Context) {
	c.round = newStopRound(c.processes.toStop())
	c.become(ctx, "stopping", c.stopping)
	c.sendStops(ctx)
}

func (c *coordinatorActor) sendStops(ctx actor.Context) {
	for _, id := range c.round.remaining {
		ctx.Send(c.region, &messages.DaemonStopWorker{EntityId: id})
	}
}

// stopping: the previous revision's workers are stopping; none may start.
func (c *coordinatorActor) stopping(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.DaemonWorkerStopped:
		c.round.stopped(m.GetEntityId())
		if c.round.done() {
			c.complete(ctx)
		}
	case retryTick:
		if c.round.done() {
			c.complete(ctx) // the completed state could not be stored
			return
		}
		c.sendStops(ctx)
	case *messages.ChangeNumberOfProcesses:
		ctx.Respond(&messages.ChangeNumberOfProcessesResult{Revision: c.processes.Revision, Error: ErrChangeInProgress.Error()})
	default:
		c.answerQueries(ctx)
	}
}

// complete stores the change as completed, answers whoever asked for it,
// and lets the new revision's workers run.
func (c *coordinatorActor) complete(ctx actor.Context) {
	done := c.processes.complete()
	if err := c.save(done); err != nil {
		ctx.Logger().Warn("sharded daemon process coordinator: cannot store the completed change", "error", err)
		return
	}
	c.processes = done
	for _, pid := range c.waiting {
		ctx.Send(pid, &messages.ChangeNumberOfProcessesResult{Revision: done.Revision})
	}
	c.waiting = nil
	// Start the new workers now rather than at the pingers' next round.
	for _, id := range keepAliveTargets(done.Revision, done.Count, false) {
		ctx.Send(c.region, &messages.StartEntity{EntityId: id})
	}
	ctx.Logger().Info("sharded daemon process: number of processes changed", "count", done.Count, "revision", done.Revision)
	c.become(ctx, "idle", c.idle)
}

func (c *coordinatorActor) save(p Processes) error {
	sctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	return c.store.Save(sctx, p)
}

// answerQueries answers what every loaded state answers the same way.
func (c *coordinatorActor) answerQueries(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.GetNumberOfProcesses:
		ctx.Respond(&messages.NumberOfProcesses{
			NumberOfProcesses: int32(c.processes.Count),
			Revision:          c.processes.Revision,
			RescaleInProgress: !c.processes.Completed,
			StartedUnixMillis: c.processes.StartedUnixMilli,
		})
	case *messages.DaemonWorkerStarting:
		ctx.Respond(&messages.DaemonWorkerAllowed{EntityId: m.GetEntityId(), Allowed: c.processes.allows(m.GetEntityId())})
	}
}
