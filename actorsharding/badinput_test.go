package actorsharding_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/shard"
	"github.com/protoshard/protoshard/internal/shardingadmin"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/internal/testsupport"
	"github.com/protoshard/protoshard/internal/wire"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/testkit"
	"google.golang.org/protobuf/types/known/anypb"
)

// goPing names an entity but is not a protobuf message: it can reach an
// entity on the same node only.
type goPing struct{ id string }

func (g goPing) GetEntityId() string { return g.id }

// Bad input: every unroutable or undeliverable message is dropped with a
// dead-letter event naming the reason; no region crashes.
func TestBadInput(t *testing.T) {
	w := newLocalWorld(t)
	a, b := w.startNode(false), w.startNode(false)
	proxy := w.startNode(true)
	w.cluster.WaitConverged(t, 30*time.Second)
	w.waitRegistered(2)
	// An entity that lives on b, to send non-proto messages across.
	remoteID := w.entityOn(a, b)
	unknown := &anypb.Any{TypeUrl: "type.googleapis.com/not.linked.Anywhere", Value: []byte{1, 2, 3}}
	cases := []struct {
		name   string
		via    *testkit.Node
		msg    any
		reason string
	}{
		{"no entity id", a, &testpb.NoEntity{Text: "x"}, "has no GetEntityId"},
		{"empty entity id", a, &testpb.Ping{EntityId: ""}, "empty entity_id"},
		{"envelope with empty id", a, &messages.ShardingEnvelope{Message: mustAny(t, &testpb.Ping{})}, "empty entity ID"},
		{"entity id past the limit", a, &testpb.Ping{EntityId: strings.Repeat("x", wire.MaxEntityIDLength+1)}, "longer than the limit"},
		{"envelope with an entity id past the limit", a, &messages.ShardingEnvelope{EntityId: strings.Repeat("x", wire.MaxEntityIDLength+1), Message: mustAny(t, &testpb.Ping{})}, "longer than the limit"},
		{"envelope without payload", a, &messages.ShardingEnvelope{EntityId: "e-1"}, "has no message"},
		{"envelope with unknown payload type", a, &messages.ShardingEnvelope{EntityId: "e-1", Message: unknown}, "cannot decode payload"},
		{"envelope for an earlier incarnation of the node", a, &messages.ShardingEnvelope{EntityId: "e-1", ToMemberId: "an-earlier-incarnation", Message: mustAny(t, &testpb.Ping{EntityId: "e-1"})}, "earlier incarnation"},
		{"envelope with a wrong shard id", a, &messages.ShardingEnvelope{EntityId: "e-1", ShardId: "no-such-shard", Message: mustAny(t, &testpb.Ping{EntityId: "e-1"})}, "extractors of the nodes differ"},
		{"non-proto to an entity on another node", a, goPing{id: remoteID}, "not a protobuf message"},
		{"non-proto through a proxy", proxy, goPing{id: remoteID}, "not a protobuf message"},
		{"nil message", a, &actor.MessageEnvelope{Message: nil}, "nil message"},
		{"protocol message sent to a region", a, &messages.ShardStopped{Shard: "1"}, "protocol message"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(w.dropped())
			c.via.System.Root.Send(w.region(c.via), c.msg)
			testkit.WaitFor(t, 20*time.Second, func() bool {
				for _, d := range w.dropped()[before:] {
					if strings.Contains(d.Reason, c.reason) {
						return true
					}
				}
				return false
			}, "no dead-letter event with %q; got %v", c.reason, testkit.Lazy(func() any { return w.dropped()[before:] }))
		})
	}
	// An unknown payload type forwarded straight to another node's region
	// (as a region would) is reported there; that node keeps working.
	before := len(w.dropped())
	a.System.Root.Send(w.region(b), &messages.ShardingEnvelope{EntityId: remoteID, Message: unknown})
	testkit.WaitFor(t, 20*time.Second, func() bool {
		for _, d := range w.dropped()[before:] {
			if strings.Contains(d.Reason, "cannot decode payload") && d.Target != nil && d.Target.Address == b.Address() {
				return true
			}
		}
		return false
	}, "the receiving node did not report the unknown payload type")
	// Every region still works, and a non-proto message reaches a local entity.
	for _, n := range []*testkit.Node{a, b, proxy} {
		askEventually(t, n, w.region(n), remoteID, 99)
	}
	if _, err := b.System.Root.RequestFuture(w.region(b), goPing{id: remoteID}, 5*time.Second).Result(); err == nil {
		t.Log("goPing answered") // the test entity does not answer goPing; reaching it is enough
	}
}

// A nil message, sent or requested, to any actor of the library is a
// dead-letter event with the reason; the requester fails at once, nothing
// spins (proto.actor's own mailbox would spin a core for ever on it), and
// every actor goes on working.
func TestNilToEveryLibraryActor(t *testing.T) {
	w := newLocalWorld(t)
	a, b := w.startNode(false), w.startNode(false)
	proxy := w.startNode(true)
	w.cluster.WaitConverged(t, 30*time.Second)
	w.waitRegistered(2)
	onA := w.entityOn(a, a)
	oldest := w.cluster.Oldest("")
	manager := shardingadmin.CoordinatorManagerName(typeName)
	shardID := actorsharding.NewHashCodeMessageExtractor(w.shards).ShardID(onA)
	targets := []struct {
		kind string
		node *testkit.Node
		pid  *actor.PID
	}{
		{"shard region", a, w.region(a)},
		{"shard region proxy", proxy, w.region(proxy)},
		{"shard", a, a.System.NewLocalPID(shardingadmin.RegionName(typeName) + "/" + shard.EntityName(shardID))},
		{"singleton manager", b, b.System.NewLocalPID(manager)},
		{"coordinator supervisor (the singleton)", oldest, oldest.System.NewLocalPID(manager + "/singleton")},
		{"coordinator", oldest, oldest.System.NewLocalPID(manager + "/singleton/coordinator")},
	}
	for _, c := range targets {
		t.Run(c.kind, func(t *testing.T) {
			before := len(w.dropped())
			c.node.System.Root.Send(c.pid, nil)
			if _, err := c.node.System.Root.RequestFuture(c.pid, nil, 10*time.Second).Result(); !errors.Is(err, actor.ErrDeadLetter) {
				t.Errorf("request of nil: %v, want a dead letter at once", err)
			}
			testkit.WaitFor(t, 20*time.Second, func() bool { return len(nilDrops(w.dropped()[before:], c.pid)) == 2 },
				"two nil-message events for %s; got %v", c.pid, testkit.Lazy(func() any { return w.dropped()[before:] }))
		})
	}
	testsupport.AssertNotSpinning(t, 2*time.Second)
	for _, n := range []*testkit.Node{a, b, proxy} {
		askEventually(t, n, w.region(n), onA, 1)
	}
	if st := w.coordinatorState(); st == nil || len(st.State.Regions) != 2 {
		t.Fatalf("coordinator state after the nils: %v", st)
	}
}

func nilDrops(events []*deadletter.Event, target *actor.PID) []*deadletter.Event {
	var out []*deadletter.Event
	for _, e := range events {
		if errors.Is(e.Err, deadletter.ErrNilMessage) && e.Target.Equal(target) && strings.Contains(e.Reason, "nil message") {
			out = append(out, e)
		}
	}
	return out
}

// A message too large for the receiving node's gRPC limit is refused by
// the sending region with a typed dead-letter event, and the requester
// fails at once. Sent, it would close the stream between the nodes, and the
// messages after it would vanish; here they all arrive.
func TestOversizeMessageToAnotherNode(t *testing.T) {
	w := newLocalWorld(t)
	a, b := w.twoNodes()
	var onB []string
	for _, id := range entityIDs(200) {
		if len(onB) < 2 && askEventually(t, a, w.region(a), id, 0).Node == b.Address() {
			onB = append(onB, id)
		}
	}
	if len(onB) < 2 {
		t.Fatalf("fewer than two of 200 entities live on %s", b.Name)
	}
	big, other := onB[0], onB[1]
	before := len(w.dropped())
	huge := &testpb.Ping{EntityId: big, Seq: 1, From: strings.Repeat("x", 8<<20)}
	// The ordinary messages follow at once: on a stream the large one
	// closed, they would be lost.
	answer := a.System.Root.RequestFuture(w.region(a), huge, 30*time.Second)
	const n = 200
	for seq := int64(1); seq <= n; seq++ {
		a.System.Root.Send(w.region(a), pingMsg(other, seq))
	}
	if _, err := answer.Result(); !errors.Is(err, actor.ErrDeadLetter) {
		t.Fatalf("request of an 8 MiB message: %v, want a dead letter", err)
	}
	testkit.WaitFor(t, 30*time.Second, func() bool { return len(w.received.get(other)) == n+1 },
		"%d messages after the large one to reach %s; got %d", n, other, testkit.Lazy(func() any { return len(w.received.get(other)) }))
	var tooLarge []*deadletter.Event
	for _, e := range w.dropped()[before:] {
		if errors.Is(e.Err, deadletter.ErrMessageTooLarge) {
			tooLarge = append(tooLarge, e)
		}
	}
	if len(tooLarge) != 1 || tooLarge[0].Message != huge || !strings.Contains(tooLarge[0].Reason, big) {
		t.Fatalf("too-large events %v, want one naming %s with the message", tooLarge, big)
	}
	if got := w.received.get(big); len(got) != 1 {
		t.Fatalf("%s received %v, want only its first ping", big, got)
	}
	askEventually(t, a, w.region(a), big, 2)
}

// A protocol answer that outgrows the limit (here a region's state, asked
// from another node, under a small limit) is refused with a typed event;
// the asker fails at once instead of waiting, and the nodes go on working.
func TestOversizeAnswerIsRefused(t *testing.T) {
	w := newLocalWorld(t, actorsharding.WithMaxMessageSize(2000))
	a, b := w.twoNodes()
	var ids []string
	for i := 0; i < 200; i++ {
		ids = append(ids, fmt.Sprintf("entity-with-a-rather-long-identifier-%03d", i))
	}
	for _, id := range ids {
		askEventually(t, a, w.region(a), id, 0)
	}
	before := len(w.dropped())
	start := time.Now()
	if _, err := b.System.Root.RequestFuture(w.region(a), &messages.GetShardRegionState{}, 30*time.Second).Result(); !errors.Is(err, actor.ErrDeadLetter) {
		t.Fatalf("remote GetShardRegionState: %v, want a dead letter", err)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("the refused answer failed the asker after %v", took)
	}
	testkit.WaitFor(t, 20*time.Second, func() bool {
		for _, e := range w.dropped()[before:] {
			if _, ok := e.Message.(*messages.CurrentShardRegionState); ok && errors.Is(e.Err, deadletter.ErrMessageTooLarge) {
				return true
			}
		}
		return false
	}, "a too-large event for the region state")
	for _, n := range []*testkit.Node{a, b} {
		askEventually(t, n, w.region(n), ids[0], 1)
	}
}

func mustAny(t *testing.T, m *testpb.Ping) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestJavaStringHashCode(t *testing.T) {
	cases := []struct {
		in   string
		want int32
	}{
		{"", 0},
		{"a", 97},
		{"hello", 99162322},
		{"polygenelubricants", -2147483648}, // Integer.MIN_VALUE in Java
		{"😀", 1772899},                      // a surrogate pair: two UTF-16 units
		{"a\xffb", 2124838},                 // invalid UTF-8 counts as U+FFFD
	}
	for _, c := range cases {
		if got := actorsharding.JavaStringHashCode(c.in); got != c.want {
			t.Errorf("JavaStringHashCode(%q) = %d, want %d", c.in, got, c.want)
		}
	}
	e := actorsharding.NewHashCodeMessageExtractor(100)
	if got := e.ShardID("polygenelubricants"); got != "48" {
		t.Errorf("ShardID of the Integer.MIN_VALUE hash = %s, want 48", got)
	}
	if got := e.ShardID("hello"); got != "22" {
		t.Errorf("ShardID(hello) = %s, want 22", got)
	}
	if id, err := e.EntityID(&testpb.Ping{EntityId: "x"}); err != nil || id != "x" {
		t.Errorf("EntityID = %q, %v", id, err)
	}
	if _, err := e.EntityID(goPing{}); err == nil {
		t.Error("empty id accepted")
	}
	if _, err := e.EntityID(42); err == nil {
		t.Error("an int has an entity id?")
	}
}
