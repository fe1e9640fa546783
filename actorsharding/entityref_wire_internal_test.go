package actorsharding

import (
	"errors"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// entityRefMessage goes through proto.actor's serializer as a protobuf
// message of its own: encoded as an EntityMessage would be, decoded into
// the entity ID and the message itself, as the type this process gave its
// type ID.
func TestEntityRefMessageOnTheWire(t *testing.T) {
	if !entityRefRegistered {
		t.Fatal("entityRefMessage is not registered")
	}
	if mt, err := protoregistry.GlobalTypes.FindMessageByName(entityRefMessageName); err != nil || mt.New().Interface().(*entityRefMessage) == nil {
		t.Fatalf("the registry's %s: %v, %v", entityRefMessageName, mt, err)
	}
	ping := &testpb.Ping{Seq: 5, From: "a"}
	tid := processTypeIDs.idOf(ping.ProtoReflect().Type())
	out := newEntityRefMessage(nil, "e-1", tid, ping, proto.Size(ping), nil)

	data, typeName, err := remote.Serialize(out, 0)
	if err != nil || typeName != string(entityRefMessageName) {
		t.Fatalf("serialized as %q: %v", typeName, err)
	}
	if len(data) != entityRefSizeOf("e-1", tid, proto.Size(ping)) {
		t.Fatalf("%d bytes, entityRefSizeOf says %d", len(data), entityRefSizeOf("e-1", tid, proto.Size(ping)))
	}
	// The same bytes as the EntityMessage of the encoded Ping.
	encoded, _ := proto.Marshal(ping)
	var em messages.EntityMessage
	if err := proto.Unmarshal(data, &em); err != nil || em.GetEntityId() != "e-1" || em.GetTypeId() != tid || string(em.GetMessage()) != string(encoded) {
		t.Fatalf("as an EntityMessage: %v %v", &em, err)
	}
	got, err := remote.Deserialize(data, typeName, 0)
	if err != nil {
		t.Fatal(err)
	}
	in, ok := got.(*entityRefMessage)
	if !ok || in.err() != nil || in.id != "e-1" || in.tid != tid || !proto.Equal(in.msg, ping) {
		t.Fatalf("deserialized %v (%T), err %v", got, got, in.err())
	}
	// What reflection sees: its three fields, the message encoded.
	if text := prototext.Format(in); !strings.Contains(text, `"e-1"`) || !strings.Contains(text, "type_id:") || !strings.Contains(text, "message:") {
		t.Fatalf("prototext: %s", text)
	}
	if c := proto.Clone(in); !proto.Equal(c, out) {
		t.Fatalf("clone %v differs from %v", c, out)
	}
	// An unknown field survives a round trip.
	withUnknown := protowire.AppendVarint(protowire.AppendTag(append([]byte(nil), data...), 9, protowire.VarintType), 42)
	var u entityRefMessage
	if err := proto.Unmarshal(withUnknown, &u); err != nil || u.err() != nil {
		t.Fatalf("with an unknown field: %v %v", err, u.err())
	}
	if again, err := proto.Marshal(&u); err != nil || string(again) != string(withUnknown) {
		t.Fatalf("re-encoded with the unknown field: %x %v, want %x", again, err, withUnknown)
	}
}

// What cannot be decoded is kept as the reason, never an error: proto.actor
// closes the stream on one, losing the batch.
func TestEntityRefMessageThatDoesNotDecode(t *testing.T) {
	ping := &testpb.Ping{Seq: 1}
	tid := processTypeIDs.idOf(ping.ProtoReflect().Type())
	encoded, _ := proto.Marshal(ping)
	valid, _ := proto.Marshal(&messages.EntityMessage{EntityId: "e", TypeId: tid, Message: encoded})
	cases := []struct {
		name string
		data []byte
		why  string
	}{
		{"a type ID never given", mustMarshal(t, &messages.EntityMessage{EntityId: "e", TypeId: 1 << 30, Message: encoded}), "did not give"},
		{"no type ID", mustMarshal(t, &messages.EntityMessage{EntityId: "e", Message: encoded}), "did not give"},
		{"a message that does not decode", mustMarshal(t, &messages.EntityMessage{EntityId: "e", TypeId: tid, Message: []byte{0xff}}), "cannot decode"},
		{"no message", mustMarshal(t, &messages.EntityMessage{EntityId: "e", TypeId: tid}), "without its message"},
		{"truncated", valid[:len(valid)-1], "malformed"},
		{"a bad tag", []byte{0x00}, "malformed"},
		{"the ID's field as a varint", protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1), "without its message"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var m entityRefMessage
			if err := proto.Unmarshal(tc.data, &m); err != nil {
				t.Fatalf("Unmarshal failed: %v", err)
			}
			if !errors.Is(m.err(), deadletter.ErrNotSerializable) || !strings.Contains(m.err().Error(), tc.why) {
				t.Fatalf("reason %v, want ErrNotSerializable saying %q", m.err(), tc.why)
			}
		})
	}
}

// A message that cannot be encoded (a string that is not UTF-8) fails on
// the endpoint writer, which only logs it: it is reported with a
// dead-letter event.
func TestEntityRefMessageThatDoesNotEncode(t *testing.T) {
	system := actor.NewActorSystem()
	var got []*deadletter.Event
	system.EventStream.Subscribe(func(e any) {
		if d, ok := e.(*deadletter.Event); ok {
			got = append(got, d)
		}
	})
	bad := &testpb.Ping{From: "\xff"}
	sender := actor.NewPID("elsewhere", "asker")
	m := newEntityRefMessage(system, "e", 1, bad, proto.Size(bad), sender)
	if _, _, err := remote.Serialize(m, 0); !errors.Is(err, deadletter.ErrNotSerializable) {
		t.Fatalf("Serialize: %v, want ErrNotSerializable", err)
	}
	if len(got) != 1 || got[0].Message != bad || !got[0].Sender.Equal(sender) || !errors.Is(got[0].Err, deadletter.ErrNotSerializable) {
		t.Fatalf("dead letters %+v, want the Ping from its sender", got)
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
