// Package wire checks what travels in protoshard's wire protocol
// (package messages): the limits of identifiers, and whether a message is
// one of the protocol's own.
package wire

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/protoshard/protoshard/messages"
)

// Limits of identifiers that travel in the protocol. They keep one
// message from any peer or user from growing the coordinator's state past
// what its store can write (Consul caps a transaction at 512 KiB), and
// keep actor names of a sane size.
const (
	// MaxShardIDLength is the longest shard ID, in bytes.
	MaxShardIDLength = 4096
	// MaxEntityIDLength is the longest entity ID, in bytes.
	MaxEntityIDLength = 4096
	// MaxExtractorNameLength is the longest extractor name a Register
	// carries, in bytes: the coordinator keeps it once per region.
	MaxExtractorNameLength = 256
)

// CheckShardID reports why id cannot be a shard ID, or nil.
func CheckShardID(id string) error {
	return checkID("shard", id, MaxShardIDLength)
}

// CheckEntityID reports why id cannot be an entity ID, or nil.
func CheckEntityID(id string) error {
	return checkID("entity", id, MaxEntityIDLength)
}

func checkID(what, id string, limit int) error {
	switch {
	case id == "":
		return fmt.Errorf("empty %s ID: %w", what, messages.ErrInvalidID)
	case len(id) > limit:
		return fmt.Errorf("%s ID of %d bytes, longer than the limit of %d: %w", what, len(id), limit, messages.ErrInvalidID)
	}
	return nil
}

// IsProtocol reports whether msg is one of protoshard's own wire messages
// (any type of package messages' .proto files, package protoshard) rather
// than an application's.
func IsProtocol(msg any) bool {
	m, ok := msg.(proto.Message)
	return ok && m.ProtoReflect().Descriptor().ParentFile().Package() == messages.File_sharding_proto.Package()
}
