package singleton

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/ask"
	"github.com/protoshard/protoshard/internal/guard"
	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/membership"
)

// leaveHookTimeout bounds the wait for the hand-over before a graceful
// Leave whose context has no deadline.
const leaveHookTimeout = 60 * time.Second

// State names of the ClusterSingletonManager, as in Akka; they appear in logs.
const (
	stateStart          = "Start"
	stateOldest         = "Oldest"
	stateYounger        = "Younger"
	stateBecomingOldest = "BecomingOldest"
	stateAcquiringLease = "AcquiringLease"
	stateWasOldest      = "WasOldest"
	stateHandingOver    = "HandingOver"
	stateStopping       = "Stopping"
	stateEnd            = "End"
)

// getState asks a manager for its current state name; the answer is a
// *currentState. Local only (for tests and diagnostics).
type getState struct{}

// currentState answers getState.
type currentState struct {
	State     string     // the manager's state name (Start, Oldest, Younger, ...)
	MemberID  string     // the member incarnation the manager runs on
	Singleton *actor.PID // nil unless running
}

// StartManager spawns a ClusterSingletonManager named name on system. It must
// be started with the same name and options on every member (of the role).
// The singleton is created from props, as the child named by
// WithSingletonName, on the oldest member only (and, WithLease, only while
// that member holds the lease named "singleton-" + name). The manager registers a
// leave hook on cluster, so a graceful Leave waits for the hand-over. An
// option with a value it does not accept fails with ErrInvalidOption.
func StartManager(system *actor.ActorSystem, cluster *membership.Cluster, props *actor.Props, name string, opts ...Option) (*actor.PID, error) {
	if props == nil {
		return nil, errors.New("singleton: props is nil")
	}
	if name == "" {
		return nil, errors.New("singleton: manager name is empty")
	}
	o, err := applyOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("singleton: manager %q: %w", name, err)
	}
	settings := o.manager.withDefaults()
	settings.RemovalMargin = effectiveRemovalMargin(settings.RemovalMargin, membershiphook.Of(cluster).DownRemovalMargin())
	fence := &staleFence{stale: membershiphook.Of(cluster).Stale, name: name}
	props = props.Clone(actor.WithReceiverMiddleware(fence.middleware))
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		m := newManager(cluster, props, name, settings)
		m.fence = fence
		return m
	}, guard.WithMailbox()), name)
	if err != nil {
		return nil, fmt.Errorf("singleton: spawn manager %q: %w", name, err)
	}
	cluster.RegisterLeaveHook("singleton "+name, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, leaveHookTimeout)
		defer cancel()
		if _, err := ask.Request(ctx, system, pid, leaving{}); err != nil {
			return fmt.Errorf("singleton %s hand-over before leaving: %w", name, err)
		}
		return nil
	})
	return pid, nil
}
