//go:build !race

// Two proto.actor remotes in one process race on grpc's global logger, so
// this example is left out of the -race build (it runs in the other pass).

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

// Two nodes: one hosts the entities (StartRegion), the other only sends
// (StartProxy). The proxy's messages reach the entities on the first node,
// and their answers come back.
func ExampleSharding_StartProxy() {
	registry := local.NewRegistry() // in-process membership shared by both nodes
	startNode := func() (*actor.ActorSystem, *actorsharding.Sharding, func(), error) {
		system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return slog.New(slog.NewTextHandler(io.Discard, nil))
		}))
		// The quarantine fences the node against removed members; New
		// refuses a node without it.
		quarantine := membership.NewQuarantine()
		r := remote.NewRemote(system, remote.Configure("127.0.0.1", 0, quarantine.RemoteOption()))
		r.Start()
		cluster := membership.NewCluster(system, registry.Provider(), membership.Config{Quarantine: quarantine})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stop := func() { r.Shutdown(false); system.Shutdown() }
		if err := cluster.Join(ctx); err != nil {
			stop()
			return nil, nil, nil, err
		}
		sharding, err := actorsharding.New(system, cluster)
		return system, sharding, stop, err
	}
	_, host, stopHost, err := startNode()
	if err != nil {
		fmt.Println("host node:", err)
		return
	}
	defer stopHost()
	sender, proxyNode, stopSender, err := startNode()
	if err != nil {
		fmt.Println("sender node:", err)
		return
	}
	defer stopSender()

	extractor := actorsharding.NewHashCodeMessageExtractor(10)
	if _, err := host.StartRegion("Counter", actor.PropsFromProducer(func() actor.Actor { return &counter{} }), extractor); err != nil {
		fmt.Println("region:", err)
		return
	}
	proxy, err := proxyNode.StartProxy("Counter", extractor)
	if err != nil {
		fmt.Println("proxy:", err)
		return
	}
	env, _ := actorsharding.NewEnvelope("x", wrapperspb.String("via the proxy"))
	res, err := sender.Root.RequestFuture(proxy, env, 20*time.Second).Result()
	if err != nil {
		fmt.Println("ask:", err)
		return
	}
	fmt.Println(res.(*wrapperspb.StringValue).Value)
	// Output: via the proxy #1
}
