package actorsharding_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/membership"
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

// A one-node cluster: start a region, send to entities by ID, and get an
// entity's answer with RequestFuture. A second node would run the same
// code; the region routes to whichever node hosts the entity's shard.
func Example() {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	defer system.Shutdown()
	r := remote.NewRemote(system, remote.Configure("127.0.0.1", 0))
	r.Start() // before membership: members are known by their address
	defer r.Shutdown(false)

	cluster := membership.NewCluster(system, local.NewRegistry().Provider(), membership.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cluster.Join(ctx); err != nil {
		fmt.Println("join:", err)
		return
	}
	sharding, _ := actorsharding.New(system, cluster)
	region, err := sharding.StartRegion("Counter",
		actor.PropsFromProducer(func() actor.Actor { return &counter{} }),
		actorsharding.NewHashCodeMessageExtractor(100))
	if err != nil {
		fmt.Println("start region:", err)
		return
	}
	for _, id := range []string{"a", "b", "a"} {
		env, _ := actorsharding.NewEnvelope(id, wrapperspb.String("hello "+id))
		res, err := system.Root.RequestFuture(region, env, 10*time.Second).Result()
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
