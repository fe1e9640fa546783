// Package storetest holds the contract tests of durablestate.Store: every
// implementation runs them (durablestate.MemoryStore in package
// durablestate, the Consul store in durablestate/consul) through Run.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/protoshard/protoshard/durablestate"
)

// Run runs every contract test, each as a subtest with a fresh, empty
// store from newStore.
func Run(t *testing.T, newStore func(t *testing.T) durablestate.Store) {
	ctx := context.Background()

	t.Run("LoadMissing", func(t *testing.T) {
		s := newStore(t)
		r, err := s.Load(ctx, "nobody")
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		if r.Revision != 0 || r.Token != 0 || len(r.Payload) != 0 {
			t.Errorf("missing record = %+v, want revision 0, token 0, no payload", r)
		}
	})

	t.Run("RoundTrip", func(t *testing.T) {
		s := newStore(t)
		payload := []byte{0, 1, 2, 0xff, 'x'}
		rev, err := s.Save(ctx, "a/b c", payload, 0, 7)
		if err != nil {
			t.Fatalf("Save: %v", err)
		}
		if rev == 0 {
			t.Fatal("Save returned revision 0")
		}
		payload[0] = 9 // the store keeps its own copy
		want(t, s, "a/b c", durablestate.Record{Revision: rev, Token: 7, Payload: []byte{0, 1, 2, 0xff, 'x'}})
		if r, err := s.Load(ctx, "a/b"); err != nil || r.Revision != 0 {
			t.Errorf("Load of another entity = %+v, %v; want no record", r, err)
		}
	})

	// Every save moves the revision, also one that writes back the payload
	// and token as stored: otherwise a writer holding the old revision
	// would still succeed.
	t.Run("EverySaveMovesTheRevision", func(t *testing.T) {
		s := newStore(t)
		var last uint64
		var revs []uint64
		for range 3 {
			rev, err := s.Save(ctx, "e", []byte("same"), last, 1)
			if err != nil {
				t.Fatalf("Save at revision %d: %v", last, err)
			}
			if rev <= last {
				t.Fatalf("Save at revision %d gave revision %d, want a greater one", last, rev)
			}
			revs = append(revs, last)
			last = rev
		}
		for _, old := range revs {
			if _, err := s.Save(ctx, "e", []byte("same"), old, 1); !errors.Is(err, durablestate.ErrRevisionConflict) {
				t.Fatalf("Save at old revision %d = %v, want ErrRevisionConflict", old, err)
			}
		}
		want(t, s, "e", durablestate.Record{Revision: last, Token: 1, Payload: []byte("same")})
	})

	t.Run("RevisionConflict", func(t *testing.T) {
		s := newStore(t)
		if _, err := s.Save(ctx, "e", []byte("new"), 5, 1); !errors.Is(err, durablestate.ErrRevisionConflict) {
			t.Fatalf("Save of a missing record at revision 5 = %v, want ErrRevisionConflict", err)
		}
		rev, err := s.Save(ctx, "e", []byte("first"), 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Save(ctx, "e", []byte("create again"), 0, 1); !errors.Is(err, durablestate.ErrRevisionConflict) {
			t.Fatalf("create-only Save of an existing record = %v, want ErrRevisionConflict", err)
		}
		if _, err := s.Save(ctx, "e", []byte("ahead"), rev+1000, 1); !errors.Is(err, durablestate.ErrRevisionConflict) {
			t.Fatalf("Save at a future revision = %v, want ErrRevisionConflict", err)
		}
		want(t, s, "e", durablestate.Record{Revision: rev, Token: 1, Payload: []byte("first")})
	})

	// The newer incarnation (token 2) has written; the older one (token 1)
	// is refused whether it names the stored revision or an old one, and
	// the refusal says fenced, not conflict.
	t.Run("LowerTokenIsFenced", func(t *testing.T) {
		s := newStore(t)
		old, err := s.Save(ctx, "e", []byte("by 1"), 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		cur, err := s.Save(ctx, "e", []byte("by 2"), old, 2)
		if err != nil {
			t.Fatalf("higher token's Save: %v", err)
		}
		for _, rev := range []uint64{old, cur} {
			if _, err := s.Save(ctx, "e", []byte("stale"), rev, 1); !errors.Is(err, durablestate.ErrFenced) {
				t.Fatalf("token 1's Save at revision %d = %v, want ErrFenced", rev, err)
			}
		}
		want(t, s, "e", durablestate.Record{Revision: cur, Token: 2, Payload: []byte("by 2")})
		// An equal token writes on, a higher one takes over.
		next, err := s.Save(ctx, "e", []byte("by 2 again"), cur, 2)
		if err != nil {
			t.Fatalf("equal token's Save: %v", err)
		}
		if _, err := s.Save(ctx, "e", []byte("by 9"), next, 9); err != nil {
			t.Fatalf("higher token's Save: %v", err)
		}
	})

	t.Run("EmptyPayload", func(t *testing.T) {
		s := newStore(t)
		rev, err := s.Save(ctx, "e", nil, 0, 3)
		if err != nil {
			t.Fatal(err)
		}
		want(t, s, "e", durablestate.Record{Revision: rev, Token: 3})
	})

	t.Run("EmptyEntityID", func(t *testing.T) {
		s := newStore(t)
		if _, err := s.Load(ctx, ""); !errors.Is(err, durablestate.ErrInvalidEntity) {
			t.Errorf("Load(\"\") = %v, want ErrInvalidEntity", err)
		}
		if _, err := s.Save(ctx, "", []byte("x"), 0, 1); !errors.Is(err, durablestate.ErrInvalidEntity) {
			t.Errorf("Save(\"\") = %v, want ErrInvalidEntity", err)
		}
	})

	// Writers race from one revision: exactly one wins each round.
	t.Run("ConcurrentSavesOneWins", func(t *testing.T) {
		s := newStore(t)
		var rev uint64
		for round := range 3 {
			var wg sync.WaitGroup
			results := make([]error, 4)
			revs := make([]uint64, 4)
			for i := range results {
				wg.Add(1)
				go func() {
					defer wg.Done()
					revs[i], results[i] = s.Save(ctx, "e", []byte{byte(round), byte(i)}, rev, 1)
				}()
			}
			wg.Wait()
			won := -1
			for i, err := range results {
				switch {
				case err == nil && won >= 0:
					t.Fatalf("round %d: writers %d and %d both saved at revision %d", round, won, i, rev)
				case err == nil:
					won = i
				case !errors.Is(err, durablestate.ErrRevisionConflict):
					t.Fatalf("round %d: writer %d: %v, want ErrRevisionConflict", round, i, err)
				}
			}
			if won < 0 {
				t.Fatalf("round %d: no writer saved", round)
			}
			rev = revs[won]
			want(t, s, "e", durablestate.Record{Revision: rev, Token: 1, Payload: []byte{byte(round), byte(won)}})
		}
	})
}

// want checks the record s holds for entityID.
func want(t *testing.T, s durablestate.Store, entityID string, w durablestate.Record) {
	t.Helper()
	r, err := s.Load(context.Background(), entityID)
	if err != nil {
		t.Fatalf("Load(%q): %v", entityID, err)
	}
	if r.Revision != w.Revision || r.Token != w.Token || !bytes.Equal(r.Payload, w.Payload) {
		t.Fatalf("Load(%q) = %+v, want %+v", entityID, r, w)
	}
}
