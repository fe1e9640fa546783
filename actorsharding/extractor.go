package actorsharding

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/coordinator"
	"github.com/protoshard/protoshard/internal/shard"
	"github.com/protoshard/protoshard/internal/wire"
	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// defaultNumberOfShards is Akka typed's number-of-shards default. The rule
// of thumb is ten times the planned maximum number of nodes.
const defaultNumberOfShards = 1000

// ErrNoEntityID: the extractor cannot tell which entity a message is for.
var ErrNoEntityID = errors.New("actorsharding: message has no entity id")

// MessageExtractor tells a region which entity a message is for, which
// shard that entity belongs to, and what the entity receives (Akka typed's
// ShardingMessageExtractor). It must give the same answers on every node.
//
// A region handles *messages.ShardingEnvelope itself, whatever the
// extractor: the entity is the envelope's entity_id, the shard is
// ShardID(entity_id) and the entity receives the unpacked payload.
type MessageExtractor interface {
	// EntityID returns the entity the message is for; an error (or "")
	// means the message cannot be routed.
	EntityID(message any) (string, error)
	// ShardID returns the shard of an entity. It depends on the ID only,
	// so that any node computes it from an envelope alone.
	ShardID(entityID string) string
	// UnwrapMessage returns what the entity receives.
	UnwrapMessage(message any) (any, error)
}

// IdentifiedExtractor is a MessageExtractor that names how it maps entity
// IDs to shards. Every region sends its extractor's identity when it
// registers, and the coordinator refuses a region whose identity differs
// from the registered regions' (ErrIncompatibleExtractor): during a
// rolling deploy that changes the mapping, old and new nodes would put
// the same entity in two shards, each hosted somewhere, and run it twice.
//
// Without this interface the identity is the extractor's Go type name
// (renaming the type counts as a change), with no number of shards;
// HashCodeMessageExtractor's is "hash-code" and its NumberOfShards. A type
// that embeds HashCodeMessageExtractor has an identity of its own (its
// type name), since it may map IDs otherwise.
type IdentifiedExtractor interface {
	MessageExtractor
	// ExtractorIdentity returns the name of the extractor's mapping from
	// entity IDs to shards, which must change whenever the mapping does
	// (give it a version; at most 256 bytes,
	// "" means the Go type name), and its number of shards (0 if it has
	// no fixed number).
	ExtractorIdentity() (name string, numberOfShards int)
}

// identityOf is the identity a region registers with (see
// IdentifiedExtractor).
func identityOf(e MessageExtractor) (coordinator.ExtractorIdentity, error) {
	var name string
	var n int
	switch x := e.(type) {
	case IdentifiedExtractor:
		name, n = x.ExtractorIdentity()
	case HashCodeMessageExtractor:
		name, n = "hash-code", x.numberOfShards()
	case *HashCodeMessageExtractor:
		if x != nil {
			name, n = "hash-code", x.numberOfShards()
		}
	}
	if name == "" {
		name = fmt.Sprintf("%T", e)
	}
	switch {
	case len(name) > wire.MaxExtractorNameLength:
		return coordinator.ExtractorIdentity{}, fmt.Errorf("the extractor's identity %q is longer than %d bytes", name, wire.MaxExtractorNameLength)
	case n < 0 || n > math.MaxInt32:
		return coordinator.ExtractorIdentity{}, fmt.Errorf("the extractor %q says it has %d shards", name, n)
	}
	return coordinator.ExtractorIdentity{Name: name, NumberOfShards: n}, nil
}

// entityIDMessage is a message that names its entity: every protobuf
// message with a string `entity_id` field is one.
type entityIDMessage interface {
	GetEntityId() string
}

// HashCodeMessageExtractor is the default MessageExtractor (Akka's
// HashCodeMessageExtractor). The entity ID comes from GetEntityId(); the
// entity receives the message itself; the shard is
// abs(hashCode(entityID)) mod NumberOfShards, where hashCode is Java's
// String.hashCode over the ID's UTF-16 code units. That hash is fixed by
// the Java language specification, so it is the same on every process,
// platform and version, unlike Go's map hash which is seeded per process;
// and an ID lands on the same shard number as in Akka. Unlike Akka, the
// absolute value is taken in 64 bits, so the one ID hash that Java's
// Math.abs leaves negative (Integer.MIN_VALUE) still gives a valid shard.
type HashCodeMessageExtractor struct {
	// NumberOfShards is the number of shards entity IDs are spread over.
	// It must be the same on every node and must not change while the
	// cluster has state (remembered entities are moved if it does).
	NumberOfShards int
}

// NewHashCodeMessageExtractor returns the default extractor with n shards
// (1000, Akka typed's number-of-shards default, when n < 1; the
// rule of thumb is ten times the planned maximum number of nodes).
func NewHashCodeMessageExtractor(n int) HashCodeMessageExtractor {
	if n < 1 {
		n = defaultNumberOfShards
	}
	return HashCodeMessageExtractor{NumberOfShards: n}
}

// EntityID implements MessageExtractor.
func (e HashCodeMessageExtractor) EntityID(message any) (string, error) {
	switch m := message.(type) {
	case *messages.ShardingEnvelope:
		if m.GetEntityId() == "" {
			return "", fmt.Errorf("ShardingEnvelope with an empty entity_id: %w", ErrNoEntityID)
		}
		return m.GetEntityId(), nil
	case entityIDMessage:
		if m.GetEntityId() == "" {
			return "", fmt.Errorf("%T with an empty entity_id: %w", message, ErrNoEntityID)
		}
		return m.GetEntityId(), nil
	default:
		return "", fmt.Errorf("%T has no GetEntityId() string: %w", message, ErrNoEntityID)
	}
}

// namesEntity reports whether ex finds entity id in msg.
func namesEntity(ex MessageExtractor, msg any, id string) bool {
	got, ok := entityIDOf(ex, msg)
	return ok && got == id
}

// entityIDOf is the entity ex finds in msg; false if none. The routers
// ask it of every message, and HashCodeMessageExtractor's EntityID would
// format an error (allocate) for each one that names no entity: the
// region actor, which reports the drop, asks EntityID for the reason.
func entityIDOf(ex MessageExtractor, msg any) (string, bool) {
	switch ex.(type) {
	case HashCodeMessageExtractor, *HashCodeMessageExtractor:
		var id string
		switch m := msg.(type) {
		case *messages.ShardingEnvelope:
			id = m.GetEntityId()
		case entityIDMessage:
			id = m.GetEntityId()
		}
		return id, id != ""
	}
	id, err := ex.EntityID(msg)
	return id, err == nil && id != ""
}

// ShardID implements MessageExtractor.
func (e HashCodeMessageExtractor) ShardID(entityID string) string {
	h := int64(javaStringHashCode(entityID))
	if h < 0 {
		h = -h
	}
	return strconv.FormatInt(h%int64(e.numberOfShards()), 10)
}

// numberOfShards is the number of shards it maps to: NumberOfShards, or
// defaultNumberOfShards for a value below 1.
func (e HashCodeMessageExtractor) numberOfShards() int {
	if e.NumberOfShards < 1 {
		return defaultNumberOfShards
	}
	return e.NumberOfShards
}

// UnwrapMessage implements MessageExtractor: a ShardingEnvelope's payload
// is unpacked, anything else is the entity's message as is.
func (e HashCodeMessageExtractor) UnwrapMessage(message any) (any, error) {
	if env, ok := message.(*messages.ShardingEnvelope); ok {
		return unpackEnvelope(env)
	}
	return message, nil
}

// unpackEnvelope returns a ShardingEnvelope's payload. It fails (instead of
// crashing) when the payload is missing or its type is not linked into
// this program.
func unpackEnvelope(env *messages.ShardingEnvelope) (any, error) {
	if env.GetMessage() == nil {
		return nil, fmt.Errorf("ShardingEnvelope for entity %q has no message", env.GetEntityId())
	}
	m, err := anypb.UnmarshalNew(env.GetMessage(), proto.UnmarshalOptions{})
	if err != nil {
		return nil, fmt.Errorf("ShardingEnvelope for entity %q: cannot decode payload %q (is its type linked into this node?): %w",
			env.GetEntityId(), env.GetMessage().GetTypeUrl(), err)
	}
	return m, nil
}

// javaStringHashCode is Java's String.hashCode: s[0]*31^(n-1) + ... +
// s[n-1] over UTF-16 code units, in 32-bit two's complement arithmetic.
func javaStringHashCode(s string) int32 {
	// Without utf16.Encode([]rune(s)): this runs for every routed message,
	// and the conversion allocated twice. Ranging over a string yields
	// U+FFFD for invalid UTF-8, as []rune(s) does.
	var h int32
	for _, r := range s {
		if r < 0x10000 {
			h = 31*h + int32(r)
			continue
		}
		hi, lo := utf16.EncodeRune(r)
		h = 31*h + int32(hi)
		h = 31*h + int32(lo)
	}
	return h
}

// NewEnvelope wraps msg for the entity entityID, for entity messages that
// carry no entity_id of their own: the entity receives msg itself.
func NewEnvelope(entityID string, msg proto.Message) (*messages.ShardingEnvelope, error) {
	if entityID == "" {
		return nil, fmt.Errorf("NewEnvelope: %w", ErrNoEntityID)
	}
	if msg == nil {
		return nil, errors.New("actorsharding: NewEnvelope: nil message")
	}
	payload, err := anypb.New(msg)
	if err != nil {
		return nil, fmt.Errorf("actorsharding: NewEnvelope for %q: %w", entityID, err)
	}
	return &messages.ShardingEnvelope{EntityId: entityID, Message: payload}, nil
}

// EntityID returns the ID of the sharded entity whose context ctx is, as
// Akka typed's EntityContext.entityId: the entity's actor name, which its
// shard derived from the ID (escaped so that any ID makes a valid name),
// decoded. It fails for an actor that is not an entity of a region.
func EntityID(ctx actor.Context) (string, error) {
	self := ctx.Self()
	if self == nil {
		return "", errors.New("actorsharding: EntityID: the context has no Self")
	}
	// "sharding/<type>/<shard child>/<entity>": entity names never hold a
	// '/' (EntityName escapes it), so the last segment is the entity's.
	id := self.GetId()
	if !strings.HasPrefix(id, "sharding/") || strings.Count(id, "/") < 3 {
		return "", fmt.Errorf("actorsharding: EntityID: %q is not the name of a sharded entity", id)
	}
	entityID, err := shard.EntityID(id[strings.LastIndexByte(id, '/')+1:])
	if err != nil {
		return "", fmt.Errorf("actorsharding: EntityID of %q: %w", id, err)
	}
	return entityID, nil
}
