package coordinatoractor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/consul/api"
	"google.golang.org/protobuf/proto"

	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/testkit/consulagent"
)

// storeHarness makes a fresh, empty store for one contract subtest, and a
// way to put raw bytes into it behind the store's back.
type storeHarness struct {
	newStore func(t *testing.T) (store StateStore, putRaw func(t *testing.T, data []byte))
}

func TestMemoryStore(t *testing.T) {
	testStateStore(t, storeHarness{newStore: func(t *testing.T) (StateStore, func(*testing.T, []byte)) {
		m := NewMemoryStore()
		return m, func(t *testing.T, data []byte) {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.data = data
			m.version++
		}
	}})
}

func TestConsulStore(t *testing.T) {
	agent := consulagent.Start(t)
	client := agent.Client()
	var n atomic.Int64
	testStateStore(t, storeHarness{newStore: func(t *testing.T) (StateStore, func(*testing.T, []byte)) {
		// One agent for all subtests; each gets its own key.
		key := ConsulStateKey(fmt.Sprintf("contract-%d", n.Add(1)))
		s := NewConsulStore(client, key)
		if s.Key() != key {
			t.Fatalf("Key() = %q, want %q", s.Key(), key)
		}
		return s, func(t *testing.T, data []byte) {
			if _, err := client.KV().Put(&api.KVPair{Key: key, Value: data}, nil); err != nil {
				t.Fatalf("raw put: %v", err)
			}
		}
	}})
}

// testStateStore is the StateStore contract, run against every store.
func testStateStore(t *testing.T, h storeHarness) {
	ctx := context.Background()

	t.Run("LoadEmpty", func(t *testing.T) {
		s, _ := h.newStore(t)
		st, v, err := s.Load(ctx)
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		if v != 0 {
			t.Errorf("version = %d, want 0", v)
		}
		assertStoreStateEqual(t, NewState(false), st)
		if st.Regions == nil || st.Proxies == nil || st.Shards == nil || st.Unallocated == nil {
			t.Errorf("empty state has nil maps: %#v", st)
		}
	})

	t.Run("RoundTrip", func(t *testing.T) {
		s, _ := h.newStore(t)
		want := storeSampleState(t)
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
		assertStoreStateEqual(t, want, got)
		// Spot checks, in case the canonical dump hides something.
		if r := got.Regions[RegionKey(storePID("n1", "region-a"))]; !slices.Equal(r.Shards, []string{"s3", "s1", "s2"}) {
			t.Errorf("region-a shards = %v, want allocation order [s3 s1 s2]", r.Shards)
		}
		if !got.RememberEntities {
			t.Errorf("RememberEntities lost")
		}
		if _, ok := got.Unallocated["s9"]; !ok || len(got.Unallocated) != 2 {
			t.Errorf("Unallocated = %v, want s8 and s9", got.Unallocated)
		}
		if len(got.Proxies) != 2 {
			t.Errorf("Proxies = %v, want 2", got.Proxies)
		}
	})

	t.Run("VersionIncreases", func(t *testing.T) {
		s, _ := h.newStore(t)
		st := storeSampleState(t)
		var last uint64
		for i := range 4 {
			if err := st.Apply(ShardHomeAllocated{Shard: fmt.Sprintf("new-%d", i), Region: storePID("n2", "region-b")}); err != nil {
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
		assertStoreStateEqual(t, st, got)
	})

	t.Run("ConflictTwoWriters", func(t *testing.T) {
		s, _ := h.newStore(t)
		base := storeSampleState(t)
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
		newer, err := stApplied(base, ShardHomeDeallocated{Shard: "s1"})
		if err != nil {
			t.Fatal(err)
		}
		vNew, err := s.Save(ctx, newer, readNew)
		if err != nil {
			t.Fatalf("new coordinator's Save: %v", err)
		}
		older, err := stApplied(base, ShardHomeAllocated{Shard: "stale", Region: storePID("n1", "region-a")})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // and it stays refused
			_, err = s.Save(ctx, older, readOld)
			if !errors.Is(err, ErrVersionConflict) {
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
		assertStoreStateEqual(t, newer, got)
	})

	t.Run("CreateOnlyConflict", func(t *testing.T) {
		s, _ := h.newStore(t)
		first := storeSampleState(t)
		v, err := s.Save(ctx, first, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Save(ctx, NewState(false), 0)
		if !errors.Is(err, ErrVersionConflict) {
			t.Fatalf("second create-only Save = %v, want ErrVersionConflict", err)
		}
		got, gv, err := s.Load(ctx)
		if err != nil || gv != v {
			t.Fatalf("Load = version %d, %v; want %d", gv, err, v)
		}
		assertStoreStateEqual(t, first, got)
	})

	t.Run("ConflictOnUnknownVersion", func(t *testing.T) {
		s, _ := h.newStore(t)
		// Nothing stored: only version 0 may write.
		if _, err := s.Save(ctx, NewState(false), 7); !errors.Is(err, ErrVersionConflict) {
			t.Fatalf("Save at 7 on empty store = %v, want ErrVersionConflict", err)
		}
		if _, v, err := s.Load(ctx); err != nil || v != 0 {
			t.Fatalf("Load = version %d, %v; want 0 (nothing stored)", v, err)
		}
		v, err := s.Save(ctx, NewState(false), 0)
		if err != nil {
			t.Fatal(err)
		}
		// A version from the future is as wrong as one from the past.
		if _, err := s.Save(ctx, NewState(false), v+1000); !errors.Is(err, ErrVersionConflict) {
			t.Fatalf("Save at %d = %v, want ErrVersionConflict", v+1000, err)
		}
	})

	t.Run("ConcurrentWritersOneWins", func(t *testing.T) {
		s, _ := h.newStore(t)
		v, err := s.Save(ctx, NewState(true), 0)
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
				st := NewState(true)
				if err := st.Apply(ShardRegionRegistered{Region: storePID("n1", fmt.Sprintf("w%d", i))}); err != nil {
					errs[i] = err
					return
				}
				if _, err := s.Save(ctx, st, v); err == nil {
					wins.Add(1)
				} else if !errors.Is(err, ErrVersionConflict) {
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
		s, _ := h.newStore(t)
		bad := NewState(false)
		bad.Regions["x"] = RegionEntry{PID: nil, Shards: []string{"s1"}}
		_, err := s.Save(ctx, bad, 0)
		if err == nil || errors.Is(err, ErrVersionConflict) || !errors.Is(err, ErrInvalidState) {
			t.Fatalf("Save of invalid state = %v, want ErrInvalidState, not a conflict", err)
		}
		if _, v, err := s.Load(ctx); err != nil || v != 0 {
			t.Fatalf("Load = version %d, %v; want nothing stored", v, err)
		}
	})

	t.Run("LoadCorrupt", func(t *testing.T) {
		s, putRaw := h.newStore(t)
		putRaw(t, []byte{0xff, 0xff, 0xff, 0xff})
		if _, _, err := s.Load(ctx); err == nil || !strings.Contains(err.Error(), "decode coordinator state") {
			t.Fatalf("Load of corrupt bytes = %v, want a decode error", err)
		}
	})
}

func TestMemoryStoreVersionsStepByOne(t *testing.T) {
	ctx := context.Background()
	m := NewMemoryStore()
	for want := uint64(1); want <= 5; want++ {
		v, err := m.Save(ctx, NewState(false), want-1)
		if err != nil {
			t.Fatal(err)
		}
		if v != want {
			t.Fatalf("version = %d, want %d", v, want)
		}
	}
}

func TestMemoryStoreIsolatesCallerState(t *testing.T) {
	ctx := context.Background()
	m := NewMemoryStore()
	st := storeSampleState(t)
	want := storeSampleState(t) // not st.Clone(): Clone shares the PIDs
	v, err := m.Save(ctx, st, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Mutate everything the caller still holds.
	keyA := RegionKey(storePID("n1", "region-a"))
	r := st.Regions[keyA]
	r.Shards[0] = "mutated"
	r.PID.Id = "mutated"
	st.Regions[keyA] = r
	delete(st.Proxies, RegionKey(storePID("n1", "proxy-1")))
	st.Unallocated["mutated"] = struct{}{}
	st.RememberEntities = false

	got, gv, err := m.Load(ctx)
	if err != nil || gv != v {
		t.Fatalf("Load = version %d, %v; want %d", gv, err, v)
	}
	assertStoreStateEqual(t, want, got)

	// Mutating a loaded state does not change the next Load either.
	got.Regions[keyA].PID.Id = "mutated-again"
	got.Regions[keyA].Shards[1] = "mutated-again"
	again, _, err := m.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	assertStoreStateEqual(t, want, again)
}

func TestMemoryStoreCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m := NewMemoryStore()
	if _, err := m.Save(ctx, NewState(false), 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Save = %v, want context.Canceled", err)
	}
	if _, _, err := m.Load(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Load = %v, want context.Canceled", err)
	}
	if _, v, err := m.Load(context.Background()); err != nil || v != 0 {
		t.Fatalf("Load = version %d, %v; want nothing stored", v, err)
	}
}

func TestMemoryStoreConcurrentLoadSave(t *testing.T) {
	// Writers that reload on conflict: no update is lost, and the final
	// version counts the successful writes.
	ctx := context.Background()
	m := NewMemoryStore()
	const writers, perWriter = 6, 20
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; {
				st, v, err := m.Load(ctx)
				if err != nil {
					errs[w] = err
					return
				}
				if st.RememberEntities != false {
					errs[w] = errors.New("unexpected state")
					return
				}
				if err := st.Apply(ShardRegionRegistered{Region: storePID("n1", fmt.Sprintf("w%d-%d", w, i))}); err != nil {
					errs[w] = err
					return
				}
				if _, err := m.Save(ctx, st, v); errors.Is(err, ErrVersionConflict) {
					continue
				} else if err != nil {
					errs[w] = err
					return
				}
				i++
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	st, v, err := m.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v != writers*perWriter || len(st.Regions) != writers*perWriter {
		t.Fatalf("version %d with %d regions, want %d of each", v, len(st.Regions), writers*perWriter)
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   State
	}{
		{"empty", NewState(false)},
		{"empty remember", NewState(true)},
		{"sample", storeSampleState(t)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := EncodeState(tc.st)
			if err != nil {
				t.Fatalf("EncodeState: %v", err)
			}
			got, err := DecodeState(data)
			if err != nil {
				t.Fatalf("DecodeState: %v", err)
			}
			assertStoreStateEqual(t, tc.st, got)
		})
	}
}

func TestEncodeStateDeterministic(t *testing.T) {
	st := storeSampleState(t)
	for i := range 30 {
		if err := st.Apply(ShardRegionRegistered{Region: storePID("n9", fmt.Sprintf("r%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := EncodeState(st)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		again, err := EncodeState(st.Clone())
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != string(first) {
			t.Fatal("equal states encoded to different bytes")
		}
	}
}

func TestEncodeStateRejectsInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, wantErr string
		mutate        func(*State)
	}{
		{"nil region pid", "nil ref", func(s *State) { s.Regions["x"] = RegionEntry{} }},
		{"nil proxy pid", "nil ref", func(s *State) { s.Proxies["x"] = RegionEntry{} }},
		{"empty shard", "empty shard id", func(s *State) {
			s.Regions["x"] = RegionEntry{PID: storePID("n1", "x"), Shards: []string{""}}
		}},
		{"shard on two regions", "already listed under region", func(s *State) {
			s.Regions["x"] = RegionEntry{PID: storePID("n1", "x"), Shards: []string{"s1"}}
			s.Regions["y"] = RegionEntry{PID: storePID("n1", "y"), Shards: []string{"s1"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := NewState(false)
			tc.mutate(&st)
			_, err := EncodeState(st)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("EncodeState = %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestDecodeStateErrors(t *testing.T) {
	rec := func(p *actor.PID, shards ...string) *messages.RegionRecord {
		return &messages.RegionRecord{Ref: p, MemberId: "m", Shards: shards}
	}
	a, b := storePID("n1", "a"), storePID("n2", "b")
	for _, tc := range []struct {
		name    string
		msg     *messages.CoordinatorState
		raw     []byte
		wantErr string
	}{
		{name: "corrupt bytes", raw: []byte{0xff, 0xff, 0xff, 0xff}, wantErr: "decode coordinator state (4 bytes)"},
		{name: "truncated", raw: storeTruncatedEncoding(t), wantErr: "decode coordinator state"},
		{name: "region nil ref", msg: &messages.CoordinatorState{Regions: []*messages.RegionRecord{rec(nil, "s1")}},
			wantErr: "region record 0: nil ref"},
		{name: "region empty id", msg: &messages.CoordinatorState{Regions: []*messages.RegionRecord{rec(&actor.PID{Address: "n1"})}},
			wantErr: "region record 0: ref at \"n1\" has an empty id"},
		{name: "region listed twice", msg: &messages.CoordinatorState{Regions: []*messages.RegionRecord{rec(a), rec(a)}},
			wantErr: "region record 1: region n1/a listed twice"},
		{name: "empty shard id", msg: &messages.CoordinatorState{Regions: []*messages.RegionRecord{rec(a, "s1", "")}},
			wantErr: "region record 0 (n1/a): empty shard id"},
		{name: "shard under two regions", msg: &messages.CoordinatorState{Regions: []*messages.RegionRecord{rec(a, "s1"), rec(b, "s2", "s1")}},
			wantErr: `region record 1 (n2/b): shard "s1" already listed under region n1/a`},
		{name: "shard twice in one region", msg: &messages.CoordinatorState{Regions: []*messages.RegionRecord{rec(a, "s1", "s1")}},
			wantErr: `shard "s1" already listed under region n1/a`},
		{name: "proxy nil ref", msg: &messages.CoordinatorState{RegionProxies: []*messages.RegionRecord{rec(nil)}},
			wantErr: "proxy record 0: nil ref"},
		{name: "proxy listed twice", msg: &messages.CoordinatorState{RegionProxies: []*messages.RegionRecord{rec(a), rec(a)}},
			wantErr: "proxy record 1: proxy n1/a listed twice"},
		{name: "proxy with shards", msg: &messages.CoordinatorState{RegionProxies: []*messages.RegionRecord{rec(a, "s1")}},
			wantErr: "proxy record 0 (n1/a): a proxy hosts no shards"},
		{name: "empty unallocated shard", msg: &messages.CoordinatorState{UnallocatedShards: []string{""}},
			wantErr: "empty unallocated shard id"},
		{name: "unallocated and allocated", msg: &messages.CoordinatorState{
			Regions: []*messages.RegionRecord{rec(a, "s1")}, UnallocatedShards: []string{"s1"}},
			wantErr: `shard "s1" is both unallocated and allocated to region n1/a`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := tc.raw
			if tc.msg != nil {
				var err error
				if data, err = proto.Marshal(tc.msg); err != nil {
					t.Fatal(err)
				}
			}
			st, err := DecodeState(data)
			if err == nil {
				t.Fatalf("DecodeState succeeded: %s", dumpStoreState(st))
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("DecodeState error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestDecodeStateEmptyBytes(t *testing.T) {
	st, err := DecodeState(nil)
	if err != nil {
		t.Fatal(err)
	}
	assertStoreStateEqual(t, NewState(false), st)
}

func TestConsulStateKey(t *testing.T) {
	if got, want := ConsulStateKey("user"), "protoshard/sharding/user/coordinator-state"; got != want {
		t.Fatalf("ConsulStateKey = %q, want %q", got, want)
	}
}

func TestConsulStoreVersionIsModifyIndex(t *testing.T) {
	agent := consulagent.Start(t)
	ctx := context.Background()
	key := ConsulStateKey("modify-index")
	s := NewConsulStore(agent.Client(), key)
	for i := range 3 {
		_, v, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		nv, err := s.Save(ctx, storeSampleState(t), v)
		if err != nil {
			t.Fatalf("Save #%d: %v", i, err)
		}
		pair, _, err := agent.Client().KV().Get(key, nil)
		if err != nil || pair == nil {
			t.Fatalf("Get: %v, %v", pair, err)
		}
		if pair.ModifyIndex != nv {
			t.Fatalf("Save #%d returned %d, key's ModifyIndex is %d", i, nv, pair.ModifyIndex)
		}
	}
}

func TestConsulStoreFencesOtherWriters(t *testing.T) {
	agent := consulagent.Start(t)
	ctx := context.Background()
	kv := agent.Client().KV()

	t.Run("foreign put", func(t *testing.T) {
		key := ConsulStateKey("foreign-put")
		s := NewConsulStore(agent.Client(), key)
		v, err := s.Save(ctx, storeSampleState(t), 0)
		if err != nil {
			t.Fatal(err)
		}
		data, err := EncodeState(NewState(true))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(&api.KVPair{Key: key, Value: data}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Save(ctx, storeSampleState(t), v); !errors.Is(err, ErrVersionConflict) {
			t.Fatalf("Save after a foreign write = %v, want ErrVersionConflict", err)
		}
	})

	t.Run("key deleted", func(t *testing.T) {
		// Consul lost or someone reset the state: the old version is gone,
		// and writing it back would resurrect a stale state.
		key := ConsulStateKey("deleted")
		s := NewConsulStore(agent.Client(), key)
		v, err := s.Save(ctx, storeSampleState(t), 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Delete(key, nil); err != nil {
			t.Fatal(err)
		}
		_, err = s.Save(ctx, storeSampleState(t), v)
		if !errors.Is(err, ErrVersionConflict) {
			t.Fatalf("Save after delete = %v, want ErrVersionConflict", err)
		}
		if !strings.Contains(err.Error(), "stored version is 0") {
			t.Errorf("error %q does not name the stored version", err)
		}
		if pair, _, err := kv.Get(key, nil); err != nil || pair != nil {
			t.Fatalf("key after refused Save: %v, %v; want absent", pair, err)
		}
	})
}

func TestConsulStoreSaveCancelledContext(t *testing.T) {
	agent := consulagent.Start(t)
	s := NewConsulStore(agent.Client(), ConsulStateKey("cancelled"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Save(ctx, storeSampleState(t), 0)
	if err == nil {
		t.Fatal("Save with a cancelled context succeeded")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Save error %v does not wrap context.Canceled", err)
	}
	if _, _, err := s.Load(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Load with a cancelled context = %v, want context.Canceled", err)
	}
	if _, v, err := s.Load(context.Background()); err != nil || v != 0 {
		t.Fatalf("Load = version %d, %v; want nothing stored", v, err)
	}
}

func TestConsulStoreStoppedAgent(t *testing.T) {
	agent := consulagent.Start(t)
	s := NewConsulStore(agent.Client(), ConsulStateKey("stopped"))
	v, err := s.Save(context.Background(), storeSampleState(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	agent.Stop()

	const deadline = 2 * time.Second
	for name, op := range map[string]func(context.Context) error{
		"Load": func(ctx context.Context) error { _, _, err := s.Load(ctx); return err },
		"Save": func(ctx context.Context) error { _, err := s.Save(ctx, storeSampleState(t), v); return err },
	} {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		start := time.Now()
		err := op(ctx)
		elapsed := time.Since(start)
		cancel()
		if err == nil {
			t.Errorf("%s against a stopped agent succeeded", name)
		} else if errors.Is(err, ErrVersionConflict) {
			t.Errorf("%s against a stopped agent = %v, must not be a version conflict", name, err)
		}
		if elapsed > deadline+time.Second {
			t.Errorf("%s took %v, ctx deadline was %v", name, elapsed, deadline)
		}
	}
}

// storeSampleState is a state with two regions (one with shards allocated out of
// lexical order), two proxies, unallocated shards and remember-entities on,
// built through Apply as the coordinator builds it.
func storeSampleState(t *testing.T) State {
	t.Helper()
	regionA, regionB, regionC := storePID("n1", "region-a"), storePID("n2", "region-b"), storePID("n3", "region-c")
	events := []Event{
		ShardRegionRegistered{Region: regionA, MemberID: "member-1"},
		ShardRegionRegistered{Region: regionB, MemberID: "member-2"},
		ShardRegionRegistered{Region: regionC, MemberID: "member-3"},
		ShardRegionProxyRegistered{Proxy: storePID("n1", "proxy-1"), MemberID: "member-1"},
		ShardRegionProxyRegistered{Proxy: storePID("n4", "proxy-4"), MemberID: "member-4"},
		ShardHomeAllocated{Shard: "s3", Region: regionA},
		ShardHomeAllocated{Shard: "s1", Region: regionA},
		ShardHomeAllocated{Shard: "s2", Region: regionA},
		ShardHomeAllocated{Shard: "s7", Region: regionB},
		ShardHomeAllocated{Shard: "s9", Region: regionC},
		ShardHomeAllocated{Shard: "s8", Region: regionB},
		ShardHomeDeallocated{Shard: "s8"},
		ShardRegionTerminated{Region: regionC},
	}
	st := NewState(true)
	for _, e := range events {
		if err := st.Apply(e); err != nil {
			t.Fatalf("sample state: %v", err)
		}
	}
	return st
}

func storePID(address, id string) *actor.PID { return actor.NewPID(address, id) }

func storeTruncatedEncoding(t *testing.T) []byte {
	t.Helper()
	data, err := EncodeState(storeSampleState(t))
	if err != nil {
		t.Fatal(err)
	}
	return data[:len(data)-3]
}

// assertStoreStateEqual compares states by content: PIDs by RegionKey, a nil
// shard list equal to an empty one.
func assertStoreStateEqual(t *testing.T, want, got State) {
	t.Helper()
	if w, g := dumpStoreState(want), dumpStoreState(got); w != g {
		t.Fatalf("state differs\nwant:\n%s\ngot:\n%s", w, g)
	}
}

func dumpStoreState(s State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "remember=%v\n", s.RememberEntities)
	for _, k := range slices.Sorted(maps.Keys(s.Regions)) {
		r := s.Regions[k]
		fmt.Fprintf(&b, "region %s pid=%s member=%s shards=%v\n", k, RegionKey(r.PID), r.MemberID, r.Shards)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Proxies)) {
		p := s.Proxies[k]
		fmt.Fprintf(&b, "proxy %s pid=%s member=%s shards=%v\n", k, RegionKey(p.PID), p.MemberID, p.Shards)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Shards)) {
		fmt.Fprintf(&b, "shard %s -> %s\n", k, s.Shards[k])
	}
	fmt.Fprintf(&b, "unallocated=%v\n", slices.Sorted(maps.Keys(s.Unallocated)))
	return b.String()
}

func TestConsulStoreOversizedStateIsNoConflict(t *testing.T) {
	agent := consulagent.Start(t)
	ctx := context.Background()
	s := NewConsulStore(agent.Client(), ConsulStateKey("oversized"))
	v, err := s.Save(ctx, NewState(false), 0)
	if err != nil {
		t.Fatal(err)
	}
	// Beyond Consul's default 512 KiB value limit.
	big := NewState(false)
	shards := make([]string, 0, 70_000)
	for i := range cap(shards) {
		shards = append(shards, fmt.Sprintf("shard-%06d", i))
	}
	big.Regions[RegionKey(storePID("n1", "r"))] = RegionEntry{PID: storePID("n1", "r"), Shards: shards}
	_, err = s.Save(ctx, big, v)
	if err == nil {
		t.Fatal("Save of an oversized state succeeded")
	}
	if errors.Is(err, ErrVersionConflict) || !errors.Is(err, ErrStateTooLarge) {
		t.Fatalf("Save of an oversized state = %v, want ErrStateTooLarge, not a version conflict", err)
	}
	t.Logf("oversized Save: %.300s", err)
	if _, lv, err := s.Load(ctx); err != nil || lv != v {
		t.Fatalf("Load = version %d, %v; want %d", lv, err, v)
	}
}

// TestConsulStoreRolledBackWithoutConflict fakes Consul's HTTP API to
// reach what a dev agent without ACLs cannot produce: a CAS transaction
// rolled back for another reason than a moved index. Only a moved index is
// a conflict; anything else is a plain error the coordinator may retry.
func TestConsulStoreRolledBackWithoutConflict(t *testing.T) {
	const key = "protoshard/sharding/fake/coordinator-state"
	const stored = 5
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/v1/txn":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"Results":null,"Errors":[{"OpIndex":0,"What":"Permission denied"}]}`)
		case r.Method == http.MethodGet && r.URL.Path == "/v1/kv/"+key:
			if _, ok := r.URL.Query()["consistent"]; !ok {
				t.Errorf("read without ?consistent: %s", r.URL)
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Consul-Index", strconv.Itoa(stored))
			fmt.Fprintf(w, `[{"Key":%q,"CreateIndex":1,"ModifyIndex":%d,"Value":null}]`, key, stored)
		default:
			t.Errorf("unexpected request %s %s", r.Method, r.URL)
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	cfg := api.DefaultConfig()
	cfg.Address = strings.TrimPrefix(srv.URL, "http://")
	client, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := NewConsulStore(client, key)
	ctx := context.Background()

	_, err = s.Save(ctx, NewState(false), stored)
	if err == nil || errors.Is(err, ErrVersionConflict) || !strings.Contains(err.Error(), "Permission denied") {
		t.Fatalf("Save at the stored version = %v, want a non-conflict error naming the cause", err)
	}
	_, err = s.Save(ctx, NewState(false), stored-1)
	if !errors.Is(err, ErrVersionConflict) {
		t.Fatalf("Save at an old version = %v, want ErrVersionConflict", err)
	}
}
