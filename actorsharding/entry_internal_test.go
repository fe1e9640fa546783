package actorsharding

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/shardingadmin"
	"github.com/protoshard/protoshard/internal/shardproto"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/proto"
)

type recordingProcess struct {
	mu   sync.Mutex
	msgs []any
}

func (p *recordingProcess) SendUserMessage(_ *actor.PID, m any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.msgs = append(p.msgs, m)
}
func (p *recordingProcess) SendSystemMessage(*actor.PID, any) {}
func (p *recordingProcess) Stop(*actor.PID)                   {}

func (p *recordingProcess) take() []any {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.msgs
	p.msgs = nil
	return out
}

// TestRemoteHomeSendsKnownTypesByThemselves: a message type the home has
// not confirmed goes in an envelope that asks it to; once confirmed, the
// type goes by itself to the home's entry, and other types still go in
// envelopes. A closed home takes nothing; an oversized message goes
// neither way.
func TestRemoteHomeSendsKnownTypesByThemselves(t *testing.T) {
	system := actor.NewActorSystem()
	table := newRouteTable(system, "T")
	home, entry := &recordingProcess{}, &recordingProcess{}
	homePID, _ := system.ProcessRegistry.Add(home, shardingadmin.RegionName("T"))
	system.ProcessRegistry.Add(entry, regionEntryName("T", "m1"))
	sr := table.shard("7")
	sr.setRemote(homePID, "m1")
	h := sr.remote.Load()
	ping := &testpb.Ping{EntityId: "e", Seq: 1}
	const limit = 1 << 20

	if !h.send(system.Root, nil, "7", ping, &routing{id: "e", plain: ping}, limit) {
		t.Fatal("send to an open home refused")
	}
	got := home.take()
	env, ok := got[0].(*messages.ShardingEnvelope)
	if len(got) != 1 || !ok || env.GetKnownTypeAckTo() != system.Address() || env.GetToMemberId() != "m1" || env.GetShardId() != "7" {
		t.Fatalf("home got %v, want one envelope asking %s to confirm the type", got, system.Address())
	}
	if m, err := unpackEnvelope(env); err != nil || !proto.Equal(m.(proto.Message), ping) {
		t.Fatalf("payload %v (%v), want %v", m, err, ping)
	}

	table.types.learn("m1", ping.ProtoReflect().Descriptor().FullName(), 0)
	table.types.learn("m2", (&testpb.Pong{}).ProtoReflect().Descriptor().FullName(), 0)
	if !h.send(system.Root, nil, "7", ping, &routing{id: "e", plain: ping}, limit) || !h.send(system.Root, nil, "7", &testpb.Pong{}, &routing{id: "e", plain: &testpb.Pong{}}, limit) {
		t.Fatal("send to an open home refused")
	}
	if got := entry.take(); len(got) != 1 || got[0] != ping {
		t.Fatalf("entry got %v, want the ping by itself", got)
	}
	if got := home.take(); len(got) != 1 {
		t.Fatalf("home got %v, want the Pong (known to another member only) in an envelope", got)
	}

	// A message that cannot go as it is goes in an envelope, known or not.
	if !h.send(system.Root, nil, "7", ping, &routing{id: "e"}, limit) {
		t.Fatal("send to an open home refused")
	}
	got = home.take()
	if len(got) != 1 || len(entry.take()) != 0 {
		t.Fatalf("home got %v, want the ping in an envelope", got)
	}
	if env := got[0].(*messages.ShardingEnvelope); env.GetKnownTypeAckTo() != "" {
		t.Fatalf("the envelope of a type the home confirmed asks %s to confirm it again", env.GetKnownTypeAckTo())
	}

	// A message that does not name its entity (an EntityRef's) goes in an
	// envelope until the home said it takes the entity ID in a header,
	// then by itself with the ID in the header; an ID that is no UTF-8
	// cannot go in a header.
	anon := &testpb.Ping{Seq: 2}
	byRef := func(id string) bool {
		return h.send(system.Root, nil, "7", anon, &routing{id: id, m: anon, plain: anon, byRef: true}, limit)
	}
	if !byRef("e") {
		t.Fatal("send to an open home refused")
	}
	if got := home.take(); len(got) != 1 || len(entry.take()) != 0 {
		t.Fatalf("home got %v, want the ping in an envelope before the header is known", got)
	}
	table.types.learn("m1", takesEntityIDHeader, 0)
	if !byRef("e") || !byRef("\xff") {
		t.Fatal("send to an open home refused")
	}
	got = entry.take()
	if len(got) != 1 {
		t.Fatalf("entry got %v, want one message", got)
	}
	if me, ok := got[0].(*actor.MessageEnvelope); !ok || me.Message != anon || me.GetHeader(entityIDHeader) != "e" {
		t.Fatalf("entry got %#v, want the ping with entity e in its header", got[0])
	}
	if got := home.take(); len(got) != 1 {
		t.Fatalf("home got %v, want the ping for a non-UTF-8 ID in an envelope", got)
	}
	if h.send(system.Root, nil, "7", anon, &routing{id: string(make([]byte, limit)), m: anon, plain: anon, byRef: true}, limit) {
		t.Fatal("a message whose ID makes it oversized was sent")
	}

	// Once the home gave the type an ID, the message goes encoded in an
	// EntityMessage, with its sender; a non-UTF-8 ID still in an envelope.
	table.types.learn("m1", anon.ProtoReflect().Descriptor().FullName(), 7)
	sender := actor.NewPID("elsewhere", "asker")
	if !h.send(system.Root, &actor.MessageEnvelope{Sender: sender}, "7", anon, &routing{id: "e", m: anon, plain: anon, byRef: true}, limit) || !byRef("\xff") {
		t.Fatal("send to an open home refused")
	}
	got = entry.take()
	me, ok := got[0].(*actor.MessageEnvelope)
	if len(got) != 1 || !ok || !me.Sender.Equal(sender) {
		t.Fatalf("entry got %v, want one message from %v", got, sender)
	}
	em, ok := me.Message.(*messages.EntityMessage)
	decoded := &testpb.Ping{}
	if !ok || em.GetEntityId() != "e" || em.GetTypeId() != 7 || proto.Unmarshal(em.GetMessage(), decoded) != nil || !proto.Equal(decoded, anon) {
		t.Fatalf("entry got %v, want the ping for e in an EntityMessage of type 7", me.Message)
	}
	if got := home.take(); len(got) != 1 {
		t.Fatalf("home got %v, want the ping for a non-UTF-8 ID in an envelope", got)
	}
	if h.send(system.Root, nil, "7", anon, &routing{id: string(make([]byte, limit)), m: anon, plain: anon, byRef: true}, limit) {
		t.Fatal("an EntityMessage whose ID makes it oversized was sent")
	}

	// Once the home said it takes entityRefMessage, it goes in one: the
	// message itself, encoded on the wire; oversized, it is not sent.
	table.types.learn("m1", takesEntityRefMessage, 0)
	if !h.send(system.Root, &actor.MessageEnvelope{Sender: sender}, "7", anon, &routing{id: "e", m: anon, plain: anon, byRef: true}, limit) {
		t.Fatal("send to an open home refused")
	}
	got = entry.take()
	me, ok = got[0].(*actor.MessageEnvelope)
	if len(got) != 1 || !ok || !me.Sender.Equal(sender) {
		t.Fatalf("entry got %v, want one message from %v", got, sender)
	}
	if rm, ok := me.Message.(*entityRefMessage); !ok || rm.id != "e" || rm.tid != 7 || rm.msg != anon {
		t.Fatalf("entry got %v, want the ping itself for e in an entityRefMessage of type 7", me.Message)
	}
	// The ID and the field's tag and length count: a Ping of just under
	// the limit goes over it with them.
	over := &testpb.Ping{From: string(make([]byte, limit-entityRefSizeOf("e", 7, 0)))}
	if proto.Size(over) > limit {
		t.Fatalf("the Ping alone is over the limit: %d bytes", proto.Size(over))
	}
	if h.send(system.Root, nil, "7", over, &routing{id: "e", m: over, plain: over, byRef: true}, limit) {
		t.Fatal("an entityRefMessage over the limit with its ID was sent")
	}
	under := &testpb.Ping{From: string(make([]byte, limit-entityRefSizeOf("e", 7, 0)-8))}
	if !h.send(system.Root, nil, "7", under, &routing{id: "e", m: under, plain: under, byRef: true}, limit) || len(entry.take()) != 1 {
		t.Fatal("an entityRefMessage under the limit with its ID was not sent")
	}

	big := &testpb.Ping{EntityId: "e", From: string(make([]byte, 2*limit))}
	if h.send(system.Root, nil, "7", big, &routing{id: "e", plain: big}, limit) {
		t.Fatal("an oversized message of a known type was sent")
	}
	table.types.forget("m1")
	if sr.setRemote(homePID, "m1"); sr.remote.Load() != h {
		t.Fatal("setting the same home again replaced it")
	}
	sr.closeRemote()
	if h.send(system.Root, nil, "7", ping, &routing{id: "e", plain: ping}, limit) {
		t.Fatal("a closed home took a message")
	}
	if len(home.take())+len(entry.take()) != 0 {
		t.Fatal("something arrived after the refusals")
	}
}

// TestTypeIDs: a type keeps the ID it was given first; an EntityMessage
// decodes as the type of its ID, and one with an ID never given, or that
// does not decode, fails with ErrNotSerializable.
func TestTypeIDs(t *testing.T) {
	var ids typeIDs
	ping, pong := (&testpb.Ping{}).ProtoReflect().Type(), (&testpb.Pong{}).ProtoReflect().Type()
	if _, err := ids.decode(&messages.EntityMessage{EntityId: "e", TypeId: 1}); !errors.Is(err, deadletter.ErrNotSerializable) {
		t.Fatalf("decode before any ID: %v, want ErrNotSerializable", err)
	}
	if a, b, c := ids.idOf(ping), ids.idOf(pong), ids.idOf(ping); a != 1 || b != 2 || c != 1 {
		t.Fatalf("IDs %d %d %d, want 1 2 1", a, b, c)
	}
	encoded, err := proto.Marshal(&testpb.Pong{Seq: 5})
	if err != nil {
		t.Fatal(err)
	}
	m, err := ids.decode(&messages.EntityMessage{EntityId: "e", TypeId: 2, Message: encoded})
	if err != nil || !proto.Equal(m, &testpb.Pong{Seq: 5}) {
		t.Fatalf("decode: %v %v, want the Pong", m, err)
	}
	for _, bad := range []*messages.EntityMessage{
		{EntityId: "e", TypeId: 0, Message: encoded},
		{EntityId: "e", TypeId: 3, Message: encoded},
		{EntityId: "e", TypeId: 1, Message: []byte{0xff}},
	} {
		if m, err := ids.decode(bad); !errors.Is(err, deadletter.ErrNotSerializable) {
			t.Errorf("decode %v: %v %v, want ErrNotSerializable", bad, m, err)
		}
	}
}

// TestCowMap: readers see each change whole; removing an absent key does
// nothing.
func TestCowMap(t *testing.T) {
	var m cowMap[string, int]
	if _, ok := m.get("a"); ok {
		t.Fatal("empty map has a")
	}
	if _, had := m.swap("a", 1); had {
		t.Fatal("swap into an empty map replaced something")
	}
	before := m.m.Load()
	if old, had := m.swap("a", 2); !had || old != 1 {
		t.Fatalf("swap returned %d %v, want 1 true", old, had)
	}
	if (*before)["a"] != 1 {
		t.Fatal("a reader's map changed under it")
	}
	if _, ok := m.remove("b"); ok {
		t.Fatal("removed an absent key")
	}
	if v, ok := m.remove("a"); !ok || v != 2 {
		t.Fatalf("remove returned %d %v, want 2 true", v, ok)
	}
	if _, ok := m.get("a"); ok {
		t.Fatal("a after its removal")
	}
}

// TestSendsAsItIs: only a message in which the extractor finds the entity
// and which it does not unwrap goes to another node as it is.
func TestSendsAsItIs(t *testing.T) {
	ex := NewHashCodeMessageExtractor(10)
	env, err := NewEnvelope("e", &testpb.Pong{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		id   string
		msg  proto.Message
		want bool
	}{
		{"its own ID", "e", &testpb.Ping{EntityId: "e"}, true},
		{"another entity's ID", "e", &testpb.Ping{EntityId: "f"}, false},
		{"no ID (it came in an envelope)", "e", &testpb.Ping{}, false},
		{"an envelope, which the extractor unwraps", "e", env, false},
	} {
		if got := sendsAsItIs(ex, c.id, c.msg); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestUndeliveredDeliverReleasesItsMark: a Deliver that reaches a shard
// that stopped meanwhile no longer keeps its shard off the direct route.
func TestUndeliveredDeliverReleasesItsMark(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	system.EventStream.Subscribe(releaseUndelivered)
	var pending atomic.Int64
	d := &shardproto.Deliver{EntityID: "e", Message: &testpb.Ping{}, Pending: shardproto.NewPending(&pending)}
	gone := actor.NewPID(system.Address(), "a-shard-that-stopped")
	system.Root.Send(gone, d)
	deadline := time.Now().Add(10 * time.Second)
	for pending.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("pending %d after the Deliver became a dead letter, want 0", pending.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSamePointer: one pointer only, and no panic on values that == would
// refuse (a struct holding a slice).
func TestSamePointer(t *testing.T) {
	type unhashable struct{ b []byte }
	m := &messages.SequencedMessage{}
	tests := []struct {
		name string
		a, b any
		want bool
	}{
		{"one pointer", m, m, true},
		{"two messages", m, &messages.SequencedMessage{}, false},
		{"nil and a message", nil, m, false},
		{"values that == panics on", unhashable{b: []byte{1}}, unhashable{b: []byte{1}}, false},
	}
	for _, tt := range tests {
		if got := samePointer(tt.a, tt.b); got != tt.want {
			t.Errorf("%s: samePointer = %v, want %v", tt.name, got, tt.want)
		}
	}
}
