package singleton

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/internal/pidkey"
)

// identifyWaiters are the proxies that asked a manager for its singleton
// while none ran there and it may run one soon: a proxy asks the member it
// takes for the oldest, often before that member's manager has seen the
// change (it is still Younger, or has not started), and after a crash of
// the oldest its successor waits out the removal margin (BecomingOldest)
// or a lease (AcquiringLease) first. The manager tells them the singleton
// as soon as it starts, so that a singleton (the shard coordinator) that
// starts after a crash or a hand-over is found at once rather than at the
// proxies' next identification tick. Each proxy is held once; beyond
// maxIdentifyWaiters, or if the manager does not start the singleton after
// all (another member is the oldest, or this one hands over or is gone),
// a proxy finds it at its next tick, as without them.
type identifyWaiters struct {
	pids map[string]*actor.PID
}

// maxIdentifyWaiters bounds the proxies a manager remembers: one per node
// and singleton is what a cluster has.
const maxIdentifyWaiters = 1000

// add remembers pid, unless it is there already or the bound is reached.
func (w *identifyWaiters) add(pid *actor.PID) {
	if pid == nil || pid.GetId() == "" {
		return
	}
	key := pidkey.Of(pid)
	if _, ok := w.pids[key]; ok || len(w.pids) >= maxIdentifyWaiters {
		return
	}
	if w.pids == nil {
		w.pids = map[string]*actor.PID{}
	}
	w.pids[key] = pid
}

// take returns the remembered proxies and forgets them.
func (w *identifyWaiters) take() []*actor.PID {
	out := make([]*actor.PID, 0, len(w.pids))
	for _, pid := range w.pids {
		out = append(out, pid)
	}
	w.pids = nil
	return out
}

func (w *identifyWaiters) len() int { return len(w.pids) }

// identifyWaitersFate is what a manager in state, whose singleton
// identified is (see identifiedSingleton), does with its waiting proxies.
type identifyWaitersFate int

const (
	// keepWaiters: the singleton may start here soon.
	keepWaiters identifyWaitersFate = iota
	// announceToWaiters: it runs; tell them.
	announceToWaiters
	// forgetWaiters: it will not run here soon (it is handed over or
	// stopping, or this member is gone); the proxies look again at their
	// tick. A Younger manager forgets them when it sees another member as
	// the oldest.
	forgetWaiters
)

func decideIdentifyWaiters(state string, identified bool) identifyWaitersFate {
	switch {
	case identified:
		return announceToWaiters
	case state == stateStart || state == stateYounger || state == stateBecomingOldest ||
		state == stateAcquiringLease || state == stateOldest:
		return keepWaiters
	default:
		return forgetWaiters
	}
}

// singletonShownIn reports whether getState shows the singleton the
// manager keeps in state: wherever it may still run here.
func singletonShownIn(state string) bool {
	switch state {
	case stateOldest, stateAcquiringLease, stateWasOldest, stateHandingOver, stateStopping:
		return true
	}
	return false
}

// singletonIdentifiedIn reports whether proxies are told of the singleton
// the manager keeps: only one that is not about to be handed over.
func singletonIdentifiedIn(state string, selfExited bool) bool {
	return state == stateOldest && !selfExited
}
