package readme

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/examples/sharding/counterpb"
)

// joinTraced joins the cluster with protoshard's spans (hand-offs,
// rebalance rounds) on provider.
func joinTraced(ctx context.Context, system *actor.ActorSystem, provider trace.TracerProvider) (*actorsharding.Sharding, error) {
	return actorsharding.Join(ctx, system,
		actorsharding.WithTracing(actorsharding.WithTracerProvider(provider)))
}

// incrementTraced sends msg within the caller's span.
func incrementTraced(ctx context.Context, ref actorsharding.EntityRef, msg *counterpb.Increment) (any, error) {
	return ref.Request(ctx, msg)
}

// tracedCounter continues its senders' traces.
type tracedCounter struct{ count int64 }

func (c *tracedCounter) Receive(ctx actor.Context) {
	if msg, ok := ctx.Message().(*counterpb.Increment); ok {
		_, span := otel.Tracer("counter").Start(actorsharding.TraceContext(ctx), "increment")
		defer span.End()
		c.count++
		ctx.Respond(&counterpb.Counted{EntityId: msg.GetEntityId(), Count: c.count})
	}
}
