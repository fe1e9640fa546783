package actorsharding

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Trace context goes with an entity's message in proto.actor's message
// header (actor.MessageEnvelope.Header), which the remote carries on the
// wire, and in ShardingEnvelope.headers for a user's envelope. A message
// sent without a span in its context has no header and costs what it did
// before: only a traced message gets an envelope and a map.

// tracing is a Sharding's trace context propagation and tracer.
type tracing struct {
	provider   trace.TracerProvider
	propagator propagation.TextMapPropagator
}

// TracingOption configures the tracing of a Sharding (see New and
// WithTracing).
type TracingOption func(*tracing)

// WithTracerProvider sets the tracer provider of the spans protoshard
// starts (a shard's hand-off, a rebalance round). Default: OpenTelemetry's
// global provider (otel.GetTracerProvider), a no-op until the application
// sets one.
func WithTracerProvider(tp trace.TracerProvider) TracingOption {
	return func(t *tracing) { t.provider = tp }
}

// WithPropagator sets how trace context goes in a message's header.
// Default: W3C trace context (propagation.TraceContext: traceparent and
// tracestate).
func WithPropagator(p propagation.TextMapPropagator) TracingOption {
	return func(t *tracing) { t.propagator = p }
}

func newTracing(opts []TracingOption) *tracing {
	t := &tracing{}
	for _, o := range opts {
		o(t)
	}
	if t.provider == nil {
		t.provider = otel.GetTracerProvider()
	}
	if t.propagator == nil {
		t.propagator = propagation.TraceContext{}
	}
	return t
}

// tracerName is the instrumentation scope of protoshard's spans.
const tracerName = "github.com/protoshard/protoshard/actorsharding"

func (t *tracing) tracer() trace.Tracer { return t.provider.Tracer(tracerName) }

// header is base with ctx's trace context added, in a new map; base
// itself (nil: no header) when ctx has no span context, at no cost.
func (t *tracing) header(ctx context.Context, base map[string]string) map[string]string {
	if ctx == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return base
	}
	h := make(map[string]string, len(base)+2)
	for k, v := range base {
		h[k] = v
	}
	t.propagator.Inject(ctx, propagation.MapCarrier(h))
	if len(h) == len(base) {
		return base
	}
	return h
}

// TraceContext is the trace context that came with the message ctx is
// processing (its sender's span, when it was sent with
// EntityRef.SendContext or Request, or in a ShardingEnvelope's
// headers), as a context for the entity's own spans:
//
//	_, span := tracer.Start(actorsharding.TraceContext(ctx), "deposit")
//	defer span.End()
//
// It is context.Background() for a message without one. It reads the
// header with the propagator of the Sharding of ctx's actor system.
func TraceContext(ctx actor.Context) context.Context {
	h := ctx.MessageHeader()
	if h == nil || h.Length() == 0 {
		return context.Background()
	}
	return propagatorOf(ctx.ActorSystem()).Extract(context.Background(), headerCarrier{h})
}

// propagatorOf is the propagator of system's Sharding, or the default.
func propagatorOf(system *actor.ActorSystem) propagation.TextMapPropagator {
	if s, ok := system.Extensions.Get(extensionID).(extension); ok && s.tracing != nil {
		return s.tracing.propagator
	}
	return propagation.TraceContext{}
}

// headerCarrier reads a message header as a propagation carrier.
type headerCarrier struct{ h actor.ReadonlyMessageHeader }

func (c headerCarrier) Get(key string) string { return c.h.Get(key) }
func (c headerCarrier) Set(string, string)    {}
func (c headerCarrier) Keys() []string        { return c.h.Keys() }
