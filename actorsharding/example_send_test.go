package actorsharding_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/membership/local"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// exampleNode starts a one-node cluster with sharding, as Example does,
// and returns a function that stops it.
func exampleNode() (*actor.ActorSystem, *actorsharding.Sharding, func(), error) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sharding, err := actorsharding.Join(ctx, system, actorsharding.WithMembership(local.NewRegistry().Provider()))
	if err != nil {
		system.Shutdown()
		return nil, nil, nil, err
	}
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = sharding.Leave(ctx)
		system.Shutdown()
	}
	return system, sharding, stop, nil
}

// Sending to an entity: wrap the message with its entity ID and Send it to
// the region, from any node. The entity starts on its first message.
// Messages from one sender to one entity arrive in the order sent, so a
// request sent after them is answered after they were handled. An entity
// learns its ID with EntityID.
func ExampleNewEnvelope() {
	system, sharding, stop, err := exampleNode()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()
	door := actor.PropsFromFunc(func(ctx actor.Context) {
		switch msg := ctx.Message().(type) {
		case *wrapperspb.StringValue:
			id, _ := actorsharding.EntityID(ctx)
			fmt.Println(id, "got", msg.Value)
		case *wrapperspb.BoolValue:
			ctx.Respond(msg) // "are you done?"
		}
	})
	region, err := sharding.StartRegion("Door", door, actorsharding.NewHashCodeMessageExtractor(10))
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := 1; i <= 3; i++ {
		env, err := actorsharding.NewEnvelope("door/7", wrapperspb.String(fmt.Sprintf("knock %d", i)))
		if err != nil {
			fmt.Println(err)
			return
		}
		system.Root.Send(region, env)
	}
	env, _ := actorsharding.NewEnvelope("door/7", wrapperspb.Bool(true))
	if _, err := system.Root.RequestFuture(region, env, 10*time.Second).Result(); err != nil {
		fmt.Println(err)
	}
	// Output:
	// door/7 got knock 1
	// door/7 got knock 2
	// door/7 got knock 3
}

// Request/response: the entity answers with ctx.Respond, and the answer
// comes back to the future even when the entity lives on another node (the
// region forwards with the original sender). Region finds a started region
// by its entity type name.
func ExampleSharding_Region() {
	system, sharding, stop, err := exampleNode()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()
	greeter := actor.PropsFromFunc(func(ctx actor.Context) {
		if msg, ok := ctx.Message().(*wrapperspb.StringValue); ok {
			ctx.Respond(wrapperspb.String("hello, " + msg.Value))
		}
	})
	if _, err := sharding.StartRegion("Greeter", greeter, actorsharding.NewHashCodeMessageExtractor(10)); err != nil {
		fmt.Println(err)
		return
	}

	region, ok := sharding.Region("Greeter")
	if !ok {
		fmt.Println("no Greeter region")
		return
	}
	env, _ := actorsharding.NewEnvelope("ada", wrapperspb.String("Ada"))
	res, err := system.Root.RequestFuture(region, env, 10*time.Second).Result()
	if err != nil {
		fmt.Println("no answer:", err)
		return
	}
	fmt.Println(res.(*wrapperspb.StringValue).Value)
	// Output:
	// hello, Ada
}
