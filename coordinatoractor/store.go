package coordinatoractor

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrVersionConflict means the stored state was written by someone else
// since the version the caller read: a newer coordinator has taken over (or
// the state was reset). The caller is stale and must stop acting as
// coordinator; it must not retry the write with a freshly loaded version,
// because that would overwrite the newer coordinator's state.
var ErrVersionConflict = errors.New("coordinator state version conflict: the state was written by another coordinator")

// ErrStateTooLarge means the encoded state is larger than the store can
// hold. Nothing was written; the state in the store is unchanged.
var ErrStateTooLarge = errors.New("coordinator state too large for the store")

// StateStore keeps the coordinator's encoded state so that a coordinator
// that starts elsewhere (after a hand-over or a crash) recovers it. The
// coordinator encodes and decodes the state (a messages.CoordinatorState);
// a store keeps the bytes as they are and never looks inside.
//
// Every write is a check-and-set against the version the writer last read
// or wrote. This is the fencing that keeps two coordinators from both
// writing: once a new coordinator has saved, the old one's next Save fails
// with ErrVersionConflict instead of silently overwriting the newer state.
// Every successful Save moves the version, also when data is what was
// stored already (a new coordinator claims the state by writing back what
// it read).
//
// Package storetest holds the contract tests every implementation runs.
type StateStore interface {
	// Load returns the stored data and its version. When nothing is
	// stored it returns empty data and version 0.
	Load(ctx context.Context) (data []byte, version uint64, err error)
	// Save writes data if the stored version is still version (0: only
	// if nothing is stored) and returns the new version. When the version
	// has moved it returns an error wrapping ErrVersionConflict and the
	// stored data is unchanged. Data larger than the store holds fails
	// with ErrStateTooLarge before anything is written. The store may not
	// keep data itself: the caller may reuse it after Save returns.
	Save(ctx context.Context, data []byte, version uint64) (uint64, error)
}

// MemoryStore is a StateStore in process memory. It survives a
// coordinator's restart on the same node but not the node itself; it is
// the default store and the reference for the check-and-set contract.
//
// It keeps a copy of the data, so that a caller that changes the slice it
// saved, or the one Load returned, cannot change what is stored.
//
// A MemoryStore is safe for use by several goroutines.
type MemoryStore struct {
	mu      sync.Mutex
	data    []byte // immutable once stored
	version uint64 // 0 while nothing is stored
}

var _ StateStore = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore. Its versions start at 0
// (nothing stored) and increase by 1 with every successful Save.
func NewMemoryStore() *MemoryStore { return &MemoryStore{} }

// Load implements StateStore.
func (m *MemoryStore) Load(ctx context.Context) ([]byte, uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("memory state store: load: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return clone(m.data), m.version, nil
}

// Save implements StateStore.
func (m *MemoryStore) Save(ctx context.Context, data []byte, version uint64) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("memory state store: save at version %d: %w", version, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.version != version {
		return 0, fmt.Errorf("memory state store: save at version %d, stored version is %d: %w",
			version, m.version, ErrVersionConflict)
	}
	m.data = clone(data)
	m.version++
	return m.version, nil
}

// clone copies data; empty data stays nil.
func clone(data []byte) []byte {
	if len(data) == 0 {
		return nil
	}
	return append([]byte(nil), data...)
}
