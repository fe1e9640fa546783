package messages

import (
	"errors"
	"fmt"
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

// ErrInvalidID is wrapped by the errors of CheckShardID and CheckEntityID.
var ErrInvalidID = errors.New("invalid identifier")

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
		return fmt.Errorf("empty %s ID: %w", what, ErrInvalidID)
	case len(id) > limit:
		return fmt.Errorf("%s ID of %d bytes, longer than the limit of %d: %w", what, len(id), limit, ErrInvalidID)
	}
	return nil
}
