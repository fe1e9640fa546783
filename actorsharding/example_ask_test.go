package actorsharding_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Asking an entity for a typed answer: Ask waits until ctx's deadline and
// returns the answer as the type given; an answer of another type is an
// error that names both types, and ctx's end stops the wait.
func ExampleAsk() {
	_, sharding, stop, err := exampleNode()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()
	account := actor.PropsFromFunc(func(ctx actor.Context) {
		switch msg := ctx.Message().(type) {
		case *wrapperspb.Int64Value: // a deposit: the new balance
			ctx.Respond(wrapperspb.Int64(msg.Value))
		case *wrapperspb.StringValue: // the owner's name
			ctx.Respond(wrapperspb.String("Ada"))
		}
	})
	if _, err := sharding.StartRegion("Account", account, actorsharding.NewHashCodeMessageExtractor(10)); err != nil {
		fmt.Println(err)
		return
	}
	ref, err := sharding.EntityRefFor("Account", "ada")
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	balance, err := actorsharding.Ask[*wrapperspb.Int64Value](ctx, ref, wrapperspb.Int64(100))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("balance:", balance.Value)

	_, err = actorsharding.Ask[*wrapperspb.Int64Value](ctx, ref, wrapperspb.String("owner?"))
	var wrong *actorsharding.AnswerTypeError
	if errors.Is(err, actorsharding.ErrAnswerType) && errors.As(err, &wrong) {
		fmt.Println("answered a", wrong.Got, "not a", wrong.Want)
	}

	cancelled, cancelNow := context.WithCancel(ctx)
	cancelNow()
	_, err = actorsharding.Ask[*wrapperspb.Int64Value](cancelled, ref, wrapperspb.Int64(1))
	fmt.Println("cancelled:", errors.Is(err, context.Canceled))
	// Output:
	// balance: 100
	// answered a *wrapperspb.StringValue not a *wrapperspb.Int64Value
	// cancelled: true
}
