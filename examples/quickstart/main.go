// Command quickstart is the README's sharding quickstart: one node, one
// entity type, an entity addressed by ID.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// account is the entity: a balance that deposits add to.
type account struct{ balance int64 }

func (a *account) Receive(ctx actor.Context) {
	if deposit, ok := ctx.Message().(*wrapperspb.Int64Value); ok {
		a.balance += deposit.GetValue()
		if ctx.Sender() != nil {
			ctx.Respond(wrapperspb.Int64(a.balance))
		}
	}
}

func main() {
	if err := run(os.Stdout, os.Stderr); err != nil {
		log.Fatal(err)
	}
}

func run(out, logs io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Warnings and errors only: proto.actor and protoshard log the node's
	// start, stop and membership changes at info level.
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}))
	defer system.Shutdown()

	// Start remoting and join the cluster: in-process membership here;
	// actorsharding.WithMembership(provider) joins through Consul instead.
	sharding, err := actorsharding.Join(ctx, system)
	if err != nil {
		return err
	}
	defer sharding.Leave(ctx)

	// On every node that hosts entities: one region per entity type.
	props := actor.PropsFromProducer(func() actor.Actor { return &account{} })
	if _, err := sharding.StartRegion("Account", props, actorsharding.NewHashCodeMessageExtractor(100)); err != nil {
		return err
	}

	// Address an entity by ID, wherever it lives; it starts on demand.
	acc, err := sharding.EntityRefFor("Account", "acc-42")
	if err != nil {
		return err
	}
	if err := acc.Send(wrapperspb.Int64(5)); err != nil {
		return err
	}
	// Ask waits for the answer until ctx's deadline.
	balance, err := actorsharding.Ask[*wrapperspb.Int64Value](ctx, acc, wrapperspb.Int64(10))
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "balance of acc-42:", balance.GetValue())
	return nil
}
