package actorsharding

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/proto"
)

// BenchmarkEntityIDOnTheWire: one EntityRef message that does not name its
// entity, from the sender's router (withEntityID) through what
// proto.actor's endpoint writer and reader do to each message (its header,
// serializer and envelope) to the entity ID and message on the receiving
// node, per way the ID goes: in an EntityMessage, in an EntityRefMessage
// (the same encoding, in one pass), in the message header, and (the
// baseline) in the message itself.
func BenchmarkEntityIDOnTheWire(b *testing.B) {
	const id = "entity-17"
	anon := &testpb.Ping{Seq: 1, From: "bench"}
	named := &testpb.Ping{EntityId: id, Seq: 1, From: "bench"}
	name := anon.ProtoReflect().Descriptor().FullName()
	ids := &typeIDs{}
	var byHeader, byType typeSet
	byHeader.swap(takesEntityIDHeader, 0)
	byHeader.swap(name, 0)
	byType.swap(name, ids.idOf(anon.ProtoReflect().Type()))
	header := entityIDHeaderOf(id)

	// wire is out as the receiving reader hands it on: the header, if
	// any, and the decoded message.
	wire := func(b *testing.B, out any) (map[string]string, any) {
		h, msg, _ := actor.UnwrapEnvelope(out)
		var mh *remote.MessageHeader
		if h != nil && h.Length() > 0 {
			mh = &remote.MessageHeader{HeaderData: h.ToMap()}
		}
		data, typeName, err := remote.Serialize(msg, 0)
		if err != nil {
			b.Fatal(err)
		}
		enc, err := proto.Marshal(&remote.MessageEnvelope{MessageHeader: mh, MessageData: data})
		if err != nil {
			b.Fatal(err)
		}
		var got remote.MessageEnvelope
		if err := proto.Unmarshal(enc, &got); err != nil {
			b.Fatal(err)
		}
		m, err := remote.Deserialize(got.MessageData, typeName, 0)
		if err != nil {
			b.Fatal(err)
		}
		if got.MessageHeader != nil {
			// The reader's envelope for a message with a header.
			env := &actor.MessageEnvelope{Header: got.MessageHeader.HeaderData, Message: m}
			return env.Header, env.Message
		}
		return nil, m
	}
	check := func(b *testing.B, gotID string, m any) {
		if gotID != id || m.(*testpb.Ping).GetSeq() != 1 {
			b.Fatalf("entity %q got %v", gotID, m)
		}
	}
	var oneBy typeSet
	oneBy.swap(name, processTypeIDs.idOf(anon.ProtoReflect().Type()))
	oneBy.swap(takesEntityRefMessage, 0)
	// The ways withEntityID sends, each with what the receiving entry
	// makes of what the reader hands on: the entity ID and the message.
	for _, way := range []struct {
		name     string
		types    *typeSet
		received func(b *testing.B, h map[string]string, m any) (string, any)
	}{
		{"EntityMessage", &byType, func(b *testing.B, _ map[string]string, m any) (string, any) {
			em := m.(*messages.EntityMessage)
			p, err := ids.decode(em)
			if err != nil {
				b.Fatal(err)
			}
			return em.GetEntityId(), p
		}},
		{"EntityRefMessage", &oneBy, func(b *testing.B, _ map[string]string, m any) (string, any) {
			rm := m.(*entityRefMessage)
			if rm.err() != nil {
				b.Fatal(rm.err())
			}
			return rm.id, rm.msg
		}},
		{"header", &byHeader, func(_ *testing.B, h map[string]string, m any) (string, any) {
			return h[entityIDHeader], m
		}},
	} {
		b.Run(way.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out, _, ok := withEntityID(nil, way.types, id, header, anon, nil, nil)
				if !ok {
					b.Fatal("withEntityID chose no way")
				}
				h, m := wire(b, out)
				gotID, msg := way.received(b, h, m)
				check(b, gotID, msg)
			}
		})
	}
	b.Run("named", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if proto.Size(named) < 0 {
				b.Fatal("size")
			}
			_, m := wire(b, named)
			check(b, m.(*testpb.Ping).GetEntityId(), m)
		}
	})
}
