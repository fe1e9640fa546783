// Command daemon runs a sharded daemon process with no set-up at all
// (in-process membership): three workers, one per partition, kept running,
// then five.
//
//	go run ./examples/daemon
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/shardeddaemonprocess"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	defer system.Shutdown()
	if err := run(ctx, system, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// run starts three partition workers, then changes them to five.
func run(ctx context.Context, system *actor.ActorSystem, out io.Writer) error {
	node, err := actorsharding.Join(ctx, system)
	if err != nil {
		return err
	}
	defer node.Leave(ctx)

	started := make(chan int, 16)
	// Worker i consumes partition i; it runs on one member of the cluster
	// at a time and starts again elsewhere if that member goes away.
	partition := func(i int) *actor.Props {
		return actor.PropsFromFunc(func(c actor.Context) {
			if _, ok := c.Message().(*actor.Started); ok {
				started <- i
			}
		})
	}
	// The same call on every member: name, number of workers, factory.
	daemon, err := shardeddaemonprocess.Init(node, "partitions", 3, partition)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "running:", await(ctx, started, 3))

	// All three stop before the five start: one revision runs at a time.
	if err := daemon.ChangeNumberOfProcesses(ctx, 5); err != nil {
		return err
	}
	fmt.Fprintln(out, "running:", await(ctx, started, 5))
	return nil
}

// await returns the partitions of the next n workers that start, sorted.
func await(ctx context.Context, started <-chan int, n int) []int {
	var got []int
	for len(got) < n {
		select {
		case i := <-started:
			got = append(got, i)
		case <-ctx.Done():
			return got
		}
	}
	slices.Sort(got)
	return got
}
