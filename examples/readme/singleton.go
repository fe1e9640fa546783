package readme

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/singleton"
)

// greeter is the singleton: it answers a name with a greeting.
type greeter struct{}

func (g *greeter) Receive(ctx actor.Context) {
	if name, ok := ctx.Message().(*wrapperspb.StringValue); ok && ctx.Sender() != nil {
		ctx.Respond(wrapperspb.String("hello, " + name.GetValue()))
	}
}

// greetThroughSingleton starts the greeter singleton and asks it once.
func greetThroughSingleton(ctx context.Context, system *actor.ActorSystem) (string, error) {
	// Start remoting and join: in-process membership here;
	// actorsharding.WithMembership(provider) joins through Consul instead.
	node, err := actorsharding.Join(ctx, system)
	if err != nil {
		return "", err
	}
	// Leaving gracefully hands the singleton over before the member is removed.
	defer node.Leave(ctx)

	// On every node: the manager runs the singleton on the oldest member only.
	props := actor.PropsFromProducer(func() actor.Actor { return &greeter{} })
	if _, err := singleton.StartManager(system, node.Cluster(), props, "greeter"); err != nil {
		return "", err
	}

	// On any node: the proxy routes to wherever the singleton runs right now.
	proxy, err := singleton.StartProxy(system, node.Cluster(), "greeter")
	if err != nil {
		return "", err
	}
	res, err := system.Root.RequestFuture(proxy, wrapperspb.String("Ada"), 5*time.Second).Result()
	if err != nil {
		return "", err
	}
	greeting, ok := res.(*wrapperspb.StringValue)
	if !ok {
		return "", fmt.Errorf("the singleton answered %T", res)
	}
	return greeting.GetValue(), nil
}
