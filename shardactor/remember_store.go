package shardactor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/protoshard/protoshard/internal/rememberupdate"
)

// RememberEntitiesStore keeps, per entity type and shard, the IDs of the
// entities that run (Akka's RememberEntitiesShardStore). With
// remember-entities on, a shard records every entity it starts and every
// entity that stops on purpose (passivation), and a shard that starts again
// (after a rebalance, a crash or a full cluster restart) starts all the
// entities GetEntities returns, without waiting for a message.
//
// One store serves one entity type; implementations are safe for use by
// several goroutines, and several nodes may share the stored data (the Consul
// store), because during a hand-off race two nodes can briefly write the same
// shard.
type RememberEntitiesStore interface {
	// GetEntities returns the remembered IDs of a shard, sorted and without
	// duplicates; none (nil) for a shard never written.
	GetEntities(ctx context.Context, shardID string) ([]string, error)
	// Update records in one batch the entities started and stopped in a
	// shard. A burst of N new entities must cost far fewer than N writes, so
	// a shard collects the changes that arrive while a write is in flight and
	// sends them in the next Update. Adding a remembered ID or removing an
	// unknown one changes nothing (Update is idempotent, so a failed Update
	// may simply be repeated). An ID in both lists, an empty ID or one that
	// is not valid UTF-8 (IDs travel as protobuf strings) is an error, and
	// nothing is written.
	Update(ctx context.Context, shardID string, started, stopped []string) error
}

// ErrPermanent is what a RememberEntitiesStore error wraps when repeating
// the same call can never succeed: the store refuses the update as such
// (an invalid ID, a value too large for the store), or what it has stored
// cannot be read (corrupt data). Every other error (a time-out, a store
// that cannot be reached, a lost race) is taken as transient.
//
// A shard retries a transient error with a back-off, and drops the
// messages that wait for the store longer than a bound. On a permanent
// error it drops the messages of the entities concerned with the error as
// reason and stops, as Akka's shard stops when its store fails; its region
// starts it again after Settings.ShardFailureBackoff.
// ErrTooManyRememberedEntities and ErrCorruptRememberedEntities are
// permanent.
var ErrPermanent = errors.New("permanent remember-entities store error")

// permanentError is an error that errors.Is finds to be ErrPermanent as
// well as itself.
type permanentError struct{ msg string }

func (e *permanentError) Error() string        { return e.msg }
func (e *permanentError) Is(target error) bool { return target == ErrPermanent }

// ErrTooManyRememberedEntities is returned (wrapped) by an Update that would
// take a shard's remembered entities beyond the store's capacity (an ID
// too large counts too). Nothing of that Update is written. It is
// permanent (errors.Is(err, ErrPermanent)).
var ErrTooManyRememberedEntities error = &permanentError{"too many remembered entities in the shard"}

// ErrCorruptRememberedEntities is returned (wrapped) when stored remembered
// entities cannot be read back. The damaged value is left as it is, for a
// human to look at: rewriting it could lose entities. It is permanent
// (errors.Is(err, ErrPermanent)).
var ErrCorruptRememberedEntities error = &permanentError{"corrupt remembered entities"}

// ErrInvalidUpdate is returned (wrapped) by a RememberEntitiesStore call
// whose arguments are invalid: an empty shard ID, an empty or non-UTF-8
// entity ID, an ID both started and stopped in one Update. It is
// permanent (errors.Is(err, ErrPermanent)).
var ErrInvalidUpdate error = &permanentError{"invalid remember-entities call"}

// MemoryRememberEntitiesStore is a RememberEntitiesStore in memory. It
// survives rebalances and crashes of nodes that live in the same process (one
// store shared by the nodes of a test, for example), not the process.
//
// It is safe for use by several goroutines.
type MemoryRememberEntitiesStore struct {
	mu     sync.Mutex
	shards map[string]map[string]struct{}
	writes atomic.Int64
}

var _ RememberEntitiesStore = (*MemoryRememberEntitiesStore)(nil)

// NewMemoryRememberEntitiesStore returns an empty in-memory store.
func NewMemoryRememberEntitiesStore() *MemoryRememberEntitiesStore {
	return &MemoryRememberEntitiesStore{shards: make(map[string]map[string]struct{})}
}

// GetEntities implements RememberEntitiesStore.
func (s *MemoryRememberEntitiesStore) GetEntities(ctx context.Context, shardID string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memory remember-entities store: shard %q: get entities: %w", shardID, err)
	}
	if shardID == "" {
		return nil, fmt.Errorf("memory remember-entities store: get entities: %w: empty shard ID", ErrInvalidUpdate)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.shards[shardID]
	if len(set) == 0 {
		return nil, nil
	}
	ids := make([]string, 0, len(set))
	for id := range set {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

// Update implements RememberEntitiesStore. An Update that changes something
// counts as one write (see Writes), like one Consul transaction.
func (s *MemoryRememberEntitiesStore) Update(ctx context.Context, shardID string, started, stopped []string) error {
	if err := rememberupdate.Validate(ctx, shardID, started, stopped, ErrInvalidUpdate); err != nil {
		return fmt.Errorf("memory remember-entities store: shard %q: update: %w", shardID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.shards[shardID]
	changed := false
	for _, id := range started {
		if _, ok := set[id]; ok {
			continue
		}
		if set == nil {
			set = make(map[string]struct{}, len(started))
			s.shards[shardID] = set
		}
		set[id] = struct{}{}
		changed = true
	}
	for _, id := range stopped {
		if _, ok := set[id]; ok {
			delete(set, id)
			changed = true
		}
	}
	if set != nil && len(set) == 0 {
		// Like the Consul store, which deletes emptied buckets: a shard
		// whose entities all stopped leaves nothing behind.
		delete(s.shards, shardID)
	}
	if changed {
		s.writes.Add(1)
	}
	return nil
}

// Writes returns the number of Updates that changed the stored entities, to
// compare the memory store's batching with the Consul store's in tests.
func (s *MemoryRememberEntitiesStore) Writes() int64 { return s.writes.Load() }
