// Package remembertest holds the contract tests of
// shardactor.RememberEntitiesStore: every implementation runs them
// (shardactor.MemoryRememberEntitiesStore in package shardactor, the Consul
// store in actorsharding/consulstore) through Run with a Harness of its
// own.
package remembertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/protoshard/protoshard/internal/testsupport"
	"github.com/protoshard/protoshard/shardactor"
)

// Store is a RememberEntitiesStore under test with its write counter.
type Store interface {
	shardactor.RememberEntitiesStore
	// Writes returns the number of write requests the store has sent.
	Writes() int64
}

// Harness adapts one RememberEntitiesStore implementation to the contract
// tests.
type Harness struct {
	// NewStore returns a fresh, empty store (its own key space).
	NewStore func(t *testing.T) Store
	// MaxBurstWrites is what one Update of any number of new IDs into an
	// empty shard may cost at most.
	MaxBurstWrites int64
	// Corrupt damages the stored entities of shardID, so that reading them
	// must fail; nil when the store keeps nothing serialised.
	Corrupt func(t *testing.T, s Store, shardID string)
}

// Run runs every contract test against h, each as a subtest with a store
// of its own.
func Run(t *testing.T, h Harness) {
	ctx := context.Background()

	t.Run("RememberEmptyShard", func(t *testing.T) {
		s := h.NewStore(t)
		ids, err := s.GetEntities(ctx, "0")
		require.NoError(t, err)
		require.Empty(t, ids)
		require.NoError(t, s.Update(ctx, "0", nil, nil))
		require.Zero(t, s.Writes(), "an empty update writes nothing")
	})

	t.Run("RememberAddRemove", func(t *testing.T) {
		s := h.NewStore(t)
		require.NoError(t, s.Update(ctx, "7", []string{"c", "a", "b"}, nil))
		testsupport.RequireEntities(t, s, "7", "a", "b", "c")
		require.NoError(t, s.Update(ctx, "7", []string{"d"}, []string{"b"}))
		testsupport.RequireEntities(t, s, "7", "a", "c", "d")
		require.NoError(t, s.Update(ctx, "7", nil, []string{"a", "c", "d"}))
		testsupport.RequireEntities(t, s, "7")
		require.NoError(t, s.Update(ctx, "7", []string{"b"}, nil))
		testsupport.RequireEntities(t, s, "7", "b")
	})

	t.Run("RememberIdempotent", func(t *testing.T) {
		s := h.NewStore(t)
		require.NoError(t, s.Update(ctx, "1", []string{"x", "y", "x"}, nil))
		w := s.Writes()
		require.NoError(t, s.Update(ctx, "1", []string{"x", "y"}, nil), "adding remembered IDs")
		require.NoError(t, s.Update(ctx, "1", nil, []string{"unknown"}), "removing an unknown ID")
		require.NoError(t, s.Update(ctx, "other", nil, []string{"x"}), "removing from an empty shard")
		require.Equal(t, w, s.Writes(), "updates that change nothing write nothing")
		testsupport.RequireEntities(t, s, "1", "x", "y")
		require.NoError(t, s.Update(ctx, "1", nil, []string{"x"}))
		require.NoError(t, s.Update(ctx, "1", nil, []string{"x"}))
		testsupport.RequireEntities(t, s, "1", "y")
	})

	t.Run("RememberBurst10k", func(t *testing.T) {
		s := h.NewStore(t)
		ids := testsupport.EntityIDs("burst", 10_000)
		require.NoError(t, s.Update(ctx, "3", ids, nil))
		require.LessOrEqual(t, s.Writes(), h.MaxBurstWrites, "10,000 new IDs in one update")
		testsupport.RequireEntities(t, s, "3", ids...)
		// Removing them all is a burst too.
		w := s.Writes()
		require.NoError(t, s.Update(ctx, "3", nil, ids))
		require.LessOrEqual(t, s.Writes()-w, h.MaxBurstWrites, "10,000 stopped IDs in one update")
		testsupport.RequireEntities(t, s, "3")
	})

	t.Run("RememberOddIDs", func(t *testing.T) {
		s := h.NewStore(t)
		odd := []string{
			"a/b", "/", "//x/", "ünïcødé", "日本語", "🙂", "with space", " ", "%", "%2F", "50%",
			"a\nb", "\t", "\x01", `back\slash`, `"quoted"`, "$1", ".", "..", "a?b#c", "+",
			strings.Repeat("long/", 2000), strings.Repeat("ü", 5000),
		}
		shards := []string{"plain", "a/b", "..", ".", "%", "%2F", "s p", "ü", "/"}
		for _, sh := range shards {
			require.NoError(t, s.Update(ctx, sh, append([]string{"shard:" + sh}, odd...), nil), "shard %q", sh)
		}
		for _, sh := range shards {
			testsupport.RequireEntities(t, s, sh, append([]string{"shard:" + sh}, odd...)...)
		}
		require.NoError(t, s.Update(ctx, "a/b", nil, odd))
		testsupport.RequireEntities(t, s, "a/b", "shard:a/b")
		testsupport.RequireEntities(t, s, "%2F", append([]string{"shard:%2F"}, odd...)...)
	})

	t.Run("RememberShardsIndependent", func(t *testing.T) {
		s := h.NewStore(t)
		// "1" is a prefix of "10", and "1/0" would be a sub-key of "1"
		// without escaping.
		require.NoError(t, s.Update(ctx, "1", []string{"a", "b"}, nil))
		require.NoError(t, s.Update(ctx, "10", []string{"b", "c"}, nil))
		require.NoError(t, s.Update(ctx, "1/0", []string{"d"}, nil))
		require.NoError(t, s.Update(ctx, "1", nil, []string{"b"}))
		testsupport.RequireEntities(t, s, "1", "a")
		testsupport.RequireEntities(t, s, "10", "b", "c")
		testsupport.RequireEntities(t, s, "1/0", "d")
		testsupport.RequireEntities(t, s, "2")
	})

	t.Run("RememberConcurrentUpdates", func(t *testing.T) {
		s := h.NewStore(t)
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		var want []string
		for g := range 2 {
			// Each writer adds batches, and removes every fourth of its
			// own IDs later, as a shard would on passivation.
			var mine []string
			for b := range 30 {
				for i := range 20 {
					id := fmt.Sprintf("g%d-%02d-%02d", g, b, i)
					mine = append(mine, id)
					if i%4 != 0 {
						want = append(want, id)
					}
				}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for b := range 30 {
					started := mine[b*20 : b*20+20]
					var stopped []string
					if b > 0 {
						for i, id := range mine[(b-1)*20 : b*20] {
							if i%4 == 0 {
								stopped = append(stopped, id)
							}
						}
					}
					if err := s.Update(ctx, "hot", started, stopped); err != nil {
						errs <- err
						return
					}
				}
				var last []string
				for i, id := range mine[29*20:] {
					if i%4 == 0 {
						last = append(last, id)
					}
				}
				if err := s.Update(ctx, "hot", nil, last); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		slices.Sort(want)
		testsupport.RequireEntities(t, s, "hot", want...)
	})

	t.Run("RememberCorruptBucket", func(t *testing.T) {
		if h.Corrupt == nil {
			t.Skip("the store keeps nothing serialised")
		}
		s := h.NewStore(t)
		require.NoError(t, s.Update(ctx, "9", testsupport.EntityIDs("c", 100), nil))
		h.Corrupt(t, s, "9")
		_, err := s.GetEntities(ctx, "9")
		require.ErrorIs(t, err, shardactor.ErrCorruptRememberedEntities)
		require.ErrorIs(t, err, shardactor.ErrPermanent, "reading it again finds the same damage")
		require.Contains(t, err.Error(), `shard "9"`)
		w := s.Writes()
		err = s.Update(ctx, "9", testsupport.EntityIDs("more", 100), nil)
		require.ErrorIs(t, err, shardactor.ErrCorruptRememberedEntities)
		require.Equal(t, w, s.Writes(), "nothing written over a damaged bucket")
		_, err = s.GetEntities(ctx, "9")
		require.ErrorIs(t, err, shardactor.ErrCorruptRememberedEntities, "still damaged, not overwritten")
		testsupport.RequireEntities(t, s, "8") // other shards unaffected
	})

	t.Run("RememberCancelledContext", func(t *testing.T) {
		s := h.NewStore(t)
		require.NoError(t, s.Update(ctx, "5", []string{"a"}, nil))
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := s.GetEntities(cctx, "5")
		require.ErrorIs(t, err, context.Canceled)
		require.NotErrorIs(t, err, shardactor.ErrPermanent, "a time-out or cancellation is transient")
		err = s.Update(cctx, "5", []string{"b"}, nil)
		require.ErrorIs(t, err, context.Canceled)
		require.NotErrorIs(t, err, shardactor.ErrPermanent)
		testsupport.RequireEntities(t, s, "5", "a")
	})

	t.Run("RememberInvalidUpdates", func(t *testing.T) {
		// Each is refused for good: repeating it cannot help.
		s := h.NewStore(t)
		require.ErrorIs(t, s.Update(ctx, "", []string{"a"}, nil), shardactor.ErrPermanent, "empty shard ID")
		_, err := s.GetEntities(ctx, "")
		require.ErrorIs(t, err, shardactor.ErrPermanent, "empty shard ID")
		require.ErrorIs(t, s.Update(ctx, "1", []string{"a", ""}, nil), shardactor.ErrPermanent, "empty entity ID")
		require.ErrorIs(t, s.Update(ctx, "1", []string{"a", "\xff"}, nil), shardactor.ErrPermanent, "invalid UTF-8")
		require.ErrorIs(t, s.Update(ctx, "1", []string{"a", "b"}, []string{"b"}), shardactor.ErrPermanent, "started and stopped")
		require.Zero(t, s.Writes())
		testsupport.RequireEntities(t, s, "1")
	})
}
