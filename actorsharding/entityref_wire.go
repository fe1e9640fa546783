package actorsharding

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/deadletters"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/runtime/protoiface"
	"google.golang.org/protobuf/types/descriptorpb"
)

// An EntityRef's message that does not name its entity goes to another
// node's entry with the entity ID. In an EntityMessage that costs two
// encodings on the sender (the message, then the EntityMessage that copies
// it) and two decodings on the receiver; proto.actor's remote encodes and
// decodes every message by its type's protobuf methods, with no hook for
// another serializer (its endpoint writer ignores the serializer ID it is
// given). So entityRefMessage is a protobuf message of its own: it has
// EntityMessage's fields, and its protobuf methods encode the message
// straight into the field, and decode it straight out of it, as the type
// the receiving process gave its type ID.

// entityRefMessageName is entityRefMessage's protobuf name: no .proto
// declares it, so no generated type takes it.
const entityRefMessageName protoreflect.FullName = "protoshard.internal.EntityRefMessage"

// entityRefMessage is an EntityRef's message to another node's entry, with
// its entity ID: entity_id = 1, type_id = 2 (the receiving process's ID of
// the message's type) and message = 3 (the message, encoded), as in
// EntityMessage.
type entityRefMessage struct {
	id  string
	msg proto.Message // the message: the sender's, or the one decoded
	tid uint32
	// innerSize: msg's encoded size, as the sender's size check measured
	// it (proto caches it in msg).
	innerSize int32
	// system and sender, on the sending node: where a message that cannot
	// be encoded is reported.
	system *actor.ActorSystem
	sender *actor.PID
	// rare holds what few messages have, so that the others stay small.
	rare *entityRefRare
}

// entityRefRare is what an entityRefMessage rarely has.
type entityRefRare struct {
	// raw is the message's encoding when it was not decoded (or was set
	// through reflection).
	raw []byte
	// err: why the receiver could not decode it; the entry drops it with
	// this reason. Decoding never fails: proto.actor's remote closes the
	// stream and drops the whole batch on an error.
	err     error
	unknown protoreflect.RawFields
}

// raw is the message's encoding, if it was kept as such.
func (m *entityRefMessage) raw() []byte {
	if m.rare == nil {
		return nil
	}
	return m.rare.raw
}

// err is why the message could not be decoded, if so.
func (m *entityRefMessage) err() error {
	if m.rare == nil {
		return nil
	}
	return m.rare.err
}

// unknown is the fields it did not know, encoded.
func (m *entityRefMessage) unknown() protoreflect.RawFields {
	if m.rare == nil {
		return nil
	}
	return m.rare.unknown
}

// setRare changes what m rarely has.
func (m *entityRefMessage) setRare(f func(*entityRefRare)) {
	if m.rare == nil {
		m.rare = &entityRefRare{}
	}
	f(m.rare)
}

// entityRefType is entityRefMessage's protoreflect.MessageType.
type entityRefType struct{}

var (
	entityRefDescriptor protoreflect.MessageDescriptor
	// entityRefRegistered: the type is in protoregistry.GlobalTypes, so
	// that proto.actor's remote decodes it; this node says so in its
	// MessageTypeKnown only then.
	entityRefRegistered bool
	entityRefFields     struct{ id, tid, msg protoreflect.FieldDescriptor }
	entityRefMethods    = &protoiface.Methods{
		Flags:     protoiface.SupportMarshalDeterministic | protoiface.SupportUnmarshalDiscardUnknown,
		Size:      entityRefSize,
		Marshal:   entityRefMarshal,
		Unmarshal: entityRefUnmarshal,
		CheckInitialized: func(protoiface.CheckInitializedInput) (protoiface.CheckInitializedOutput, error) {
			return protoiface.CheckInitializedOutput{}, nil
		},
	}
)

func init() {
	md, err := newEntityRefDescriptor()
	if err != nil {
		return // EntityMessage serves instead
	}
	entityRefDescriptor = md
	fs := md.Fields()
	entityRefFields.id, entityRefFields.tid, entityRefFields.msg = fs.ByNumber(1), fs.ByNumber(2), fs.ByNumber(3)
	entityRefRegistered = protoregistry.GlobalTypes.RegisterMessage(entityRefType{}) == nil
}

// newEntityRefDescriptor describes entityRefMessage: EntityMessage's
// fields under entityRefMessageName.
func newEntityRefDescriptor() (protoreflect.MessageDescriptor, error) {
	str := func(s string) *string { return &s }
	num := func(n int32) *int32 { return &n }
	optional := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:    str("protoshard/internal/entity_ref_message.proto"),
		Package: str("protoshard.internal"),
		Syntax:  str("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: str("EntityRefMessage"),
			Field: []*descriptorpb.FieldDescriptorProto{
				{Name: str("entity_id"), JsonName: str("entityId"), Number: num(1), Label: optional, Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()},
				{Name: str("type_id"), JsonName: str("typeId"), Number: num(2), Label: optional, Type: descriptorpb.FieldDescriptorProto_TYPE_UINT32.Enum()},
				{Name: str("message"), JsonName: str("message"), Number: num(3), Label: optional, Type: descriptorpb.FieldDescriptorProto_TYPE_BYTES.Enum()},
			},
		}},
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("describing %s: %w", entityRefMessageName, err)
	}
	md := fd.Messages().Get(0)
	if md.FullName() != entityRefMessageName {
		return nil, fmt.Errorf("described %s, not %s", md.FullName(), entityRefMessageName)
	}
	return md, nil
}

// newEntityRefMessage is msg for entity id, as it goes to a process that
// gave msg's type the ID tid; innerSize is proto.Size(msg).
func newEntityRefMessage(system *actor.ActorSystem, id string, tid uint32, msg proto.Message, innerSize int, sender *actor.PID) *entityRefMessage {
	return &entityRefMessage{id: id, tid: tid, msg: msg, innerSize: int32(innerSize), system: system, sender: sender}
}

// entityRefSizeOf is the encoded size of an entityRefMessage for entity id
// with type ID tid whose message's own encoded size is innerSize.
func entityRefSizeOf(id string, tid uint32, innerSize int) int {
	return entityRefHeadSize(id, tid) + protowire.SizeTag(3) + protowire.SizeBytes(innerSize)
}

// entityRefHeadSize is the encoded size of an entityRefMessage's fields
// before its message: entity_id and type_id, each left out when empty.
func entityRefHeadSize(id string, tid uint32) int {
	n := 0
	if id != "" {
		n += protowire.SizeTag(1) + protowire.SizeBytes(len(id))
	}
	if tid != 0 {
		n += protowire.SizeTag(2) + protowire.SizeVarint(uint64(tid))
	}
	return n
}

// payload is the message's encoding, for reflection: raw, or msg encoded.
func (m *entityRefMessage) payload() []byte {
	if raw := m.raw(); raw != nil || m.msg == nil {
		return raw
	}
	b, err := proto.Marshal(m.msg)
	if err != nil {
		return nil
	}
	return b
}

func entityRefSize(in protoiface.SizeInput) protoiface.SizeOutput {
	m, ok := in.Message.(*entityRefMessage)
	if !ok {
		return protoiface.SizeOutput{}
	}
	raw := m.raw()
	inner := len(raw)
	if raw == nil && m.msg != nil {
		if in.Flags&protoiface.MarshalUseCachedSize != 0 && m.innerSize > 0 {
			inner = int(m.innerSize)
		} else {
			inner = proto.Size(m.msg)
			m.innerSize = int32(inner)
		}
	}
	n := len(m.unknown())
	if raw == nil && m.msg == nil {
		return protoiface.SizeOutput{Size: n + entityRefHeadSize(m.id, m.tid)}
	}
	return protoiface.SizeOutput{Size: n + entityRefSizeOf(m.id, m.tid, inner)}
}

// entityRefMarshal encodes the message in one pass, straight into its
// field. A message that cannot be encoded is reported with a dead-letter
// event (proto.actor's endpoint writer only logs the error).
func entityRefMarshal(in protoiface.MarshalInput) (protoiface.MarshalOutput, error) {
	m, ok := in.Message.(*entityRefMessage)
	if !ok {
		return protoiface.MarshalOutput{Buf: in.Buf}, fmt.Errorf("%T is no %s", in.Message, entityRefMessageName)
	}
	b := in.Buf
	if m.id != "" {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, m.id)
	}
	if m.tid != 0 {
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(m.tid))
	}
	switch raw := m.raw(); {
	case raw != nil:
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendBytes(b, raw)
	case m.msg != nil:
		size := int(m.innerSize)
		if in.Flags&protoiface.MarshalUseCachedSize == 0 || size <= 0 {
			size = proto.Size(m.msg)
		}
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(size))
		start := len(b)
		var err error
		b, err = proto.MarshalOptions{UseCachedSize: true, Deterministic: in.Flags&protoiface.MarshalDeterministic != 0}.MarshalAppend(b, m.msg)
		if err == nil && len(b)-start != size {
			err = fmt.Errorf("%s changed while it was encoded (%d bytes, not %d)", m.msg.ProtoReflect().Descriptor().FullName(), len(b)-start, size)
		}
		if err != nil {
			err = fmt.Errorf("EntityRef message for entity %q: cannot encode %T: %w: %w", m.id, m.msg, deadletter.ErrNotSerializable, err)
			if m.system != nil {
				deadletters.PublishError(m.system, nil, m.msg, m.sender, err)
			}
			return protoiface.MarshalOutput{Buf: in.Buf}, err
		}
	}
	b = append(b, m.unknown()...)
	return protoiface.MarshalOutput{Buf: b}, nil
}

// entityRefUnmarshal decodes the fields and then the message, as the type
// this process gave its type ID (see processTypeIDs). It never fails: what
// it cannot decode it keeps in err.
func entityRefUnmarshal(in protoiface.UnmarshalInput) (protoiface.UnmarshalOutput, error) {
	m, ok := in.Message.(*entityRefMessage)
	if !ok {
		return protoiface.UnmarshalOutput{}, fmt.Errorf("%T is no %s", in.Message, entityRefMessageName)
	}
	b := in.Buf
	var raw, unknown []byte
	var err error
	seen := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			err = protowire.ParseError(n)
			break
		}
		field := b
		b = b[n:]
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			err = protowire.ParseError(n)
			break
		}
		value := b[:n]
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, _ := protowire.ConsumeBytes(value)
			m.id = string(v)
		case num == 2 && typ == protowire.VarintType:
			v, _ := protowire.ConsumeVarint(value)
			m.tid = uint32(v)
		case num == 3 && typ == protowire.BytesType:
			raw, _ = protowire.ConsumeBytes(value)
			seen = true
		case in.Flags&protoiface.UnmarshalDiscardUnknown == 0:
			unknown = append(unknown, field[:len(field)-len(b)]...)
		}
	}
	switch {
	case err != nil:
		err = fmt.Errorf("EntityRef message: malformed: %w: %w", deadletter.ErrNotSerializable, err)
	case !seen:
		err = fmt.Errorf("EntityRef message for entity %q without its message: %w", m.id, deadletter.ErrNotSerializable)
	default:
		m.msg, err = processTypeIDs.decodeBytes(m.id, m.tid, raw)
	}
	if err != nil || unknown != nil {
		m.setRare(func(r *entityRefRare) {
			r.err, r.unknown = err, unknown
			if err != nil && raw != nil {
				r.raw = append([]byte(nil), raw...)
			}
		})
	}
	return protoiface.UnmarshalOutput{Flags: protoiface.UnmarshalInitialized}, nil
}

// ProtoReflect implements proto.Message.
func (m *entityRefMessage) ProtoReflect() protoreflect.Message { return m }

// Reset implements what proto.Reset looks for.
func (m *entityRefMessage) Reset() { *m = entityRefMessage{} }

// String describes the message for logs.
func (m *entityRefMessage) String() string {
	if m == nil {
		return "<nil>"
	}
	return fmt.Sprintf("EntityRef message for entity %q: %v", m.id, m.msg)
}

// Descriptor implements protoreflect.Message.
func (m *entityRefMessage) Descriptor() protoreflect.MessageDescriptor { return entityRefDescriptor }

// Type implements protoreflect.Message.
func (m *entityRefMessage) Type() protoreflect.MessageType { return entityRefType{} }

// New implements protoreflect.Message.
func (m *entityRefMessage) New() protoreflect.Message { return &entityRefMessage{} }

// Interface implements protoreflect.Message.
func (m *entityRefMessage) Interface() protoreflect.ProtoMessage { return m }

// Range implements protoreflect.Message.
func (m *entityRefMessage) Range(f func(protoreflect.FieldDescriptor, protoreflect.Value) bool) {
	for _, fd := range []protoreflect.FieldDescriptor{entityRefFields.id, entityRefFields.tid, entityRefFields.msg} {
		if m.Has(fd) && !f(fd, m.Get(fd)) {
			return
		}
	}
}

// Has implements protoreflect.Message.
func (m *entityRefMessage) Has(fd protoreflect.FieldDescriptor) bool {
	switch fd {
	case entityRefFields.id:
		return m.id != ""
	case entityRefFields.tid:
		return m.tid != 0
	case entityRefFields.msg:
		return m.raw() != nil || m.msg != nil
	}
	return false
}

// Clear implements protoreflect.Message.
func (m *entityRefMessage) Clear(fd protoreflect.FieldDescriptor) {
	switch fd {
	case entityRefFields.id:
		m.id = ""
	case entityRefFields.tid:
		m.tid = 0
	case entityRefFields.msg:
		m.msg, m.innerSize = nil, 0
		m.setRare(func(r *entityRefRare) { r.raw = nil })
	}
}

// Get implements protoreflect.Message.
func (m *entityRefMessage) Get(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd {
	case entityRefFields.id:
		return protoreflect.ValueOfString(m.id)
	case entityRefFields.tid:
		return protoreflect.ValueOfUint32(m.tid)
	case entityRefFields.msg:
		return protoreflect.ValueOfBytes(m.payload())
	}
	return protoreflect.Value{}
}

// Set implements protoreflect.Message; a field not its own is ignored.
func (m *entityRefMessage) Set(fd protoreflect.FieldDescriptor, v protoreflect.Value) {
	switch fd {
	case entityRefFields.id:
		m.id = v.String()
	case entityRefFields.tid:
		m.tid = uint32(v.Uint())
	case entityRefFields.msg:
		m.msg, m.innerSize = nil, 0
		m.setRare(func(r *entityRefRare) { r.raw = v.Bytes() })
	}
}

// Mutable implements protoreflect.Message: no field is composite, so none
// is mutable; it returns the field's value.
func (m *entityRefMessage) Mutable(fd protoreflect.FieldDescriptor) protoreflect.Value {
	return m.Get(fd)
}

// NewField implements protoreflect.Message.
func (m *entityRefMessage) NewField(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd {
	case entityRefFields.id:
		return protoreflect.ValueOfString("")
	case entityRefFields.tid:
		return protoreflect.ValueOfUint32(0)
	case entityRefFields.msg:
		return protoreflect.ValueOfBytes(nil)
	}
	return protoreflect.Value{}
}

// WhichOneof implements protoreflect.Message: it has no oneof.
func (m *entityRefMessage) WhichOneof(protoreflect.OneofDescriptor) protoreflect.FieldDescriptor {
	return nil
}

// GetUnknown implements protoreflect.Message.
func (m *entityRefMessage) GetUnknown() protoreflect.RawFields { return m.unknown() }

// SetUnknown implements protoreflect.Message.
func (m *entityRefMessage) SetUnknown(raw protoreflect.RawFields) {
	m.setRare(func(r *entityRefRare) { r.unknown = raw })
}

// IsValid implements protoreflect.Message.
func (m *entityRefMessage) IsValid() bool { return m != nil }

// ProtoMethods implements protoreflect.Message.
func (m *entityRefMessage) ProtoMethods() *protoiface.Methods { return entityRefMethods }

// New implements protoreflect.MessageType.
func (entityRefType) New() protoreflect.Message { return &entityRefMessage{} }

// Zero implements protoreflect.MessageType: an empty message (not to be
// changed).
func (entityRefType) Zero() protoreflect.Message { return &entityRefMessage{} }

// Descriptor implements protoreflect.MessageType.
func (entityRefType) Descriptor() protoreflect.MessageDescriptor { return entityRefDescriptor }
