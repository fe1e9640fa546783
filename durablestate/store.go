// Package durablestate keeps one record of state per sharded entity, as
// Akka's DurableStateBehavior does: an entity loads its record when it
// starts and saves it as it changes, and a stale incarnation of the entity
// (a copy that still runs on a paused or cut-off node while its successor
// runs elsewhere) cannot overwrite what a newer incarnation saved.
//
// Each record is {revision, token, payload}. A save is a check-and-set on
// the revision, and it also carries the fencing token of the incarnation
// that writes: the store refuses a token lower than the one it holds
// (ErrFenced). Recover gives every incarnation a token higher than any
// before it, so the older of two incarnations is refused at its next save
// and stops (see Recover for why the order holds).
package durablestate

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Record is an entity's stored state. Revision 0 means there is none:
// the entity was never saved, and Token and Payload are zero.
type Record struct {
	// Revision is the record's version: every save moves it, and a save
	// names the revision it replaces.
	Revision uint64
	// Token is the fencing token of the incarnation that saved the record
	// last: the highest token the store has accepted for the entity.
	Token uint64
	// Payload is the entity's encoded state, as the entity saved it.
	Payload []byte
}

// Store keeps the durable state of the entities of one entity type. Every
// node of the type must share it (one MemoryStore for nodes in one
// process, or a durablestate/consul Store on one Consul).
//
// The contract, which durablestate/storetest checks, is:
//   - Load returns the entity's record, or revision 0 when there is none.
//   - Save writes payload and token as the entity's record if the stored
//     revision is expectedRevision (0: no record yet) and the stored token
//     is at most token, and returns the new revision, which is greater
//     than expectedRevision and than every revision the store returned for
//     the entity before, even when payload and token are as stored.
//   - A Save with a token lower than the stored one fails with an error
//     wrapping ErrFenced, whatever its revision; otherwise a Save whose
//     revision is not the stored one fails with an error wrapping
//     ErrRevisionConflict. A refused Save changes nothing.
//   - An empty entity ID fails with an error wrapping ErrInvalidEntity.
type Store interface {
	Load(ctx context.Context, entityID string) (Record, error)
	Save(ctx context.Context, entityID string, payload []byte, expectedRevision, token uint64) (uint64, error)
}

var (
	// ErrRevisionConflict: the record's revision is not the one the save
	// expected; another write came in between.
	ErrRevisionConflict = errors.New("durable state: revision conflict")
	// ErrFenced: the save's fencing token is lower than the stored one; a
	// newer incarnation of the entity has written, and the writer is
	// stale.
	ErrFenced = errors.New("durable state: fenced by a newer incarnation")
	// ErrInvalidEntity: the entity ID cannot name a record (it is empty).
	ErrInvalidEntity = errors.New("durable state: invalid entity ID")
)

// Check returns the error of a save of an entity whose stored record is
// stored, at expectedRevision with token, or nil when the store may
// write: ErrFenced before ErrRevisionConflict, so that a stale incarnation
// learns that it is stale. Every Store decides with it.
func Check(stored Record, expectedRevision, token uint64) error {
	if token < stored.Token {
		return fmt.Errorf("token %d, stored token %d: %w", token, stored.Token, ErrFenced)
	}
	if expectedRevision != stored.Revision {
		return fmt.Errorf("expected revision %d, stored revision %d: %w", expectedRevision, stored.Revision, ErrRevisionConflict)
	}
	return nil
}

// MemoryStore is a Store in memory, for nodes in one process and tests.
// It is safe for use by several goroutines.
type MemoryStore struct {
	mu      sync.Mutex
	records map[string]Record
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{records: map[string]Record{}}
}

// Load implements Store.
func (m *MemoryStore) Load(_ context.Context, entityID string) (Record, error) {
	if entityID == "" {
		return Record{}, fmt.Errorf("durable state: load: %w", ErrInvalidEntity)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.records[entityID]
	r.Payload = clone(r.Payload)
	return r, nil
}

// Save implements Store.
func (m *MemoryStore) Save(_ context.Context, entityID string, payload []byte, expectedRevision, token uint64) (uint64, error) {
	if entityID == "" {
		return 0, fmt.Errorf("durable state: save: %w", ErrInvalidEntity)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	stored := m.records[entityID]
	if err := Check(stored, expectedRevision, token); err != nil {
		return 0, fmt.Errorf("durable state: save of entity %q: %w", entityID, err)
	}
	r := Record{Revision: stored.Revision + 1, Token: token, Payload: clone(payload)}
	m.records[entityID] = r
	return r.Revision, nil
}

// clone copies b, so that neither the caller nor the store sees the
// other's later changes; nil stays nil.
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
