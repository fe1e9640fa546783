package readme

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/examples/sharding/counterpb"
	"github.com/protoshard/protoshard/testkit"
)

// TestTracingSnippet runs the README's tracing blocks: a request sent
// within a span reaches tracedCounter, whose span continues the caller's
// trace.
func TestTracingSnippet(t *testing.T) {
	ctx, system := newNode(t, time.Minute)
	spans := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	// tracedCounter starts its span on the global provider, as an
	// application's entity would.
	otel.SetTracerProvider(provider)
	sharding, err := joinTraced(ctx, system, provider)
	if err != nil {
		t.Fatal(err)
	}
	defer sharding.Leave(ctx)
	props := actor.PropsFromProducer(func() actor.Actor { return &tracedCounter{} })
	if _, err := sharding.StartRegion("Counter", props, actorsharding.NewHashCodeMessageExtractor(10)); err != nil {
		t.Fatal(err)
	}
	ref, err := sharding.EntityRefFor("Counter", "c-1")
	if err != nil {
		t.Fatal(err)
	}
	callCtx, caller := provider.Tracer("test").Start(ctx, "caller")
	res, err := incrementTraced(callCtx, ref, &counterpb.Increment{EntityId: "c-1"})
	caller.End()
	if err != nil {
		t.Fatal(err)
	}
	if counted, ok := res.(*counterpb.Counted); !ok || counted.GetCount() != 1 {
		t.Fatalf("answered %v, want a count of 1", res)
	}
	// The entity ends its span after it answered.
	testkit.WaitFor(t, 10*time.Second, func() bool {
		for _, s := range spans.Ended() {
			if s.Name() == "increment" && s.Parent().SpanID() == caller.SpanContext().SpanID() {
				return true
			}
		}
		return false
	}, "an increment span under the caller's span")
}

// TestAdminSnippet serves the README's admin routes: the members, and the
// singleton the handler was told about.
func TestAdminSnippet(t *testing.T) {
	_, _, sharding := joinedNode(t, time.Minute)
	mux := adminMux(sharding)
	for path, want := range map[string]string{
		"/admin/cluster/members":    sharding.Cluster().Self().ID,
		"/admin/cluster/singletons": "scheduler",
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("GET %s: %d %s, want 200 naming %s", path, rec.Code, rec.Body, want)
		}
	}
}
