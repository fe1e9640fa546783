package actorsharding_test

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
)

// EntityID fails clearly for an actor that is not a sharded entity; its
// success is shown by ExampleNewEnvelope (an ID with a '/').
func TestEntityIDOfAPlainActor(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	errs := make(chan error, 1)
	pid, err := system.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(string); ok {
			_, err := actorsharding.EntityID(ctx)
			errs <- err
		}
	}), "plain")
	if err != nil {
		t.Fatal(err)
	}
	system.Root.Send(pid, "who am I?")
	select {
	case err := <-errs:
		if err == nil {
			t.Error("EntityID of a plain actor succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the actor never ran")
	}
}
