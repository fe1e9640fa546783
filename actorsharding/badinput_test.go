package actorsharding_test

import (
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/testpb"
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
		{"entity id past the limit", a, &testpb.Ping{EntityId: strings.Repeat("x", messages.MaxEntityIDLength+1)}, "longer than the limit"},
		{"envelope with an entity id past the limit", a, &messages.ShardingEnvelope{EntityId: strings.Repeat("x", messages.MaxEntityIDLength+1), Message: mustAny(t, &testpb.Ping{})}, "longer than the limit"},
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
