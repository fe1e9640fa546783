// Command singleton runs a cluster singleton across three in-process nodes
// with no set-up at all (in-process membership): the singleton starts on the
// oldest node, every node reaches it through its proxy, then the oldest
// leaves gracefully and the singleton moves to the next oldest, with the
// messages sent meanwhile delivered after the hand-over.
//
//	go run ./examples/singleton
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
	"github.com/protoshard/protoshard/singleton"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

type node struct {
	name    string
	system  *actor.ActorSystem
	remote  *remote.Remote
	cluster *membership.Cluster
	proxy   *actor.PID
}

// counter is the singleton: it counts the messages it got in this
// incarnation and answers with where it runs.
type counter struct {
	where string
	out   io.Writer
	count int
}

func (c *counter) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		fmt.Fprintf(c.out, "  [singleton started on %s]\n", c.where)
	case *actor.Stopped:
		fmt.Fprintf(c.out, "  [singleton on %s stopped after %d messages]\n", c.where, c.count)
	case *wrapperspb.StringValue:
		c.count++
		if ctx.Sender() != nil {
			ctx.Respond(wrapperspb.String(fmt.Sprintf("%s (message %d here) got %q", c.where, c.count, msg.Value)))
		}
	}
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// run tells the story on out (shared by the nodes' actors, so it is
// locked).
func run(w io.Writer) error {
	out := &lockedWriter{w: w}
	quiet := actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		level := slog.LevelError
		if os.Getenv("PROTOSHARD_LOG") != "" {
			return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
		}
		return slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: level}))
	})
	registry := local.NewRegistry()
	var nodes []*node
	for _, name := range []string{"node-a", "node-b", "node-c"} {
		n, err := startNode(name, registry, quiet, out)
		if err != nil {
			return err
		}
		defer n.system.Shutdown()
		nodes = append(nodes, n)
	}

	fmt.Fprintln(out, "three nodes up; asking the singleton through each node's proxy:")
	for _, n := range nodes {
		if err := ask(out, n, "hello from "+n.name); err != nil {
			return err
		}
	}

	fmt.Fprintln(out, "node-a (the oldest) leaves gracefully; node-c keeps sending meanwhile:")
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done <- nodes[0].cluster.Leave(ctx)
	}()
	for i := 1; i <= 3; i++ {
		nodes[2].system.Root.Send(nodes[2].proxy, wrapperspb.String(fmt.Sprintf("during hand-over %d", i)))
	}
	if err := <-done; err != nil {
		return fmt.Errorf("leave: %w", err)
	}
	nodes[0].remote.Shutdown(true)

	fmt.Fprintln(out, "after the hand-over:")
	for _, n := range nodes[1:] {
		if err := ask(out, n, "hello again from "+n.name); err != nil {
			return err
		}
	}
	return nil
}

func startNode(name string, registry *local.Registry, logging actor.ConfigOption, out io.Writer) (*node, error) {
	system := actor.NewActorSystem(logging)
	// The quarantine fences this node against removed members at the remote
	// layer (nothing a removed node still sends is processed).
	quarantine := membership.NewQuarantine()
	r := remote.NewRemote(system, remote.Configure("127.0.0.1", 0, quarantine.RemoteOption()))
	r.Start()
	cluster := membership.NewCluster(system, registry.Provider(), membership.Config{Quarantine: quarantine})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cluster.Join(ctx); err != nil {
		return nil, err
	}
	props := actor.PropsFromProducer(func() actor.Actor { return &counter{where: name, out: out} })
	if _, err := singleton.StartManager(system, cluster, props, "counter"); err != nil {
		return nil, err
	}
	proxy, err := singleton.StartProxy(system, cluster, "counter")
	if err != nil {
		return nil, err
	}
	return &node{name: name, system: system, remote: r, cluster: cluster, proxy: proxy}, nil
}

func ask(out io.Writer, n *node, text string) error {
	res, err := n.system.Root.RequestFuture(n.proxy, wrapperspb.String(text), 15*time.Second).Result()
	if err != nil {
		return fmt.Errorf("ask through %s's proxy: %w", n.name, err)
	}
	answer, ok := res.(*wrapperspb.StringValue)
	if !ok {
		return fmt.Errorf("%s's proxy: unexpected answer %T", n.name, res)
	}
	fmt.Fprintf(out, "  %s's proxy -> %s\n", n.name, answer.Value)
	return nil
}

// lockedWriter serialises writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
