package staleness

import (
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

func TestStaleness(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	if Of(system)() || Of(nil)() {
		t.Fatal("stale without a check set")
	}
	var stale atomic.Bool
	Set(system, stale.Load)
	Set(system, func() bool { return true }) // the first stays
	check := Of(system)
	if check() {
		t.Fatal("stale before the check says so")
	}
	stale.Store(true)
	if !check() {
		t.Fatal("not stale once the check says so")
	}
}
