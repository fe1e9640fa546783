package actorsharding

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/messages"
)

// prefixExtractor finds the entity ID of the default extractor with a
// prefix: an extractor entityIDOf knows nothing of.
type prefixExtractor struct{ HashCodeMessageExtractor }

func (e prefixExtractor) EntityID(msg any) (string, error) {
	id, err := e.HashCodeMessageExtractor.EntityID(msg)
	if err != nil {
		return "", err
	}
	return "p-" + id, nil
}

// TestEntityIDOf: entityIDOf finds what EntityID finds, and no entity
// where EntityID fails, for the default extractor (as a value and a
// pointer) and another one.
func TestEntityIDOf(t *testing.T) {
	hc := NewHashCodeMessageExtractor(10)
	withID, err := NewEnvelope("e", &testpb.Ping{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range []MessageExtractor{hc, &hc, prefixExtractor{hc}} {
		for _, msg := range []any{
			&testpb.Ping{EntityId: "e"}, &testpb.Ping{}, (*testpb.Ping)(nil),
			withID, &messages.ShardingEnvelope{}, "no GetEntityId", 42,
		} {
			want, err := ex.EntityID(msg)
			wantOK := err == nil && want != ""
			if got, ok := entityIDOf(ex, msg); got != want && wantOK || ok != wantOK {
				t.Errorf("%T: entityIDOf(%T %v) = %q %v, EntityID %q %v", ex, msg, msg, got, ok, want, err)
			}
			if namesEntity(ex, msg, want) != wantOK {
				t.Errorf("%T: namesEntity(%T %v, %q) = %v, want %v", ex, msg, msg, want, !wantOK, wantOK)
			}
		}
	}
}

// TestNoEntityIDAllocatesNothingOnTheWay: a message that names no entity
// costs the router, and the region's check whether a message goes to
// another node as it is, no allocation (no error formatted): only the
// region actor, which reports the drop, asks EntityID why.
func TestNoEntityIDAllocatesNothingOnTheWay(t *testing.T) {
	p, region := newHostingRouter()
	ext := p.extractor
	msg := &testpb.Ping{Seq: 1}
	pid := actor.NewPID("x", "region")
	if n := testing.AllocsPerRun(100, func() { p.SendUserMessage(pid, msg) }); n != 0 {
		t.Errorf("the router allocates %v times per message that names no entity", n)
	}
	if region.n == 0 {
		t.Error("the router did not hand the message to the region actor")
	}
	if n := testing.AllocsPerRun(100, func() { sendsAsItIs(ext, "e", msg) }); n != 0 {
		t.Errorf("sendsAsItIs allocates %v times per message that names no entity", n)
	}
}
