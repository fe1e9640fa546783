// Package staleness tells the actors of an actor system whether its node's
// membership is stale: the node was paused or cut off past its failure
// detection timeout, so the others may have removed it and started its
// entities elsewhere, while it does not know yet (membership.Cluster.Stale).
// The sharding of the system sets it; what runs on the system asks.
package staleness

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/extensions"
	"github.com/protoshard/protoshard/internal/sysext"
)

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
