package messages

import "errors"

// ErrInvalidID is wrapped by the error that refuses an empty shard or
// entity ID, or one longer than 4096 bytes (the protocol's limit: one
// message from any peer or user must not grow the coordinator's state past
// what its store can write).
var ErrInvalidID = errors.New("invalid identifier")
