// Package sysext keeps protoshard's per-actor-system state as proto.actor
// extensions, created on first use.
package sysext

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/extensions"
)

// mu serialises the check-and-register: proto.actor's Extensions is a
// plain slice, and first uses may come from several goroutines at once.
var mu sync.Mutex

// Get returns system's extension id, which create makes the first time.
func Get[T extensions.Extension](system *actor.ActorSystem, id extensions.ExtensionID, create func() T) T {
	mu.Lock()
	defer mu.Unlock()
	if ext, ok := system.Extensions.Get(id).(T); ok {
		return ext
	}
	ext := create()
	system.Extensions.Register(ext)
	return ext
}
