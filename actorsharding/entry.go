package actorsharding

import (
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"
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
	return RegionName(typeName) + entryInfix + memberID
}

const entryInfix = "/from-regions/"

// isRegionEntry tells whether id names a region's entry.
func isRegionEntry(id string) bool {
	return strings.HasPrefix(id, RegionName("")) && strings.Contains(id, entryInfix)
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
	if got, err := ex.EntityID(msg); err != nil || got != id {
		return false
	}
	u, err := ex.UnwrapMessage(msg)
	if err != nil {
		return false
	}
	// The same pointer (a protobuf message is one), compared without ==,
	// which panics on a value that is not comparable.
	vu, vm := reflect.ValueOf(u), reflect.ValueOf(msg)
	return vu.Kind() == reflect.Pointer && vm.Kind() == reflect.Pointer && vu.Type() == vm.Type() && vu.Pointer() == vm.Pointer()
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

// withEntityID is msg, for entity id, as it goes to an entry that takes
// the ID in entityIDHeader; false if the member does not take the header
// for msg's type, or the ID cannot go in a header. header, if not nil, is
// entityIDHeaderOf(id) made before.
func withEntityID(types *typeSet, id string, header map[string]string, msg proto.Message, sender *actor.PID) (*actor.MessageEnvelope, bool) {
	if !has(types, takesEntityIDHeader) || !has(types, msg.ProtoReflect().Descriptor().FullName()) {
		return nil, false
	}
	if header == nil {
		if header = entityIDHeaderOf(id); header == nil {
			return nil, false
		}
	}
	return &actor.MessageEnvelope{Header: header, Message: msg, Sender: sender}, true
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

// knownTypes are, per member, the message types its regions confirmed
// they know (MessageTypeKnown), for the routers' sends to their entries.
type knownTypes struct {
	members sync.Map // member ID -> *typeSet
}

type typeSet = cowMap[protoreflect.FullName, struct{}]

// of returns memberID's set, made on first use.
func (k *knownTypes) of(memberID string) *typeSet {
	if v, ok := k.members.Load(memberID); ok {
		return v.(*typeSet)
	}
	v, _ := k.members.LoadOrStore(memberID, &typeSet{})
	return v.(*typeSet)
}

// learn notes that memberID knows the type name.
func (k *knownTypes) learn(memberID string, name protoreflect.FullName) {
	if s := k.of(memberID); !has(s, name) {
		s.swap(name, struct{}{})
	}
}

// forget drops what memberID knew (it was removed).
func (k *knownTypes) forget(memberID string) { k.members.Delete(memberID) }

func has(s *typeSet, name protoreflect.FullName) bool {
	_, ok := s.get(name)
	return ok
}
