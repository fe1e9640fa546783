package shardeddaemonprocess

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrStaleRevision: a Save would take the stored number of processes back
// to an older revision (or reopen a completed change); the coordinator
// that tried is not the current one.
var ErrStaleRevision = errors.New("shardeddaemonprocess: stale revision")

// Store keeps a daemon process's number of processes and revision, so that
// a coordinator that starts on another node (the previous oldest left or
// crashed) continues where its predecessor was.
type Store interface {
	// Load returns the stored state; false if nothing is stored yet.
	Load(ctx context.Context) (Processes, bool, error)
	// Save stores p. It fails with ErrStaleRevision when p is older than
	// the stored state: a lower revision, or the stored revision
	// completed and p not.
	Save(ctx context.Context, p Processes) error
}

// MemoryStore is a Store in memory, for the members of one process.
type MemoryStore struct {
	mu     sync.Mutex
	stored Processes
	ok     bool
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{} }

// Load implements Store.
func (s *MemoryStore) Load(context.Context) (Processes, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stored, s.ok, nil
}

// Save implements Store.
func (s *MemoryStore) Save(_ context.Context, p Processes) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ok && !p.Supersedes(s.stored) {
		return fmt.Errorf("saving revision %d (completed %t) over %d (completed %t): %w",
			p.Revision, p.Completed, s.stored.Revision, s.stored.Completed, ErrStaleRevision)
	}
	s.stored, s.ok = p, true
	return nil
}

// Supersedes reports whether p may replace stored in a Store: a higher
// revision, or the same revision and count with a change not reopened.
// Every Store checks it before it writes.
func (p Processes) Supersedes(stored Processes) bool {
	switch {
	case p.Revision != stored.Revision:
		return p.Revision > stored.Revision
	case stored.Completed:
		return p.Completed && p.Count == stored.Count
	default:
		return p.Count == stored.Count
	}
}
