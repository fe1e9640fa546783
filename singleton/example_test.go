package singleton_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/protoshard/protoshard/lease"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
	"github.com/protoshard/protoshard/singleton"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// greeter is a singleton that answers who it greets.
type greeter struct{}

func (greeter) Receive(ctx actor.Context) {
	if msg, ok := ctx.Message().(*wrapperspb.StringValue); ok {
		ctx.Respond(wrapperspb.String("hello, " + msg.Value))
	}
}

// A one-node cluster over in-process membership: the manager starts the
// singleton on the oldest (only) member and the proxy routes to it.
func Example() {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	defer system.Shutdown()
	r := remote.NewRemote(system, remote.Configure("127.0.0.1", 0))
	r.Start()
	defer r.Shutdown(false)

	cluster := membership.NewCluster(system, local.NewRegistry().Provider(), membership.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cluster.Join(ctx); err != nil {
		fmt.Println("join:", err)
		return
	}
	props := actor.PropsFromProducer(func() actor.Actor { return greeter{} })
	if _, err := singleton.StartManager(system, cluster, props, "greeter"); err != nil {
		fmt.Println("manager:", err)
		return
	}
	proxy, _ := singleton.StartProxy(system, cluster, "greeter")

	res, err := system.Root.RequestFuture(proxy, wrapperspb.String("world"), 10*time.Second).Result()
	if err != nil {
		fmt.Println("ask:", err)
		return
	}
	fmt.Println(res.(*wrapperspb.StringValue).Value)
	// Output: hello, world
}

// ledgerWriter is a singleton that writes under a lease: it passes its
// fencing token with every write, so that the store can refuse writes from
// an earlier holder that has not stopped yet.
type ledgerWriter struct {
	token uint64
}

func (w *ledgerWriter) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		w.token, _ = singleton.FencingToken(ctx)
	case *wrapperspb.StringValue:
		// A real store would compare the token with the highest it has seen.
		ctx.Respond(wrapperspb.String(fmt.Sprintf("wrote %q with fencing token %d", msg.Value, w.token)))
	}
}

// With use-lease the singleton runs only while its member holds the lease,
// and reads the holding's fencing token with FencingToken. In-process
// leases here; across processes use lease/consul's provider.
func ExampleFencingToken() {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	defer system.Shutdown()
	r := remote.NewRemote(system, remote.Configure("127.0.0.1", 0))
	r.Start()
	defer r.Shutdown(false)

	cluster := membership.NewCluster(system, local.NewRegistry().Provider(), membership.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cluster.Join(ctx); err != nil {
		fmt.Println("join:", err)
		return
	}
	leases := lease.NewMemoryLeases() // the same one for every node of the process
	props := actor.PropsFromProducer(func() actor.Actor { return &ledgerWriter{} })
	if _, err := singleton.StartManager(system, cluster, props, "ledger", singleton.WithLease(leases)); err != nil {
		fmt.Println("manager:", err)
		return
	}
	proxy, _ := singleton.StartProxy(system, cluster, "ledger")

	res, err := system.Root.RequestFuture(proxy, wrapperspb.String("entry-1"), 10*time.Second).Result()
	if err != nil {
		fmt.Println("ask:", err)
		return
	}
	fmt.Println(res.(*wrapperspb.StringValue).Value)
	// Output: wrote "entry-1" with fencing token 1
}
