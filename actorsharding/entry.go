package actorsharding

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/shardingadmin"
	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// A router sends an entity's message to the region of another node in one
// of two ways. A ShardingEnvelope (google.protobuf.Any) can carry any type,
// even one the receiving node does not know: it reports that as an error,
// whereas proto.actor's remote drops the whole batch and closes the stream
// on an unknown top-level type. But packing and unpacking the envelope
// costs several times the message's own encoding. So a router sends a type
// in envelopes that ask the receiver to confirm it knows the type
// (known_type_ack_to); the receiving router answers MessageTypeKnown once it
// unpacked one, and from then on the type goes to that member by itself,
// addressed to the region's entry.

// regionEntryName is the process name under which the region of typeName
// on member memberID takes entity messages from other nodes' regions,
// without an envelope. The member ID in the name fences them as the
// envelope's to_member_id does: on a later incarnation of the node no
// process has that name, and the message becomes a dead letter with the
// reason (undeliveredReason).
func regionEntryName(typeName, memberID string) string {
	return shardingadmin.RegionName(typeName) + entryInfix + memberID
}

const entryInfix = "/from-regions/"

// isRegionEntry tells whether id names a region's entry.
func isRegionEntry(id string) bool {
	return strings.HasPrefix(id, shardingadmin.RegionName("")) && strings.Contains(id, entryInfix)
}

// regionEntry is the process of a region's entry for member incarnation
// memberID: what arrives there comes from another node's region, and is
// routed as a message forwarded to that incarnation.
type regionEntry struct {
	router   *regionProcess
	memberID string
}

// SendUserMessage implements actor.Process.
func (e *regionEntry) SendUserMessage(pid *actor.PID, message any) {
	e.router.receive(pid, message, e.memberID)
}

// SendSystemMessage implements actor.Process: nobody watches or stops an
// entry; proto.actor's dead-letter process answers as for a missing
// process (a Watch gets Terminated).
func (e *regionEntry) SendSystemMessage(pid *actor.PID, message any) {
	e.router.table.system.DeadLetter.SendSystemMessage(pid, message)
}

// Stop implements actor.Process.
func (e *regionEntry) Stop(pid *actor.PID) { e.SendSystemMessage(pid, &actor.Stop{}) }

// sendsAsItIs tells whether msg, the message for entity id, can go to
// another node's region as it is: that region's extractor, the same as
// ex, finds id in it and unwraps it to msg itself (not so for a message
// that came in an envelope, or one the extractor unwraps).
func sendsAsItIs(ex MessageExtractor, id string, msg proto.Message) bool {
	if !namesEntity(ex, msg, id) {
		return false
	}
	u, err := ex.UnwrapMessage(msg)
	if err != nil {
		return false
	}
	return samePointer(u, msg) // a protobuf message is a pointer
}

// entityIDHeader is the remote header that carries the entity ID of a
// message sent to a region's entry without naming its entity (an
// EntityRef's message): cheaper than packing it in a ShardingEnvelope, and
// the entity receives the message itself, as from an envelope.
const entityIDHeader = "protoshard-entity-id"

// takesEntityIDHeader is noted in a member's set of known types once its
// regions said they take entityIDHeader (MessageTypeKnown.entity_id_header);
// a region of an earlier version would find no entity in the message.
// Not a protobuf full name (it has a '-'), so no message type has it.
const takesEntityIDHeader protoreflect.FullName = "protoshard.entity-id-header"

// takesEntityRefMessage is noted in a member's set of known types once its
// regions said they take entityRefMessage (MessageTypeKnown.entity_ref_message).
const takesEntityRefMessage protoreflect.FullName = "protoshard.entity-ref-message"

// withEntityID is msg, for entity id, as it goes to an entry that takes
// it without its entity's name, and about its encoded size: if the member
// gave msg's type an ID, an entityRefMessage (encoded in one pass on
// system's endpoint writer) where the member takes it, else an
// EntityMessage; else msg with the ID in entityIDHeader; false if the
// member takes none of them for msg's type, or the ID cannot go in a
// header. header, if not nil, is entityIDHeaderOf(id) made before. own,
// if not nil, is the message's own header (a trace context), which goes
// with it.
func withEntityID(system *actor.ActorSystem, types *typeSet, id string, header map[string]string, msg proto.Message, sender *actor.PID, own map[string]string) (any, int, bool) {
	if header == nil {
		// Every way needs an ID that a protobuf string takes.
		if header = entityIDHeaderOf(id); header == nil {
			return nil, 0, false
		}
	}
	name := msg.ProtoReflect().Descriptor().FullName()
	if tid := typeIDOf(types, name); tid != 0 {
		if entityRefRegistered && has(types, takesEntityRefMessage) {
			n := proto.Size(msg)
			em := newEntityRefMessage(system, id, tid, msg, n, sender)
			if own != nil {
				return &actor.MessageEnvelope{Header: own, Message: em, Sender: sender}, entityRefSizeOf(id, tid, n) + headerSize(own), true
			}
			return envelopeFor(em, sender), entityRefSizeOf(id, tid, n), true
		}
		if b, err := proto.Marshal(msg); err == nil {
			em := &messages.EntityMessage{EntityId: id, TypeId: tid, Message: b}
			if own != nil {
				return &actor.MessageEnvelope{Header: own, Message: em, Sender: sender}, len(b) + len(id) + 16 + headerSize(own), true
			}
			return envelopeFor(em, sender), len(b) + len(id) + 16, true
		}
	}
	if !has(types, takesEntityIDHeader) || !has(types, name) {
		return nil, 0, false
	}
	if own != nil {
		merged := make(map[string]string, len(own)+1)
		for k, v := range own {
			merged[k] = v
		}
		merged[entityIDHeader] = id
		return &actor.MessageEnvelope{Header: merged, Message: msg, Sender: sender}, sizeWithEntityID(id, msg) + headerSize(own), true
	}
	return &actor.MessageEnvelope{Header: header, Message: msg, Sender: sender}, sizeWithEntityID(id, msg), true
}

// roomLeft is what limit leaves a message whose header is header; at
// least 1, so that a header over the limit still fails guard.CheckSize
// (which takes a limit of 0 or less for none).
func roomLeft(limit int, header map[string]string) int { return max(limit-headerSize(header), 1) }

// headerSize bounds the encoded size of header's entries.
func headerSize(header map[string]string) int {
	n := 0
	for k, v := range header {
		n += len(k) + len(v) + 8
	}
	return n
}

// envelopeFor is msg with sender, if any, as root.Send takes it.
func envelopeFor(msg any, sender *actor.PID) any {
	if sender == nil {
		return msg
	}
	return &actor.MessageEnvelope{Message: msg, Sender: sender}
}

// entityIDHeaderOf is the header that carries entity ID id, or nil if id
// cannot go in one (a protobuf string is UTF-8: the encoding would fail,
// and proto.actor's remote would drop the message). Nobody writes to it
// once made (proto.actor's remote copies it as it encodes it), so one may
// go with every message for the entity.
func entityIDHeaderOf(id string) map[string]string {
	if !utf8.ValidString(id) {
		return nil
	}
	return map[string]string{entityIDHeader: id}
}

// sizeWithEntityID bounds the encoded size of msg with id in its header.
func sizeWithEntityID(id string, msg proto.Message) int {
	return proto.Size(msg) + len(entityIDHeader) + len(id) + 16
}

// carriedEntityID is the entity ID a message that reached an entry (to
// names the entry's member incarnation) carries in its header, if any.
func carriedEntityID(env *actor.MessageEnvelope, to string) (string, bool) {
	if to == "" || env == nil || env.Header == nil {
		return "", false
	}
	id, ok := env.Header[entityIDHeader]
	return id, ok
}

// knownTypeAckTo is the known_type_ack_to of an envelope with payload msg
// to the member whose known types are types: self, this node's address,
// until the member confirmed it knows msg's type; then none, so the member
// does not answer each envelope (a user's ShardingEnvelope, or a message
// that cannot go by itself, goes in one whatever the member knows).
func knownTypeAckTo(types *typeSet, msg proto.Message, self string) string {
	if has(types, msg.ProtoReflect().Descriptor().FullName()) {
		return ""
	}
	return self
}

// knownTypes are, per member, the message types its regions confirmed
// they know (MessageTypeKnown), for the routers' sends to their entries,
// with the ID the member gave each for EntityMessage (0: none).
type knownTypes struct {
	members sync.Map // member ID -> *typeSet
}

type typeSet = cowMap[protoreflect.FullName, uint32]

// of returns memberID's set, made on first use.
func (k *knownTypes) of(memberID string) *typeSet {
	if v, ok := k.members.Load(memberID); ok {
		return v.(*typeSet)
	}
	v, _ := k.members.LoadOrStore(memberID, &typeSet{})
	return v.(*typeSet)
}

// learn notes that memberID knows the type name, with its ID typeID for
// EntityMessage (0: none).
func (k *knownTypes) learn(memberID string, name protoreflect.FullName, typeID uint32) {
	if s := k.of(memberID); !has(s, name) || typeIDOf(s, name) != typeID {
		s.swap(name, typeID)
	}
}

// forget drops what memberID knew (it was removed).
func (k *knownTypes) forget(memberID string) { k.members.Delete(memberID) }

func has(s *typeSet, name protoreflect.FullName) bool {
	_, ok := s.get(name)
	return ok
}

// typeIDOf is the ID the member of s gave type name for EntityMessage, or 0.
func typeIDOf(s *typeSet, name protoreflect.FullName) uint32 {
	id, _ := s.get(name)
	return id
}

// typeIDs are the IDs a process gives the message types its regions take
// in an EntityMessage or entityRefMessage (MessageTypeKnown.type_id): a
// small number on the wire instead of a type URL, resolved with one load.
// One set per process (processTypeIDs), so an ID keeps its type for the
// life of every member the process runs, even when a region stops and
// starts again, and entityRefMessage's protobuf methods, which know no
// node, decode with it; IDs start at 1.
type typeIDs struct {
	mu     sync.Mutex // writers
	byName map[protoreflect.FullName]uint32
	types  atomic.Pointer[[]protoreflect.MessageType] // ID-1 -> type
}

// idOf returns mt's ID, given on first use.
func (t *typeIDs) idOf(mt protoreflect.MessageType) uint32 {
	name := mt.Descriptor().FullName()
	t.mu.Lock()
	defer t.mu.Unlock()
	if id, ok := t.byName[name]; ok {
		return id
	}
	if t.byName == nil {
		t.byName = map[protoreflect.FullName]uint32{}
	}
	var next []protoreflect.MessageType
	if cur := t.types.Load(); cur != nil {
		next = slices.Clone(*cur)
	}
	next = append(next, mt)
	t.types.Store(&next)
	id := uint32(len(next))
	t.byName[name] = id
	return id
}

// processTypeIDs are this process's type IDs.
var processTypeIDs typeIDs

// decode is the message em carries, decoded as the type of its type_id.
func (t *typeIDs) decode(em *messages.EntityMessage) (proto.Message, error) {
	return t.decodeBytes(em.GetEntityId(), em.GetTypeId(), em.GetMessage())
}

// decodeBytes decodes b, the message for entity id, as the type of type
// ID tid.
func (t *typeIDs) decodeBytes(id string, tid uint32, b []byte) (proto.Message, error) {
	types := t.types.Load()
	if types == nil || tid == 0 || int64(tid) > int64(len(*types)) {
		return nil, fmt.Errorf("message for entity %q names type ID %d, which this process did not give: %w",
			id, tid, deadletter.ErrNotSerializable)
	}
	mt := (*types)[tid-1]
	m := mt.New().Interface()
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("message for entity %q: cannot decode %s: %w: %w",
			id, mt.Descriptor().FullName(), deadletter.ErrNotSerializable, err)
	}
	return m, nil
}
