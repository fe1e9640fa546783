// Package storetest holds the contract tests of coordinatoractor.StateStore:
// every implementation runs them (coordinatoractor.MemoryStore in package
// coordinatoractor, the Consul store in actorsharding/consulstore) through
// Run with a Harness of its own.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/coordinatoractor"
)

// Harness adapts one coordinatoractor.StateStore implementation to the
// contract tests.
type Harness struct {
	// NewStore returns a fresh, empty store for one subtest, and a way to
	// put raw bytes into it behind the store's back (the contract checks
	// that loading undecodable bytes fails).
	NewStore func(t *testing.T) (store coordinatoractor.StateStore, putRaw func(t *testing.T, data []byte))
}

// Run runs every contract test against h, each as a subtest with a store
// of its own.
func Run(t *testing.T, h Harness) {
	ctx := context.Background()

	t.Run("LoadEmpty", func(t *testing.T) {
		s, _ := h.NewStore(t)
		st, v, err := s.Load(ctx)
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		if v != 0 {
			t.Errorf("version = %d, want 0", v)
		}
		AssertStateEqual(t, coordinatoractor.NewState(false), st)
		if st.Regions == nil || st.Proxies == nil || st.Shards == nil || st.Unallocated == nil {
			t.Errorf("empty state has nil maps: %#v", st)
		}
	})

	t.Run("RoundTrip", func(t *testing.T) {
		s, _ := h.NewStore(t)
		want := SampleState(t)
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
		AssertStateEqual(t, want, got)
		// Spot checks, in case the canonical dump hides something.
		if r := got.Regions[coordinatoractor.RegionKey(pid("n1", "region-a"))]; !slices.Equal(r.Shards, []string{"s3", "s1", "s2"}) {
			t.Errorf("region-a shards = %v, want allocation order [s3 s1 s2]", r.Shards)
		}
		if !got.RememberEntities {
			t.Errorf("RememberEntities lost")
		}
		if _, ok := got.Unallocated["s9"]; !ok || len(got.Unallocated) != 2 {
			t.Errorf("Unallocated = %v, want s8 and s9", got.Unallocated)
		}
		if e := got.Regions[coordinatoractor.RegionKey(pid("n1", "region-a"))].Extractor; e != (coordinatoractor.ExtractorIdentity{Name: "hash-code", NumberOfShards: 100}) {
			t.Errorf("region-a extractor = %+v, want hash-code with 100 shards", e)
		}
		if len(got.Proxies) != 2 {
			t.Errorf("Proxies = %v, want 2", got.Proxies)
		}
	})

	t.Run("VersionIncreases", func(t *testing.T) {
		s, _ := h.NewStore(t)
		st := SampleState(t)
		var last uint64
		for i := range 4 {
			if err := st.Apply(coordinatoractor.ShardHomeAllocated{Shard: fmt.Sprintf("new-%d", i), Region: pid("n2", "region-b")}); err != nil {
				t.Fatal(err)
			}
			v, err := s.Save(ctx, st, last)
			if err != nil {
				t.Fatalf("Save #%d at version %d: %v", i, last, err)
			}
			if v <= last {
				t.Fatalf("Save #%d: version %d does not increase on %d", i, v, last)
			}
			_, lv, err := s.Load(ctx)
			if err != nil || lv != v {
				t.Fatalf("Load after Save #%d = version %d, %v; want %d", i, lv, err, v)
			}
			last = v
		}
		got, _, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		AssertStateEqual(t, st, got)
	})

	t.Run("ConflictTwoWriters", func(t *testing.T) {
		s, _ := h.NewStore(t)
		base := SampleState(t)
		v0, err := s.Save(ctx, base, 0)
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
		newer, err := applied(base, coordinatoractor.ShardHomeDeallocated{Shard: "s1"})
		if err != nil {
			t.Fatal(err)
		}
		vNew, err := s.Save(ctx, newer, readNew)
		if err != nil {
			t.Fatalf("new coordinator's Save: %v", err)
		}
		older, err := applied(base, coordinatoractor.ShardHomeAllocated{Shard: "stale", Region: pid("n1", "region-a")})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // and it stays refused
			_, err = s.Save(ctx, older, readOld)
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
		AssertStateEqual(t, newer, got)
	})

	// A new coordinator claims the state by writing back what it read,
	// often unchanged. That write must still move the version, or a stale
	// coordinator that read the same version would go on writing.
	t.Run("UnchangedSaveMovesTheVersion", func(t *testing.T) {
		s, _ := h.NewStore(t)
		st := SampleState(t)
		read, err := s.Save(ctx, st, 0)
		if err != nil {
			t.Fatal(err)
		}
		claimed, err := s.Save(ctx, st, read)
		if err != nil {
			t.Fatalf("claim of an unchanged state: %v", err)
		}
		if claimed <= read {
			t.Fatalf("claim of an unchanged state at version %d gave version %d, want a greater one", read, claimed)
		}
		again, err := s.Save(ctx, st, claimed)
		if err != nil || again <= claimed {
			t.Fatalf("second claim at version %d = version %d, %v; want a greater one", claimed, again, err)
		}
		stale, err := applied(st, coordinatoractor.ShardHomeAllocated{Shard: "stale", Region: pid("n1", "region-a")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Save(ctx, stale, read); !errors.Is(err, coordinatoractor.ErrVersionConflict) {
			t.Fatalf("stale coordinator's Save at version %d = %v, want ErrVersionConflict", read, err)
		}
	})

	t.Run("CreateOnlyConflict", func(t *testing.T) {
		s, _ := h.NewStore(t)
		first := SampleState(t)
		v, err := s.Save(ctx, first, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Save(ctx, coordinatoractor.NewState(false), 0)
		if !errors.Is(err, coordinatoractor.ErrVersionConflict) {
			t.Fatalf("second create-only Save = %v, want ErrVersionConflict", err)
		}
		got, gv, err := s.Load(ctx)
		if err != nil || gv != v {
			t.Fatalf("Load = version %d, %v; want %d", gv, err, v)
		}
		AssertStateEqual(t, first, got)
	})

	t.Run("ConflictOnUnknownVersion", func(t *testing.T) {
		s, _ := h.NewStore(t)
		// Nothing stored: only version 0 may write.
		if _, err := s.Save(ctx, coordinatoractor.NewState(false), 7); !errors.Is(err, coordinatoractor.ErrVersionConflict) {
			t.Fatalf("Save at 7 on empty store = %v, want ErrVersionConflict", err)
		}
		if _, v, err := s.Load(ctx); err != nil || v != 0 {
			t.Fatalf("Load = version %d, %v; want 0 (nothing stored)", v, err)
		}
		v, err := s.Save(ctx, coordinatoractor.NewState(false), 0)
		if err != nil {
			t.Fatal(err)
		}
		// A version from the future is as wrong as one from the past.
		if _, err := s.Save(ctx, coordinatoractor.NewState(false), v+1000); !errors.Is(err, coordinatoractor.ErrVersionConflict) {
			t.Fatalf("Save at %d = %v, want ErrVersionConflict", v+1000, err)
		}
	})

	t.Run("ConcurrentWritersOneWins", func(t *testing.T) {
		s, _ := h.NewStore(t)
		v, err := s.Save(ctx, coordinatoractor.NewState(true), 0)
		if err != nil {
			t.Fatal(err)
		}
		const writers = 8
		var wg sync.WaitGroup
		var wins atomic.Int32
		errs := make([]error, writers)
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st := coordinatoractor.NewState(true)
				if err := st.Apply(coordinatoractor.ShardRegionRegistered{Region: pid("n1", fmt.Sprintf("w%d", i))}); err != nil {
					errs[i] = err
					return
				}
				if _, err := s.Save(ctx, st, v); err == nil {
					wins.Add(1)
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
		if len(got.Regions) != 1 {
			t.Errorf("stored state has %d regions, want the winner's one", len(got.Regions))
		}
	})

	t.Run("InvalidStateNotSaved", func(t *testing.T) {
		s, _ := h.NewStore(t)
		bad := coordinatoractor.NewState(false)
		bad.Regions["x"] = coordinatoractor.RegionEntry{PID: nil, Shards: []string{"s1"}}
		_, err := s.Save(ctx, bad, 0)
		if err == nil || errors.Is(err, coordinatoractor.ErrVersionConflict) || !errors.Is(err, coordinatoractor.ErrInvalidState) {
			t.Fatalf("Save of invalid state = %v, want ErrInvalidState, not a conflict", err)
		}
		if _, v, err := s.Load(ctx); err != nil || v != 0 {
			t.Fatalf("Load = version %d, %v; want nothing stored", v, err)
		}
	})

	t.Run("LoadCorrupt", func(t *testing.T) {
		s, putRaw := h.NewStore(t)
		putRaw(t, []byte{0xff, 0xff, 0xff, 0xff})
		if _, _, err := s.Load(ctx); err == nil || !strings.Contains(err.Error(), "decode coordinator state") {
			t.Fatalf("Load of corrupt bytes = %v, want a decode error", err)
		}
	})
}

// SampleState returns a state with two regions (one with shards allocated
// out of lexical order), two proxies, unallocated shards and
// remember-entities on, built through Apply as the coordinator builds it.
// Every call returns a new state that shares nothing with the others.
func SampleState(t testing.TB) coordinatoractor.State {
	t.Helper()
	regionA, regionB, regionC := pid("n1", "region-a"), pid("n2", "region-b"), pid("n3", "region-c")
	events := []coordinatoractor.Event{
		coordinatoractor.ShardRegionRegistered{Region: regionA, MemberID: "member-1",
			Extractor: coordinatoractor.ExtractorIdentity{Name: "hash-code", NumberOfShards: 100}},
		coordinatoractor.ShardRegionRegistered{Region: regionB, MemberID: "member-2"}, // an older version: unknown
		coordinatoractor.ShardRegionRegistered{Region: regionC, MemberID: "member-3",
			Extractor: coordinatoractor.ExtractorIdentity{Name: "main.orders"}},
		coordinatoractor.ShardRegionProxyRegistered{Proxy: pid("n1", "proxy-1"), MemberID: "member-1"},
		coordinatoractor.ShardRegionProxyRegistered{Proxy: pid("n4", "proxy-4"), MemberID: "member-4"},
		coordinatoractor.ShardHomeAllocated{Shard: "s3", Region: regionA},
		coordinatoractor.ShardHomeAllocated{Shard: "s1", Region: regionA},
		coordinatoractor.ShardHomeAllocated{Shard: "s2", Region: regionA},
		coordinatoractor.ShardHomeAllocated{Shard: "s7", Region: regionB},
		coordinatoractor.ShardHomeAllocated{Shard: "s9", Region: regionC},
		coordinatoractor.ShardHomeAllocated{Shard: "s8", Region: regionB},
		coordinatoractor.ShardHomeDeallocated{Shard: "s8"},
		coordinatoractor.ShardRegionTerminated{Region: regionC},
	}
	st := coordinatoractor.NewState(true)
	for _, e := range events {
		if err := st.Apply(e); err != nil {
			t.Fatalf("sample state: %v", err)
		}
	}
	return st
}

// AssertStateEqual fails t unless want and got have the same content:
// PIDs compared by coordinatoractor.RegionKey, a nil shard list equal to an
// empty one.
func AssertStateEqual(t testing.TB, want, got coordinatoractor.State) {
	t.Helper()
	if w, g := dump(want), dump(got); w != g {
		t.Fatalf("state differs\nwant:\n%s\ngot:\n%s", w, g)
	}
}

func dump(s coordinatoractor.State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "remember=%v\n", s.RememberEntities)
	for _, k := range slices.Sorted(maps.Keys(s.Regions)) {
		r := s.Regions[k]
		fmt.Fprintf(&b, "region %s pid=%s member=%s shards=%v extractor=%+v\n", k, coordinatoractor.RegionKey(r.PID), r.MemberID, r.Shards, r.Extractor)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Proxies)) {
		p := s.Proxies[k]
		fmt.Fprintf(&b, "proxy %s pid=%s member=%s shards=%v\n", k, coordinatoractor.RegionKey(p.PID), p.MemberID, p.Shards)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Shards)) {
		fmt.Fprintf(&b, "shard %s -> %s\n", k, s.Shards[k])
	}
	fmt.Fprintf(&b, "unallocated=%v\n", slices.Sorted(maps.Keys(s.Unallocated)))
	return b.String()
}

// applied returns a copy of s after e, leaving s as it is.
func applied(s coordinatoractor.State, e coordinatoractor.Event) (coordinatoractor.State, error) {
	n := s.Clone()
	if err := n.Apply(e); err != nil {
		return s, err
	}
	return n, nil
}

func pid(address, id string) *actor.PID { return actor.NewPID(address, id) }
