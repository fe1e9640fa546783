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
	b.Run("EntityMessage", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out, _, ok := withEntityID(nil, &byType, id, header, anon, nil, nil)
			if !ok {
				b.Fatal("no EntityMessage")
			}
			_, m := wire(b, out)
			em := m.(*messages.EntityMessage)
			p, err := ids.decode(em)
			if err != nil {
				b.Fatal(err)
			}
			check(b, em.GetEntityId(), p)
		}
	})
	var oneBy typeSet
	oneBy.swap(name, processTypeIDs.idOf(anon.ProtoReflect().Type()))
	oneBy.swap(takesEntityRefMessage, 0)
	b.Run("EntityRefMessage", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out, _, ok := withEntityID(nil, &oneBy, id, header, anon, nil, nil)
			if !ok {
				b.Fatal("no EntityRefMessage")
			}
			_, m := wire(b, out)
			rm := m.(*entityRefMessage)
			if rm.err() != nil {
				b.Fatal(rm.err())
			}
			check(b, rm.id, rm.msg)
		}
	})
	b.Run("header", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out, _, ok := withEntityID(nil, &byHeader, id, header, anon, nil, nil)
			if !ok {
				b.Fatal("no header")
			}
			h, m := wire(b, out)
			check(b, h[entityIDHeader], m)
		}
	})
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
