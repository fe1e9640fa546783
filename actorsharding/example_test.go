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

// counter is an entity: one per ID, started on demand where its shard lives.
type counter struct{ n int }

func (c *counter) Receive(ctx actor.Context) {
	if msg, ok := ctx.Message().(*wrapperspb.StringValue); ok {
		c.n++
		ctx.Respond(wrapperspb.String(fmt.Sprintf("%s #%d", msg.Value, c.n)))
	}
}

// A one-node cluster: start a region, address entities by ID, and get an
// entity's answer. A second node would run the same
// code; the region routes to whichever node hosts the entity's shard.
func Example() {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	defer system.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A node of its own in-process cluster; Join without options shares
	// the process's.
	sharding, err := actorsharding.Join(ctx, system, actorsharding.WithMembership(local.NewRegistry().Provider()))
	if err != nil {
		fmt.Println("join:", err)
		return
	}
	defer sharding.Leave(ctx)
	if _, err := sharding.StartRegion("Counter",
		actor.PropsFromProducer(func() actor.Actor { return &counter{} }),
		actorsharding.NewHashCodeMessageExtractor(100)); err != nil {
		fmt.Println("start region:", err)
		return
	}
	for _, id := range []string{"a", "b", "a"} {
		ref, err := sharding.EntityRefFor("Counter", id)
		if err != nil {
			fmt.Println("ref:", err)
			return
		}
		res, err := ref.Request(ctx, wrapperspb.String("hello "+id))
		if err != nil {
			fmt.Println("ask:", err)
			return
		}
		fmt.Println(res.(*wrapperspb.StringValue).Value)
	}
	// Output:
	// hello a #1
	// hello b #1
	// hello a #2
}
