package actorsharding

import (
	"context"
	"maps"
	"reflect"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

func tracedContext() context.Context {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{1, 2, 3},
		SpanID:     trace.SpanID{4, 5, 6},
		TraceFlags: trace.FlagsSampled,
	})
	return trace.ContextWithSpanContext(context.Background(), sc)
}

// TestTracingHeader: a context without a span leaves the header as it is
// (the same map, no allocation); one with a span gets a new map with the
// base's entries and the trace context, the base untouched.
func TestTracingHeader(t *testing.T) {
	w3c := newTracing(nil)
	none := newTracing([]TracingOption{WithPropagator(propagation.NewCompositeTextMapPropagator())})
	idOnly := entityIDHeaderOf("e1")
	const traceparent = "00-01020300000000000000000000000000-0405060000000000-01"
	cases := []struct {
		name  string
		tr    *tracing
		ctx   context.Context
		base  map[string]string
		want  map[string]string
		same  bool // the base itself comes back
		alloc bool
	}{
		{name: "no span, no base", tr: w3c, ctx: context.Background(), want: nil, same: true},
		{name: "no span, the entity ID", tr: w3c, ctx: context.Background(), base: idOnly, want: idOnly, same: true},
		{name: "nil context", tr: w3c, ctx: nil, want: nil, same: true},
		{name: "a span", tr: w3c, ctx: tracedContext(), want: map[string]string{"traceparent": traceparent}, alloc: true},
		{name: "a span and the entity ID", tr: w3c, ctx: tracedContext(), base: idOnly,
			want: map[string]string{"traceparent": traceparent, entityIDHeader: "e1"}, alloc: true},
		{name: "a span, a propagator that writes nothing", tr: none, ctx: tracedContext(), base: idOnly, want: idOnly, same: true, alloc: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := maps.Clone(tc.base)
			got := tc.tr.header(tc.ctx, tc.base)
			if !maps.Equal(got, tc.want) {
				t.Fatalf("header = %v, want %v", got, tc.want)
			}
			if !maps.Equal(tc.base, before) {
				t.Fatalf("the base changed to %v", tc.base)
			}
			if same := reflect.ValueOf(got).Pointer() == reflect.ValueOf(tc.base).Pointer(); same != tc.same {
				t.Fatalf("the base itself came back: %v, want %v", same, tc.same)
			}
			if n := testing.AllocsPerRun(50, func() { tc.tr.header(tc.ctx, tc.base) }); (n > 0) != tc.alloc {
				t.Fatalf("%v allocations, want some: %v", n, tc.alloc)
			}
		})
	}
}

// TestHeaderOf: the header that goes on with a message is nil for none,
// and for the entity ID alone (as an untraced message from another node
// arrives); anything else goes on.
func TestHeaderOf(t *testing.T) {
	traced := map[string]string{"traceparent": "x", entityIDHeader: "e"}
	cases := []struct {
		env  *actor.MessageEnvelope
		want map[string]string
	}{
		{nil, nil},
		{&actor.MessageEnvelope{}, nil},
		{&actor.MessageEnvelope{Header: entityIDHeaderOf("e")}, nil},
		{&actor.MessageEnvelope{Header: map[string]string{"traceparent": "x"}}, map[string]string{"traceparent": "x"}},
		{&actor.MessageEnvelope{Header: traced}, traced},
	}
	for i, tc := range cases {
		if got := headerOf(tc.env); !maps.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("case %d: headerOf = %v, want %v", i, got, tc.want)
		}
	}
}

// directRef is an EntityRef whose entity runs on this node and takes
// messages directly, into target.
func directRef() (EntityRef, *nopProcess) {
	system := actor.NewActorSystem()
	cl := membership.NewCluster(system, local.NewRegistry().Provider(), membership.Config{})
	table := newRouteTable(system, "T")
	ext := NewHashCodeMessageExtractor(100)
	p := &regionProcess{table: table, extractor: ext, cluster: cl, stale: membershiphook.Of(cl).Stale, hosting: true, region: &nopProcess{}}
	target := &nopProcess{}
	sr := table.shard(ext.ShardID("e"))
	sr.open.Store(true)
	epid, _ := system.ProcessRegistry.Add(target, "entity/e")
	route := &entityRoute{shard: sr, pid: epid}
	table.entities.swap("e", route)
	ref := EntityRef{sharding: &Sharding{system: system, tracing: newTracing(nil)}, typeName: "T", id: "e",
		region: actor.NewPID("x", "region"), extractor: ext, router: p, cache: &refCache{}}
	ref.cache.route.Store(route)
	return ref, target
}

// TestUntracedSendAllocatesNothingMore: SendContext without a span costs
// what Send does on the direct way, nothing; with one, the header.
func TestUntracedSendAllocatesNothingMore(t *testing.T) {
	ref, target := directRef()
	msg := &testpb.Ping{EntityId: "e"}
	plain := testing.AllocsPerRun(100, func() { _ = ref.Send(msg) })
	untraced := testing.AllocsPerRun(100, func() { _ = ref.SendContext(context.Background(), msg) })
	traced := testing.AllocsPerRun(100, func() { _ = ref.SendContext(tracedContext(), msg) })
	if plain != 0 || untraced != 0 {
		t.Errorf("Send allocates %v times, SendContext without a span %v: want 0", plain, untraced)
	}
	if traced == 0 {
		t.Error("SendContext with a span allocates nothing: no header went with it")
	}
	if target.n == 0 {
		t.Error("nothing reached the entity directly")
	}
}

// BenchmarkEntityRefSend: an EntityRef's direct send, without and with a
// span in its context.
func BenchmarkEntityRefSend(b *testing.B) {
	for _, bc := range []struct {
		name string
		ctx  context.Context
	}{{"untraced", context.Background()}, {"traced", tracedContext()}} {
		b.Run(bc.name, func(b *testing.B) {
			ref, _ := directRef()
			msg := &testpb.Ping{EntityId: "e"}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				_ = ref.SendContext(bc.ctx, msg)
			}
		})
	}
}
