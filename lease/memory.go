package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// MemoryLeases is a set of in-memory leases shared by the nodes of one
// process: tests, and clusters over in-process membership. Give the same
// MemoryLeases to every node (it is their Provider). Fencing tokens count up
// from 1 across all its leases.
//
// Revoke makes a holder lose its lease, as failed heartbeats would. A
// revoked lease stays unavailable to others until its holder has released
// it (or acquired it again): the holder stops what the lease protected and
// then releases, which stands in for the margin a real lease gives (see
// lease/consul: the holder declares the loss well before the lease store
// hands the lease to anybody else). A MemoryLeases is safe for concurrent
// use; its zero value is not usable, use NewMemoryLeases.
type MemoryLeases struct {
	mu        sync.Mutex
	entries   map[string]*memoryEntry
	lastToken uint64
}

// memoryEntry is one lease name's state.
type memoryEntry struct {
	holder  *memoryLease // nil: free
	token   uint64
	revoked bool // the holder was told it lost the lease and has not released it yet
}

// NewMemoryLeases returns an empty set of in-memory leases.
func NewMemoryLeases() *MemoryLeases {
	return &MemoryLeases{entries: map[string]*memoryEntry{}}
}

var _ Provider = (*MemoryLeases)(nil)

// NewLease implements Provider: a new holder of the lease leaseName.
func (m *MemoryLeases) NewLease(leaseName, ownerName string) (Lease, error) {
	if leaseName == "" {
		return nil, errors.New("lease: lease name is empty")
	}
	return &memoryLease{leases: m, name: leaseName, owner: ownerName}, nil
}

// Revoke makes the current holder of leaseName lose it: its CheckLease turns
// false and its lease-lost callback runs (before Revoke returns). Others can
// acquire the lease once the holder has released it. It returns the holder's
// owner name, or false when nobody held the lease.
func (m *MemoryLeases) Revoke(leaseName string) (owner string, revoked bool) {
	m.mu.Lock()
	e := m.entries[leaseName]
	if e == nil || e.holder == nil || e.revoked {
		m.mu.Unlock()
		return "", false
	}
	e.revoked = true
	holder := e.holder
	lost := holder.lost
	holder.lost = nil
	m.mu.Unlock()
	if lost != nil {
		lost(fmt.Errorf("%w: %q revoked from %q", ErrLost, leaseName, holder.owner))
	}
	return holder.owner, true
}

// Holder returns the owner name and fencing token of the current holder of
// leaseName; ok is false when the lease is free or its holder was revoked.
func (m *MemoryLeases) Holder(leaseName string) (owner string, token uint64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[leaseName]
	if e == nil || e.holder == nil || e.revoked {
		return "", 0, false
	}
	return e.holder.owner, e.token, true
}

// memoryLease is one holder's handle; its state lives in the entry, guarded
// by MemoryLeases.mu.
type memoryLease struct {
	leases *MemoryLeases
	name   string
	owner  string
	lost   LostFunc // guarded by leases.mu
}

func (l *memoryLease) Acquire(ctx context.Context, leaseLost LostFunc) (uint64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, fmt.Errorf("lease %q: acquire: %w", l.name, err)
	}
	m := l.leases
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[l.name]
	if e == nil {
		e = &memoryEntry{}
		m.entries[l.name] = e
	}
	switch {
	case e.holder == l && !e.revoked:
		l.lost = leaseLost
		return e.token, true, nil
	case e.holder == nil || e.holder == l: // free, or this holder's own revoked holding
		m.lastToken++
		e.holder, e.token, e.revoked = l, m.lastToken, false
		l.lost = leaseLost
		return e.token, true, nil
	default:
		return 0, false, nil
	}
}

func (l *memoryLease) Release(ctx context.Context) (bool, error) {
	m := l.leases
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[l.name]
	if e == nil || e.holder != l {
		return false, nil
	}
	wasHeld := !e.revoked
	e.holder, e.revoked = nil, false
	l.lost = nil
	return wasHeld, nil
}

func (l *memoryLease) CheckLease() bool {
	m := l.leases
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[l.name]
	return e != nil && e.holder == l && !e.revoked
}
