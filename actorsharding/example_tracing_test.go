package actorsharding_test

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Tracing a request to an entity: Request (or SendContext) takes
// the caller's span with the message, to whichever node runs the entity;
// the entity continues the trace from TraceContext.
func ExampleTraceContext() {
	spans := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	tracer := provider.Tracer("example")

	_, sharding, stop, err := exampleNode()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()
	account := actor.PropsFromFunc(func(ctx actor.Context) {
		if msg, ok := ctx.Message().(*wrapperspb.Int64Value); ok {
			_, span := tracer.Start(actorsharding.TraceContext(ctx), "deposit")
			span.End()
			ctx.Respond(msg)
		}
	})
	if _, err := sharding.StartRegion("Account", account, actorsharding.NewHashCodeMessageExtractor(10)); err != nil {
		fmt.Println(err)
		return
	}
	ref, err := sharding.EntityRefFor("Account", "alice")
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, span := tracer.Start(context.Background(), "handle HTTP deposit")
	if _, err := ref.Request(ctx, wrapperspb.Int64(100)); err != nil {
		fmt.Println(err)
	}
	span.End()

	for _, s := range spans.Ended() {
		if s.Name() == "deposit" {
			fmt.Println("deposit continues the caller's trace:", s.Parent().SpanID() == span.SpanContext().SpanID())
		}
	}
	// Output:
	// deposit continues the caller's trace: true
}
