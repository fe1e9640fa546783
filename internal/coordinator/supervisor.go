package coordinator

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/protoshard/protoshard/internal/backoff"
	"github.com/protoshard/protoshard/internal/behavior"
	"github.com/protoshard/protoshard/internal/deadletters"
	"github.com/protoshard/protoshard/internal/guard"
	"github.com/protoshard/protoshard/internal/staleness"
)

// CoordinatorName is the child name of the coordinator under its
// supervisor (Akka's "coordinator" under the singleton "singleton").
const CoordinatorName = "coordinator"

// State names of the ShardCoordinatorSupervisor; they appear in logs.
const (
	// StateCoordinatorRunning: the coordinator child runs.
	StateCoordinatorRunning = "coordinatorRunning"
	// StateCoordinatorBackoff: the coordinator stopped; a new one starts
	// when the back-off has passed.
	StateCoordinatorBackoff = "coordinatorBackoff"
)

// backoffFactor is how far the back-off grows: coordinator-failure-backoff
// up to five times it, as Akka's BackoffOpts for the coordinator.
const backoffFactor = 5

// startCoordinator is the supervisor's back-off timer.
type startCoordinator struct{}

// SupervisorProps returns the props of Akka's ShardCoordinatorSupervisor,
// the cluster singleton of an entity type. It runs the coordinator (from
// coordinator) as its child CoordinatorName and passes it every message,
// with its sender. When the coordinator stops (its store write failed, or
// another coordinator wrote the state: it is stale), or fails (a panic),
// the supervisor starts a new one after failureBackoff, doubling up to
// five times it, as Akka's coordinator-failure-backoff; the new one reads
// the state and claims it under a new epoch. Messages that arrive while
// there is no coordinator are dropped with a dead-letter event; regions
// retry theirs.
//
// Only the singleton manager starts or stops the supervisor, so a node
// that stops being the oldest (or is removed) starts no coordinator again;
// while its membership is stale (staleness), the back-off starts none
// either, and tries again after the next back-off.
func SupervisorProps(coordinator *actor.Props, failureBackoff time.Duration) *actor.Props {
	if failureBackoff <= 0 {
		failureBackoff = DefaultSettings().CoordinatorFailureBackoff
	}
	// A coordinator that ran for the longest back-off stopped for a new
	// reason: its series starts afresh.
	b := backoff.Series{Exponential: backoff.Exponential{Min: failureBackoff, Max: backoffFactor * failureBackoff, RandomFactor: 0.2},
		ResetAfter: backoffFactor * failureBackoff}
	// A coordinator that fails is stopped, not restarted in place: a fresh
	// one reads and claims the state again, after the back-off.
	stopOnFailure := actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })
	return actor.PropsFromProducer(func() actor.Actor {
		return &supervisor{props: coordinator, backoff: b}
	}, actor.WithSupervisor(stopOnFailure), guard.WithMailbox())
}

// supervisor is Akka's ShardCoordinatorSupervisor with BackoffOpts.onStop.
type supervisor struct {
	props   *actor.Props
	backoff backoff.Series // the coordinator's stops in a row

	states   behavior.States
	child    *actor.PID
	timers   *scheduler.TimerScheduler
	stopping bool
}

func (s *supervisor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		s.timers = scheduler.NewTimerScheduler(ctx)
		s.start(ctx)
		return
	case *actor.Stopping:
		// The singleton manager stops it (hand-over, removal): the
		// coordinator stops with it and must not be started again.
		s.stopping = true
		return
	case *actor.Stopped, *actor.Restarting:
		return
	case *actor.Terminated:
		if s.stopping {
			return
		}
	}
	s.states.Receive(ctx)
}

func (s *supervisor) running(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Terminated:
		if s.child == nil || !msg.Who.Equal(s.child) {
			return
		}
		s.child = nil
		delay, attempt := s.backoff.Stopped(time.Now())
		ctx.Logger().Warn("shard coordinator stopped; starting a new one after the back-off",
			slog.Duration("backoff", delay), slog.Int("attempt", attempt))
		s.become(ctx, StateCoordinatorBackoff, s.waiting)
		s.timers.SendOnce(delay, ctx.Self(), startCoordinator{})
	case startCoordinator:
	default:
		ctx.Forward(s.child)
	}
}

func (s *supervisor) waiting(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case startCoordinator:
		s.start(ctx)
	case *actor.Terminated:
	default:
		deadletters.Publish(ctx.ActorSystem(), ctx.Self(), msg, ctx.Sender(),
			fmt.Sprintf("shard coordinator supervisor: %T arrived while the coordinator restarts after a failure", msg))
	}
}

func (s *supervisor) start(ctx actor.Context) {
	pid, err := staleness.SpawnNamed(ctx, staleness.Of(ctx.ActorSystem()), s.props, CoordinatorName)
	if err != nil {
		// This node's membership is stale (the coordinator may run on the
		// new oldest by now: a second one would claim the state under a
		// new epoch), or the previous child is still registered, which its
		// Terminated rules out: try again after the back-off.
		ctx.Logger().Error("shard coordinator supervisor: cannot start the coordinator", slog.Any("error", err))
		s.become(ctx, StateCoordinatorBackoff, s.waiting)
		delay, _ := s.backoff.Stopped(time.Now())
		s.timers.SendOnce(delay, ctx.Self(), startCoordinator{})
		return
	}
	s.child = pid
	s.backoff.Started(time.Now())
	s.become(ctx, StateCoordinatorRunning, s.running)
}

func (s *supervisor) become(ctx actor.Context, name string, receive actor.ReceiveFunc) {
	s.states.Become(ctx, "shard coordinator supervisor", name, receive)
}
