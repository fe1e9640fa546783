package caslease

import (
	"context"
	"errors"
	"sync"
)

// errBadRecord: the key holds something that is not a lease record (another
// kind of lease uses it, or it was written by hand). The lease treats it as
// an error, never as a free lease.
var errBadRecord = errors.New("not a compare-and-set lease record")

// Store is a key-value store with compare-and-set: all the lease needs.
// Versions grow with every write of a key; 0 means absent.
type Store interface {
	// Get reads key: its value and version, found false when absent.
	Get(ctx context.Context, key string) (value []byte, version uint64, found bool, err error)
	// CAS writes value to key if its version is still version (0: only if
	// absent). ok is false when the version differed; newVersion is the
	// version of the write.
	CAS(ctx context.Context, key string, value []byte, version uint64) (newVersion uint64, ok bool, err error)
}

// MemoryStore is an in-memory Store for tests and in-process clusters:
// versions come from one counter, as Consul's Raft index does, so they grow
// across keys and deletions. Safe for concurrent use; the zero value is
// ready.
type MemoryStore struct {
	mu    sync.Mutex
	index uint64
	keys  map[string]memoryValue
}

type memoryValue struct {
	value   []byte
	version uint64
}

var _ Store = (*MemoryStore)(nil)

// Get implements Store.
func (m *MemoryStore) Get(ctx context.Context, key string) ([]byte, uint64, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.keys[key]
	if !ok {
		return nil, 0, false, nil
	}
	return append([]byte(nil), v.value...), v.version, true, nil
}

// CAS implements Store.
func (m *MemoryStore) CAS(ctx context.Context, key string, value []byte, version uint64) (uint64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.keys[key].version != version {
		return 0, false, nil
	}
	if m.keys == nil {
		m.keys = map[string]memoryValue{}
	}
	m.index++
	m.keys[key] = memoryValue{value: append([]byte(nil), value...), version: m.index}
	return m.index, true, nil
}
