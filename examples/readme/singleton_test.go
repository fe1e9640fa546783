package readme

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

func TestSingletonQuickstart(t *testing.T) {
	skipUnderRace(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	system := actor.NewActorSystem()
	defer system.Shutdown()
	got, err := greetThroughSingleton(ctx, system)
	if err != nil {
		t.Fatal(err)
	}
	if got != "hello, Ada" {
		t.Fatalf("the singleton answered %q", got)
	}
}
