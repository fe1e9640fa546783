package actorsharding_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/actorsharding/consulstore"
	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/membership/consul"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/testkit"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/anypb"
)

// traced is a cluster whose entities start a span from the trace context
// of each Ping (actorsharding.TraceContext), recorded with the senders'
// spans in one in-memory exporter.
type traced struct {
	t        *testing.T
	cluster  *testkit.Cluster
	exporter *tracetest.InMemoryExporter
	provider *sdktrace.TracerProvider
	store    coordinatoractor.StateStore
	opts     []actorsharding.Option
	// stopping and release hold an entity in its hand-off stop message.
	stopping chan string
	release  chan struct{}
}

const (
	tracedShards = 10
	// handOffStopSeq: the hand-off stop message; probeSeq and up: the
	// Pings that find or start entities, whose spans the tests ignore.
	handOffStopSeq = -100
	probeSeq       = 1_000_000
)

func newTraced(t *testing.T, opts ...actorsharding.Option) *traced {
	skipUnderRace(t)
	return newTracedOf(t, testkit.NewCluster(t, testkit.NewLocalBackend()), coordinatoractor.NewMemoryStore(), opts...)
}

// newTracedOf is a traced cluster of cluster, whose coordinators keep
// their state in store: nodes in this process (newTraced), or this child
// process's one.
func newTracedOf(t *testing.T, cluster *testkit.Cluster, store coordinatoractor.StateStore, opts ...actorsharding.Option) *traced {
	exp := tracetest.NewInMemoryExporter()
	tw := &traced{t: t, cluster: cluster, exporter: exp,
		provider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)), store: store,
		stopping: make(chan string, 64), release: make(chan struct{})}
	tw.opts = append([]actorsharding.Option{
		actorsharding.WithStateStore(tw.store),
		actorsharding.WithRetryInterval(200 * time.Millisecond),
		actorsharding.WithRebalanceInterval(500 * time.Millisecond),
		actorsharding.WithHandOffTimeout(15 * time.Second),
	}, opts...)
	return tw
}

func (tw *traced) startNode() (*testkit.Node, *actorsharding.Sharding) {
	tw.t.Helper()
	n := tw.cluster.StartNode()
	s, err := actorsharding.New(n.System, n.Membership, actorsharding.WithTracerProvider(tw.provider))
	if err != nil {
		tw.t.Fatal(err)
	}
	tracer := tw.provider.Tracer("entity")
	props := actor.PropsFromFunc(func(ctx actor.Context) {
		m, ok := ctx.Message().(*testpb.Ping)
		if !ok {
			return
		}
		if m.Seq == handOffStopSeq {
			tw.stopping <- ctx.Self().Id
			<-tw.release
			ctx.Stop(ctx.Self())
			return
		}
		_, span := tracer.Start(actorsharding.TraceContext(ctx), "entity",
			trace.WithAttributes(attribute.Int64("seq", m.Seq), attribute.String("node", n.Address())))
		span.End()
		if ctx.Sender() != nil {
			ctx.Respond(&testpb.Pong{EntityId: m.EntityId, Seq: m.Seq, Node: n.Address()})
		}
	})
	if _, err := s.StartRegion(typeName, props, actorsharding.NewHashCodeMessageExtractor(tracedShards), tw.opts...); err != nil {
		tw.t.Fatal(err)
	}
	return n, s
}

// send sends Ping seq through send, in a span of its own, and returns
// that span's context.
func (tw *traced) send(seq int64, send func(ctx context.Context) error) trace.SpanContext {
	tw.t.Helper()
	ctx, span := tw.provider.Tracer("sender").Start(context.Background(), fmt.Sprintf("send %d", seq))
	defer span.End()
	if err := send(ctx); err != nil {
		tw.t.Fatalf("send %d: %v", seq, err)
	}
	return span.SpanContext()
}

// entitySpan is the span the entity started for Ping seq, if it did.
func (tw *traced) entitySpan(seq int64) (tracetest.SpanStub, bool) {
	for _, s := range tw.exporter.GetSpans() {
		if s.Name != "entity" {
			continue
		}
		for _, a := range s.Attributes {
			if a.Key == "seq" && a.Value.AsInt64() == seq {
				return s, true
			}
		}
	}
	return tracetest.SpanStub{}, false
}

// wantChild waits for the entity's span of Ping seq and checks that
// parent is its parent; it returns the node the entity ran on.
func (tw *traced) wantChild(seq int64, parent trace.SpanContext) string {
	tw.t.Helper()
	var s tracetest.SpanStub
	testkit.WaitFor(tw.t, 20*time.Second, func() bool {
		var ok bool
		s, ok = tw.entitySpan(seq)
		return ok
	}, "the entity's span of Ping %d", seq)
	if s.Parent.TraceID() != parent.TraceID() || s.Parent.SpanID() != parent.SpanID() {
		tw.t.Errorf("Ping %d: the entity's span has parent %s/%s, want the sender's span %s/%s",
			seq, s.Parent.TraceID(), s.Parent.SpanID(), parent.TraceID(), parent.SpanID())
	}
	for _, a := range s.Attributes {
		if a.Key == "node" {
			return a.Value.AsString()
		}
	}
	return ""
}

// entityOn returns the ID of an entity that runs on node n, asked
// through ref's of sharding s.
func entityOn(t *testing.T, s *actorsharding.Sharding, n *testkit.Node) string {
	t.Helper()
	for i := range 200 {
		id := fmt.Sprintf("e%d", i)
		ref, err := s.EntityRefFor(typeName, id)
		if err != nil {
			t.Fatal(err)
		}
		var res any
		testkit.WaitFor(t, 20*time.Second, func() bool {
			res, err = requestWithin(ref, &testpb.Ping{EntityId: id, Seq: probeSeq + int64(i)}, 2*time.Second)
			return err == nil
		}, "entity %s answers: %v", id, err)
		if res.(*testpb.Pong).GetNode() == n.Address() {
			return id
		}
	}
	t.Fatalf("no entity of 200 runs on %s", n.Address())
	return ""
}

// TestTraceContextReachesTheEntity: the span of a sender is the parent of
// the span the entity starts from TraceContext, for an entity on the
// sender's node and on another, whichever way the message goes: an
// EntityRef's Send and Request (the first sends through the region and
// the shard, later ones directly; to the other node in an envelope, then
// by itself with the ID in a header or an EntityMessage), a message that
// names its entity, and a user's ShardingEnvelope with headers sent to
// the region.
func TestTraceContextReachesTheEntity(t *testing.T) {
	tw := newTraced(t)
	a, sa := tw.startNode()
	b, _ := tw.startNode()
	tw.cluster.WaitConverged(t, 30*time.Second)
	local, remote := entityOn(t, sa, a), entityOn(t, sa, b)
	region, _ := sa.Region(typeName)
	seq := int64(0)
	for _, tc := range []struct {
		id, node string
	}{{local, a.Address()}, {remote, b.Address()}} {
		ref, err := sa.EntityRefFor(typeName, tc.id)
		if err != nil {
			t.Fatal(err)
		}
		ways := map[string]func(ctx context.Context, seq int64) error{
			"SendContext": func(ctx context.Context, seq int64) error {
				return ref.SendContext(ctx, &testpb.Ping{Seq: seq})
			},
			"Request": func(ctx context.Context, seq int64) error {
				_, err := ref.Request(ctx, &testpb.Ping{Seq: seq})
				return err
			},
			"SendContext naming the entity": func(ctx context.Context, seq int64) error {
				return ref.SendContext(ctx, &testpb.Ping{EntityId: tc.id, Seq: seq})
			},
			"ShardingEnvelope with headers": func(ctx context.Context, seq int64) error {
				payload, err := anypb.New(&testpb.Ping{EntityId: tc.id, Seq: seq})
				if err != nil {
					return err
				}
				sc := trace.SpanContextFromContext(ctx)
				a.System.Root.Send(region, &messages.ShardingEnvelope{EntityId: tc.id, Message: payload,
					Headers: map[string]string{"traceparent": fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID())}})
				return nil
			},
		}
		for name, send := range ways {
			// Several times: the first messages take other ways than the
			// later ones.
			for range 4 {
				seq++
				parent := tw.send(seq, func(ctx context.Context) error { return send(ctx, seq) })
				if node := tw.wantChild(seq, parent); node != tc.node {
					t.Errorf("%s to %s: Ping %d reached the entity on %s, want %s", name, tc.id, seq, node, tc.node)
				}
			}
		}
	}
}

// TestOversizedHeadersAreDroppedWithTheReason: the headers of a user's
// ShardingEnvelope go on the wire with its message, so they count toward
// the size limit: an envelope for another node whose headers exceed it
// is dropped with deadletter.ErrMessageTooLarge (sent, it would close the
// stream and lose the messages after it), and the next message arrives.
func TestOversizedHeadersAreDroppedWithTheReason(t *testing.T) {
	tw := newTraced(t, actorsharding.WithMaxMessageSize(16<<10))
	a, sa := tw.startNode()
	b, _ := tw.startNode()
	tw.cluster.WaitConverged(t, 30*time.Second)
	var mu sync.Mutex
	var tooLarge []*deadletter.Event
	a.System.EventStream.Subscribe(func(e any) {
		if d, ok := e.(*deadletter.Event); ok && errors.Is(d.Err, deadletter.ErrMessageTooLarge) {
			mu.Lock()
			tooLarge = append(tooLarge, d)
			mu.Unlock()
		}
	})
	id := entityOn(t, sa, b)
	region, _ := sa.Region(typeName)
	payload, err := anypb.New(&testpb.Ping{EntityId: id, Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	a.System.Root.Send(region, &messages.ShardingEnvelope{EntityId: id, Message: payload,
		Headers: map[string]string{"big": strings.Repeat("x", 32<<10)}})
	testkit.WaitFor(t, 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(tooLarge) > 0
	}, "a dead letter with ErrMessageTooLarge for the envelope with oversized headers")
	ref, err := sa.EntityRefFor(typeName, id)
	if err != nil {
		t.Fatal(err)
	}
	parent := tw.send(2, func(ctx context.Context) error { return ref.SendContext(ctx, &testpb.Ping{Seq: 2}) })
	tw.wantChild(2, parent)
	if _, ok := tw.entitySpan(1); ok {
		t.Error("the envelope with oversized headers reached its entity")
	}
}

// TestTraceContextSurvivesHandOff: messages sent while their entity's
// shard hands off to another node wait in the old home's region (and in
// the shard) and go on to the new home: each keeps its sender's trace.
func TestTraceContextSurvivesHandOff(t *testing.T) {
	tw := newTraced(t, actorsharding.WithHandOffStopMessage(&testpb.Ping{Seq: handOffStopSeq}))
	a, sa := tw.startNode()
	tw.cluster.WaitConverged(t, 30*time.Second)
	// Entities in every shard, all on a.
	refs := map[string]actorsharding.EntityRef{}
	for i := range 3 * tracedShards {
		id := fmt.Sprintf("h%d", i)
		ref, err := sa.EntityRefFor(typeName, id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := requestWithin(ref, &testpb.Ping{Seq: probeSeq + int64(i)}, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		refs[id] = ref
	}
	// A second node: the coordinator rebalances shards to it, and their
	// entities hold the hand-off in their stop message.
	tw.startNode()
	var held string
	select {
	case held = <-tw.stopping:
	case <-time.After(30 * time.Second):
		t.Fatal("no shard handed off")
	}
	var heldID string
	for id := range refs {
		if strings.HasSuffix(held, "/"+id) {
			heldID = id
		}
	}
	if heldID == "" {
		t.Fatalf("no entity of the test is %s", held)
	}
	parents := map[int64]trace.SpanContext{}
	for seq := int64(1); seq <= 5; seq++ {
		parents[seq] = tw.send(seq, func(ctx context.Context) error { return refs[heldID].SendContext(ctx, &testpb.Ping{Seq: seq}) })
	}
	close(tw.release)
	for seq, parent := range parents {
		tw.wantChild(seq, parent)
	}
	// The coordinator's spans: the rebalance round, the parent of its
	// hand-offs, each ended once its shard was handed off.
	testkit.WaitFor(t, 20*time.Second, func() bool {
		rounds := map[trace.SpanID]bool{}
		for _, s := range tw.exporter.GetSpans() {
			if s.Name == "sharding.rebalance" {
				rounds[s.SpanContext.SpanID()] = true
			}
		}
		for _, s := range tw.exporter.GetSpans() {
			attrs := map[attribute.Key]attribute.Value{}
			for _, a := range s.Attributes {
				attrs[a.Key] = a.Value
			}
			if s.Name == "sharding.handoff" && rounds[s.Parent.SpanID()] && attrs["sharding.type"].AsString() == typeName &&
				attrs["sharding.shard"].AsString() != "" && strings.Contains(attrs["sharding.from"].AsString(), a.Address()) &&
				attrs["sharding.rebalance"].AsBool() {
				return true
			}
		}
		return false
	}, "a hand-off span of a rebalance round, with its shard and old home")
}

// TestTraceContextAcrossProcesses: a sender's span is the parent of the
// entity's span on a node in another process, the trace context having
// crossed the wire in the message's header, also for entities that
// started on the sender's node and moved to the other in a rebalance.
func TestTraceContextAcrossProcesses(t *testing.T) {
	if child := testkit.ThisProcess(); child != nil {
		tracedNode(t, child)
		return
	}
	if testing.Short() {
		t.Skip("starts a Consul agent and two node processes")
	}
	backend := testkit.NewConsulBackend(t)
	const timeout = 90 * time.Second
	start := func(name string) (*testkit.Process, string) {
		p := testkit.StartProcess(t, testkit.ProcessConfig{Name: name, Role: "node", Consul: backend})
		reply := p.Await(t, timeout)
		expectReply(t, p, reply, "ready")
		return p, strings.TrimPrefix(reply, "ready ")
	}
	send := func(p *testkit.Process, seq int, entity string) (traceID, spanID, node string) {
		sent := strings.Fields(p.Call(t, fmt.Sprintf("send %d %s", seq, entity), timeout))
		if len(sent) != 4 || sent[0] != "sent" {
			t.Fatalf("%s: send %d to %s: %q", p.Name(), seq, entity, sent)
		}
		return sent[1], sent[2], sent[3]
	}
	const entities = 10
	a, addrA := start("a")
	for i := 1; i <= entities; i++ {
		if _, _, node := send(a, i, fmt.Sprintf("e%d", i)); node != addrA {
			t.Fatalf("e%d answered from %s while a (%s) is the only node", i, node, addrA)
		}
	}
	b, addrB := start("b")
	// The rebalance moves shards of a's entities to b; keep sending to the
	// same entities until enough of them answered from b.
	moved := map[string]bool{}
	deadline := time.Now().Add(timeout)
	for seq := 100; len(moved) < 3; seq++ {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of a's entities moved to b in %v", len(moved), timeout)
		}
		entity := fmt.Sprintf("e%d", seq%entities+1)
		traceID, spanID, node := send(a, seq, entity)
		if node != addrB {
			continue
		}
		moved[entity] = true
		got := b.Call(t, fmt.Sprintf("span %d", seq), timeout)
		if want := fmt.Sprintf("span %s %s", traceID, spanID); got != want {
			t.Errorf("Ping %d to %s, moved to b: b's entity span has parent %q, want a's sender span %q", seq, entity, got, want)
		}
	}
	t.Logf("%d of a's entities moved to b and kept their senders' traces", len(moved))
	a.Exit(t)
	b.Exit(t)
}

// tracedNode is a node process of TestTraceContextAcrossProcesses, with
// Consul membership. Commands, on its stdin:
//
//	send <n> <entity>  ask entity Ping n in a span; reply "sent <trace
//	          ID> <span ID> <the entity's node>"
//	span <n>  reply "span <trace ID> <span ID>" of the parent of the span
//	          the entity started for Ping n here, or "none"
func tracedNode(t *testing.T, child *testkit.ChildProcess) {
	b := child.ConsulBackend(t)
	tw := newTracedOf(t, child.Cluster(t, b), consulstore.NewStateStore(b.Client(), consul.DefaultServiceName, typeName))
	n, s := tw.startNode()
	child.Reply("ready %s", n.Address())
	for cmd := range child.Commands() {
		args := strings.Fields(cmd)
		if len(args) < 2 {
			t.Fatalf("%s: bad command %q", child.Name, cmd)
		}
		seq, err := strconv.ParseInt(args[1], 10, 64)
		if err != nil {
			t.Fatalf("%s: bad command %q", child.Name, cmd)
		}
		switch verb := args[0]; {
		case verb == "send" && len(args) == 3:
			ref, err := s.EntityRefFor(typeName, args[2])
			if err != nil {
				t.Fatal(err)
			}
			var res any
			parent := tw.send(seq, func(ctx context.Context) error {
				ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				res, err = ref.Request(ctx, &testpb.Ping{Seq: seq})
				return err
			})
			child.Reply("sent %s %s %s", parent.TraceID(), parent.SpanID(), res.(*testpb.Pong).GetNode())
		case verb == "span":
			if span, ok := tw.entitySpan(seq); ok {
				child.Reply("span %s %s", span.Parent.TraceID(), span.Parent.SpanID())
			} else {
				child.Reply("none")
			}
		default:
			t.Fatalf("%s: unknown command %q", child.Name, cmd)
		}
	}
}

// The first New of a system chooses its tracing; a later New with tracing
// options is refused rather than silently keeping the first choice.
func TestSecondNewWithTracingOptionsIsRefused(t *testing.T) {
	n := testkit.NewCluster(t, testkit.NewLocalBackend()).StartNode()
	first, err := actorsharding.New(n.System, n.Membership, actorsharding.WithPropagator(propagation.TraceContext{}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := actorsharding.New(n.System, n.Membership, actorsharding.WithPropagator(propagation.Baggage{})); err == nil {
		t.Fatal("a second New with tracing options succeeded; want an error")
	}
	again, err := actorsharding.New(n.System, n.Membership)
	if err != nil || again != first {
		t.Fatalf("a second New without options = %p, %v; want the first Sharding %p", again, err, first)
	}
}
