package staleness

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/deadletter"
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

func TestSpawnNamedRefusesWhileStale(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	props := actor.PropsFromFunc(func(actor.Context) {})
	var stale atomic.Bool
	for _, tc := range []struct {
		name  string
		check func() bool
		stale bool
	}{
		{"no check", nil, false},
		{"confirmed", stale.Load, false},
		{"stale", stale.Load, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stale.Store(tc.stale)
			pid, err := SpawnNamed(system.Root, tc.check, props, tc.name)
			_, spawned := system.ProcessRegistry.GetLocal(tc.name)
			if !tc.stale {
				if err != nil || pid == nil || !spawned {
					t.Fatalf("SpawnNamed = %v, %v (spawned %v); want a start", pid, err, spawned)
				}
				return
			}
			if pid != nil || spawned || !errors.Is(err, ErrStale) || !errors.Is(err, deadletter.ErrMemberRemoved) {
				t.Fatalf("SpawnNamed = %v, %v (spawned %v); want no start and ErrStale, ErrMemberRemoved", pid, err, spawned)
			}
		})
	}
}
