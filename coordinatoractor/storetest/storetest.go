// Package storetest holds the contract tests of coordinatoractor.StateStore:
// every implementation runs them (coordinatoractor.MemoryStore in package
// coordinatoractor, the Consul store in actorsharding/consulstore) through
// Run with a Harness of its own.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/protoshard/protoshard/coordinatoractor"
)

// Harness adapts one coordinatoractor.StateStore implementation to the
// contract tests.
type Harness struct {
	// NewStore returns a fresh, empty store for one subtest.
	NewStore func(t *testing.T) coordinatoractor.StateStore
}

// Run runs every contract test against h, each as a subtest with a store
// of its own.
func Run(t *testing.T, h Harness) {
	ctx := context.Background()

	t.Run("LoadEmpty", func(t *testing.T) {
		s := h.NewStore(t)
		data, v, err := s.Load(ctx)
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		if v != 0 || len(data) != 0 {
			t.Errorf("Load of an empty store = %d bytes at version %d, want nothing at version 0", len(data), v)
		}
	})

	t.Run("RoundTrip", func(t *testing.T) {
		s := h.NewStore(t)
		want := sample(0)
		v, err := s.Save(ctx, want, 0)
		if err != nil {
			t.Fatalf("Save: %v", err)
		}
		if v == 0 {
			t.Fatalf("Save returned version 0")
		}
		got, gv, err := s.Load(ctx)
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		if gv != v {
			t.Errorf("Load version = %d, Save returned %d", gv, v)
		}
		assertBytes(t, want, got)
	})

	t.Run("CallerBuffersNotKept", func(t *testing.T) {
		s := h.NewStore(t)
		saved := sample(0)
		if _, err := s.Save(ctx, saved, 0); err != nil {
			t.Fatal(err)
		}
		clear(saved)
		loaded, _, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		clear(loaded)
		again, _, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		assertBytes(t, sample(0), again)
	})

	t.Run("VersionIncreases", func(t *testing.T) {
		s := h.NewStore(t)
		var last uint64
		for i := range 4 {
			v, err := s.Save(ctx, sample(i), last)
			if err != nil {
				t.Fatalf("Save #%d at version %d: %v", i, last, err)
			}
			if v <= last {
				t.Fatalf("Save #%d: version %d does not increase on %d", i, v, last)
			}
			data, lv, err := s.Load(ctx)
			if err != nil || lv != v {
				t.Fatalf("Load after Save #%d = version %d, %v; want %d", i, lv, err, v)
			}
			assertBytes(t, sample(i), data)
			last = v
		}
	})

	t.Run("ConflictTwoWriters", func(t *testing.T) {
		s := h.NewStore(t)
		v0, err := s.Save(ctx, sample(0), 0)
		if err != nil {
			t.Fatal(err)
		}
		// Old and new coordinator both read v0.
		_, readOld, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, readNew, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if readOld != v0 || readNew != v0 {
			t.Fatalf("read versions %d, %d; want %d", readOld, readNew, v0)
		}
		vNew, err := s.Save(ctx, sample(1), readNew)
		if err != nil {
			t.Fatalf("new coordinator's Save: %v", err)
		}
		for range 2 { // and it stays refused
			_, err = s.Save(ctx, sample(2), readOld)
			if !errors.Is(err, coordinatoractor.ErrVersionConflict) {
				t.Fatalf("stale coordinator's Save = %v, want ErrVersionConflict", err)
			}
		}
		got, gv, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if gv != vNew {
			t.Errorf("version after refused Save = %d, want %d", gv, vNew)
		}
		assertBytes(t, sample(1), got)
	})

	// A new coordinator claims the state by writing back what it read,
	// often unchanged. That write must still move the version, or a stale
	// coordinator that read the same version would go on writing.
	t.Run("UnchangedSaveMovesTheVersion", func(t *testing.T) {
		s := h.NewStore(t)
		read, err := s.Save(ctx, sample(0), 0)
		if err != nil {
			t.Fatal(err)
		}
		claimed, err := s.Save(ctx, sample(0), read)
		if err != nil {
			t.Fatalf("claim of an unchanged state: %v", err)
		}
		if claimed <= read {
			t.Fatalf("claim of an unchanged state at version %d gave version %d, want a greater one", read, claimed)
		}
		again, err := s.Save(ctx, sample(0), claimed)
		if err != nil || again <= claimed {
			t.Fatalf("second claim at version %d = version %d, %v; want a greater one", claimed, again, err)
		}
		if _, err := s.Save(ctx, sample(1), read); !errors.Is(err, coordinatoractor.ErrVersionConflict) {
			t.Fatalf("stale coordinator's Save at version %d = %v, want ErrVersionConflict", read, err)
		}
	})

	t.Run("CreateOnlyConflict", func(t *testing.T) {
		s := h.NewStore(t)
		v, err := s.Save(ctx, sample(0), 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Save(ctx, sample(1), 0)
		if !errors.Is(err, coordinatoractor.ErrVersionConflict) {
			t.Fatalf("second create-only Save = %v, want ErrVersionConflict", err)
		}
		got, gv, err := s.Load(ctx)
		if err != nil || gv != v {
			t.Fatalf("Load = version %d, %v; want %d", gv, err, v)
		}
		assertBytes(t, sample(0), got)
	})

	t.Run("ConflictOnUnknownVersion", func(t *testing.T) {
		s := h.NewStore(t)
		// Nothing stored: only version 0 may write.
		if _, err := s.Save(ctx, sample(0), 7); !errors.Is(err, coordinatoractor.ErrVersionConflict) {
			t.Fatalf("Save at 7 on empty store = %v, want ErrVersionConflict", err)
		}
		if _, v, err := s.Load(ctx); err != nil || v != 0 {
			t.Fatalf("Load = version %d, %v; want 0 (nothing stored)", v, err)
		}
		v, err := s.Save(ctx, sample(0), 0)
		if err != nil {
			t.Fatal(err)
		}
		// A version from the future is as wrong as one from the past.
		if _, err := s.Save(ctx, sample(1), v+1000); !errors.Is(err, coordinatoractor.ErrVersionConflict) {
			t.Fatalf("Save at %d = %v, want ErrVersionConflict", v+1000, err)
		}
	})

	t.Run("ConcurrentWritersOneWins", func(t *testing.T) {
		s := h.NewStore(t)
		v, err := s.Save(ctx, sample(0), 0)
		if err != nil {
			t.Fatal(err)
		}
		const writers = 8
		var wg sync.WaitGroup
		var wins atomic.Int32
		var winner atomic.Int32
		errs := make([]error, writers)
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.Save(ctx, sample(i+1), v); err == nil {
					wins.Add(1)
					winner.Store(int32(i + 1))
				} else if !errors.Is(err, coordinatoractor.ErrVersionConflict) {
					errs[i] = err
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("unexpected errors: %v", err)
		}
		if got := wins.Load(); got != 1 {
			t.Fatalf("%d writers won the same version, want exactly 1", got)
		}
		got, _, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		assertBytes(t, sample(int(winner.Load())), got)
	})
}

// sample is the i-th test value: binary (every byte value, zeros
// included, as in an encoded state) and different for every i.
func sample(i int) []byte {
	b := make([]byte, 0, 300)
	b = fmt.Appendf(b, "state %d\x00", i)
	for v := range 256 {
		b = append(b, byte(v+i))
	}
	return b
}

func assertBytes(t *testing.T, want, got []byte) {
	t.Helper()
	if !bytes.Equal(want, got) {
		t.Fatalf("stored data differs: want %d bytes %q, got %d bytes %q", len(want), want, len(got), got)
	}
}
