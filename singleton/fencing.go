package singleton

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// FencingToken returns the fencing token of the lease under which the
// calling singleton actor runs: call it with the singleton's own context,
// from Started on. The token is larger than that of every earlier holding
// of the singleton's lease, so a store that keeps the highest token it has
// seen and refuses writes with a lower one cannot be written by a singleton
// that has lost the lease but not stopped yet. ok is false without a lease
// (no WithLease) or when ctx is not a singleton's.
//
// The token stays the same for the whole life of the singleton actor; a
// singleton started again after its lease was lost gets a new, larger one.
// A singleton started again after it stopped on its own
// (WithSingletonRestartBackoff) while its member still holds the
// lease runs under the same holding, so it gets the same token as the one
// before it, which has terminated by then.
func FencingToken(ctx actor.Context) (token uint64, ok bool) {
	parent := ctx.Parent()
	if parent == nil {
		return 0, false
	}
	v, found := fencingTokens.Load(fencingKey{system: ctx.ActorSystem(), manager: parent.Id})
	if !found {
		return 0, false
	}
	e := v.(fencingEntry)
	if e.singletonID != ctx.Self().Id {
		return 0, false
	}
	return e.token, true
}

// fencingTokens maps a manager to the token of the singleton it runs. The
// manager sets it before it spawns the singleton (whose Started may run
// before the spawn returns) and deletes it once the singleton terminated.
var fencingTokens sync.Map // fencingKey → fencingEntry

// fencingKey names a manager: PIDs carry no incarnation and several actor
// systems may share a process, so the system is part of the key.
type fencingKey struct {
	system  *actor.ActorSystem
	manager string // the manager's PID Id
}

type fencingEntry struct {
	singletonID string // the PID Id the singleton will have
	token       uint64
}
