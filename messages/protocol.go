package messages

import "google.golang.org/protobuf/proto"

// IsProtocol reports whether msg is one of protoshard's own wire messages
// (any type of this package's .proto files, package protoshard) rather
// than an application's.
func IsProtocol(msg any) bool {
	m, ok := msg.(proto.Message)
	return ok && m.ProtoReflect().Descriptor().ParentFile().Package() == File_sharding_proto.Package()
}
