// Package staleness tells the actors of an actor system whether its node's
// membership is stale: the node was paused or cut off past its failure
// detection timeout, so the others may have removed it and started its
// entities elsewhere, while it does not know yet (membershiphook.Cluster.Stale).
// The sharding of the system sets it; what runs on the system asks. And
// SpawnNamed is the one start of a singleton, a shard and an entity, which
// it refuses while the check says stale.
package staleness

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/extensions"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/sysext"
)

// ErrStale is why SpawnNamed refused a start; it is an
// deadletter.ErrMemberRemoved, the reason of what is dropped for it.
var ErrStale = fmt.Errorf("this node's membership is stale: it was removed from the cluster, or it has not confirmed "+
	"its membership within the failure detection timeout (it was paused or cut off), so the others may run this "+
	"elsewhere already: %w", deadletter.ErrMemberRemoved)

// SpawnNamed is the start of every singleton, shard and entity actor: it
// spawns props as the child name of parent, unless stale says that this
// node's membership is stale (membershiphook.Cluster.Stale); then it spawns
// nothing and returns an error wrapping ErrStale. A start refused is the
// caller's to retry or to drop: the node hears of its removal soon after,
// or confirms its membership again. A nil stale is never stale (a node
// without membership).
//
// Every path to such a start, a timer's too, goes through the one spawn
// call of its actor, and that call is this one: a new path cannot forget
// the check.
func SpawnNamed(parent actor.SpawnerContext, stale func() bool, props *actor.Props, name string) (*actor.PID, error) {
	if stale != nil && stale() {
		return nil, fmt.Errorf("not starting %s: %w", name, ErrStale)
	}
	return parent.SpawnNamed(props, name)
}

var extensionID = extensions.NextExtensionID()

type holder struct{ stale func() bool }

func (*holder) ExtensionID() extensions.ExtensionID { return extensionID }

// Set makes stale the system's check; the first one set stays.
func Set(system *actor.ActorSystem, stale func() bool) {
	sysext.Get(system, extensionID, func() *holder { return &holder{stale: stale} })
}

// Of returns the system's check; without one, a check that is never
// stale (a system without membership cannot be removed from it).
func Of(system *actor.ActorSystem) func() bool {
	if system != nil {
		if h, ok := system.Extensions.Get(extensionID).(*holder); ok {
			return h.stale
		}
	}
	return never
}

func never() bool { return false }
