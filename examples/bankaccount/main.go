// Command bankaccount is the example of docs/entity-state.md: bank account
// entities whose balance survives their node, kept in a
// durablestate.Store (in memory here; durablestate/consul with Consul).
// A deposit is a positive amount, a withdrawal a negative one; each
// account answers with its balance.
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
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/durablestate"
)

// account is the entity: its balance, saved in store on every change.
type account struct {
	store   durablestate.Store
	state   *durablestate.Entity
	balance int64
}

func (a *account) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		id, err := actorsharding.EntityID(ctx)
		if err != nil {
			ctx.Stop(ctx.Self())
			return
		}
		// Load the balance; this incarnation's token fences every older one.
		state, payload, err := durablestate.Recover(ctx, a.store, id)
		if err != nil {
			return // Recover stopped the entity
		}
		saved := &wrapperspb.Int64Value{}
		if err := proto.Unmarshal(payload, saved); err != nil {
			ctx.Logger().Error("account: undecodable balance", slog.String("account", id), slog.Any("error", err))
			ctx.Stop(ctx.Self())
			return
		}
		a.state, a.balance = state, saved.GetValue()
	case *wrapperspb.Int64Value: // a deposit (> 0) or a withdrawal (< 0)
		next := a.balance + msg.GetValue()
		if next >= 0 {
			payload, _ := proto.Marshal(wrapperspb.Int64(next))
			// Saved before it counts; a stale incarnation is refused and stops.
			if err := a.state.Persist(ctx, payload); err != nil {
				return
			}
			a.balance = next
		}
		ctx.Respond(wrapperspb.Int64(a.balance))
	}
}

func main() {
	if err := run(os.Stdout, os.Stderr); err != nil {
		log.Fatal(err)
	}
}

func run(out, logs io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Every node of the type shares the store: one per entity type.
	store := durablestate.NewMemoryStore()
	// A node takes deposits and a withdrawal beyond the balance, and
	// leaves; a node started after it recovers the balance.
	for _, amounts := range [][]int64{{100, -30, -500}, {5}} {
		if err := runNode(ctx, out, logs, store, amounts); err != nil {
			return err
		}
	}
	rec, err := store.Load(ctx, "acc-42")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "stored: revision %d, token %d\n", rec.Revision, rec.Token)
	return nil
}

// runNode starts a node with the Account region, sends amounts to account
// acc-42, and leaves.
func runNode(ctx context.Context, out, logs io.Writer, store durablestate.Store, amounts []int64) error {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}))
	defer system.Shutdown()
	sharding, err := actorsharding.Join(ctx, system)
	if err != nil {
		return err
	}
	defer sharding.Leave(ctx)
	props := actor.PropsFromProducer(func() actor.Actor { return &account{store: store} })
	if _, err := sharding.StartRegion("Account", props, actorsharding.NewHashCodeMessageExtractor(100)); err != nil {
		return err
	}
	acc, err := sharding.EntityRefFor("Account", "acc-42")
	if err != nil {
		return err
	}
	for _, amount := range amounts {
		balance, err := transfer(ctx, acc, amount)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%+d: balance %d\n", amount, balance)
	}
	return nil
}

// transfer sends amount to the account and returns its balance.
func transfer(ctx context.Context, acc actorsharding.EntityRef, amount int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	balance, err := actorsharding.Ask[*wrapperspb.Int64Value](ctx, acc, wrapperspb.Int64(amount))
	if err != nil {
		return 0, err
	}
	return balance.GetValue(), nil
}
