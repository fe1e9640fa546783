package coordinatoractor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/coordinatoractor/storetest"
	"github.com/protoshard/protoshard/messages"
)

func TestMemoryStore(t *testing.T) {
	storetest.Run(t, storetest.Harness{NewStore: func(t *testing.T) (coordinatoractor.StateStore, func(*testing.T, []byte)) {
		m := coordinatoractor.NewMemoryStore()
		return m, func(_ *testing.T, data []byte) { coordinatoractor.PutRaw(m, data) }
	}})
}

func TestMemoryStoreVersionsStepByOne(t *testing.T) {
	ctx := context.Background()
	m := coordinatoractor.NewMemoryStore()
	for want := uint64(1); want <= 5; want++ {
		v, err := m.Save(ctx, coordinatoractor.NewState(false), want-1)
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
	m := coordinatoractor.NewMemoryStore()
	st := storetest.SampleState(t)
	want := storetest.SampleState(t) // not st.Clone(): Clone shares the PIDs
	v, err := m.Save(ctx, st, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Mutate everything the caller still holds.
	keyA := coordinatoractor.RegionKey(actor.NewPID("n1", "region-a"))
	r := st.Regions[keyA]
	r.Shards[0] = "mutated"
	r.PID.Id = "mutated"
	st.Regions[keyA] = r
	delete(st.Proxies, coordinatoractor.RegionKey(actor.NewPID("n1", "proxy-1")))
	st.Unallocated["mutated"] = struct{}{}
	st.RememberEntities = false

	got, gv, err := m.Load(ctx)
	if err != nil || gv != v {
		t.Fatalf("Load = version %d, %v; want %d", gv, err, v)
	}
	storetest.AssertStateEqual(t, want, got)

	// Mutating a loaded state does not change the next Load either.
	got.Regions[keyA].PID.Id = "mutated-again"
	got.Regions[keyA].Shards[1] = "mutated-again"
	again, _, err := m.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	storetest.AssertStateEqual(t, want, again)
}

func TestMemoryStoreCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m := coordinatoractor.NewMemoryStore()
	if _, err := m.Save(ctx, coordinatoractor.NewState(false), 0); !errors.Is(err, context.Canceled) {
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
	m := coordinatoractor.NewMemoryStore()
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
				if err := st.Apply(coordinatoractor.ShardRegionRegistered{Region: actor.NewPID("n1", fmt.Sprintf("w%d-%d", w, i))}); err != nil {
					errs[w] = err
					return
				}
				if _, err := m.Save(ctx, st, v); errors.Is(err, coordinatoractor.ErrVersionConflict) {
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
		st   coordinatoractor.State
	}{
		{"empty", coordinatoractor.NewState(false)},
		{"empty remember", coordinatoractor.NewState(true)},
		{"sample", storetest.SampleState(t)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := coordinatoractor.EncodeState(tc.st)
			if err != nil {
				t.Fatalf("EncodeState: %v", err)
			}
			got, err := coordinatoractor.DecodeState(data)
			if err != nil {
				t.Fatalf("DecodeState: %v", err)
			}
			storetest.AssertStateEqual(t, tc.st, got)
		})
	}
}

func TestEncodeStateDeterministic(t *testing.T) {
	st := storetest.SampleState(t)
	for i := range 30 {
		if err := st.Apply(coordinatoractor.ShardRegionRegistered{Region: actor.NewPID("n9", fmt.Sprintf("r%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := coordinatoractor.EncodeState(st)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		again, err := coordinatoractor.EncodeState(st.Clone())
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
		mutate        func(*coordinatoractor.State)
	}{
		{"nil region pid", "nil ref", func(s *coordinatoractor.State) { s.Regions["x"] = coordinatoractor.RegionEntry{} }},
		{"nil proxy pid", "nil ref", func(s *coordinatoractor.State) { s.Proxies["x"] = coordinatoractor.RegionEntry{} }},
		{"empty shard", "empty shard id", func(s *coordinatoractor.State) {
			s.Regions["x"] = coordinatoractor.RegionEntry{PID: actor.NewPID("n1", "x"), Shards: []string{""}}
		}},
		{"shard on two regions", "already listed under region", func(s *coordinatoractor.State) {
			s.Regions["x"] = coordinatoractor.RegionEntry{PID: actor.NewPID("n1", "x"), Shards: []string{"s1"}}
			s.Regions["y"] = coordinatoractor.RegionEntry{PID: actor.NewPID("n1", "y"), Shards: []string{"s1"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := coordinatoractor.NewState(false)
			tc.mutate(&st)
			_, err := coordinatoractor.EncodeState(st)
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
	a, b := actor.NewPID("n1", "a"), actor.NewPID("n2", "b")
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
			st, err := coordinatoractor.DecodeState(data)
			if err == nil {
				t.Fatalf("DecodeState succeeded with %d regions", len(st.Regions))
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("DecodeState error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestDecodeStateEmptyBytes(t *testing.T) {
	st, err := coordinatoractor.DecodeState(nil)
	if err != nil {
		t.Fatal(err)
	}
	storetest.AssertStateEqual(t, coordinatoractor.NewState(false), st)
}

func storeTruncatedEncoding(t *testing.T) []byte {
	t.Helper()
	data, err := coordinatoractor.EncodeState(storetest.SampleState(t))
	if err != nil {
		t.Fatal(err)
	}
	return data[:len(data)-3]
}

// A state written before regions carried their extractor loads, its
// regions' extractors unknown: a coordinator that starts from it accepts
// any region that registers next to them.
func TestDecodeStateWrittenBeforeExtractors(t *testing.T) {
	a := actor.NewPID("n1", "region-a")
	old, err := proto.Marshal(&messages.CoordinatorState{
		Regions: []*messages.RegionRecord{{Ref: a, MemberId: "member-1", Shards: []string{"s1"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := coordinatoractor.DecodeState(old)
	if err != nil {
		t.Fatalf("DecodeState: %v", err)
	}
	r := st.Regions[coordinatoractor.RegionKey(a)]
	if r.Extractor.Known() || r.MemberID != "member-1" || len(r.Shards) != 1 {
		t.Fatalf("region decoded as %+v, want member-1 with s1 and an unknown extractor", r)
	}
	// Written again, then read, it is the same state.
	again, err := coordinatoractor.EncodeState(st)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(old) {
		t.Fatalf("a state without extractors encodes to other bytes than it was written with")
	}
}
