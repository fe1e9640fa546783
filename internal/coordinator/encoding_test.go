package coordinator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/messages"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   State
	}{
		{"empty", NewState(false)},
		{"empty remember", NewState(true)},
		{"sample", sampleState(t)},
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
			assertStateEqual(t, tc.st, got)
		})
	}
}

func TestEncodeStateDeterministic(t *testing.T) {
	st := sampleState(t)
	for i := range 30 {
		if err := st.Apply(ShardRegionRegistered{Region: actor.NewPID("n9", fmt.Sprintf("r%d", i))}); err != nil {
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
			s.Regions["x"] = RegionEntry{PID: actor.NewPID("n1", "x"), Shards: []string{""}}
		}},
		{"shard on two regions", "already listed under region", func(s *State) {
			s.Regions["x"] = RegionEntry{PID: actor.NewPID("n1", "x"), Shards: []string{"s1"}}
			s.Regions["y"] = RegionEntry{PID: actor.NewPID("n1", "y"), Shards: []string{"s1"}}
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
			st, err := DecodeState(data)
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
	st, err := DecodeState(nil)
	if err != nil {
		t.Fatal(err)
	}
	assertStateEqual(t, NewState(false), st)
}

func storeTruncatedEncoding(t *testing.T) []byte {
	t.Helper()
	data, err := EncodeState(sampleState(t))
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
	st, err := DecodeState(old)
	if err != nil {
		t.Fatalf("DecodeState: %v", err)
	}
	r := st.Regions[RegionKey(a)]
	if r.Extractor.Known() || r.MemberID != "member-1" || len(r.Shards) != 1 {
		t.Fatalf("region decoded as %+v, want member-1 with s1 and an unknown extractor", r)
	}
	// Written again, then read, it is the same state.
	again, err := EncodeState(st)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(old) {
		t.Fatalf("a state without extractors encodes to other bytes than it was written with")
	}
}

// The round trip keeps what the canonical dump could hide: a region's
// allocation order, remember-entities, the unallocated shards, the
// extractors and the proxies.
func TestEncodeDecodeKeepsSampleDetails(t *testing.T) {
	data, err := EncodeState(sampleState(t))
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeState(data)
	if err != nil {
		t.Fatal(err)
	}
	a := got.Regions[RegionKey(actor.NewPID("n1", "region-a"))]
	if !slices.Equal(a.Shards, []string{"s3", "s1", "s2"}) {
		t.Errorf("region-a shards = %v, want allocation order [s3 s1 s2]", a.Shards)
	}
	if a.Extractor != (ExtractorIdentity{Name: "hash-code", NumberOfShards: 100}) {
		t.Errorf("region-a extractor = %+v, want hash-code with 100 shards", a.Extractor)
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
}

// An invalid state is refused with ErrInvalidState, so the coordinator
// never hands the store a state that could not be loaded again.
func TestEncodeStateInvalidIsErrInvalidState(t *testing.T) {
	bad := NewState(false)
	bad.Regions["x"] = RegionEntry{PID: nil, Shards: []string{"s1"}}
	if _, err := EncodeState(bad); !errors.Is(err, ErrInvalidState) {
		t.Fatalf("EncodeState of an invalid state = %v, want ErrInvalidState", err)
	}
}

// sampleState returns a state with two regions (one with shards allocated
// out of lexical order), two proxies, unallocated shards and
// remember-entities on, built through Apply as the coordinator builds it.
// Every call returns a new state that shares nothing with the others.
func sampleState(t testing.TB) State {
	t.Helper()
	regionA, regionB, regionC := actor.NewPID("n1", "region-a"), actor.NewPID("n2", "region-b"), actor.NewPID("n3", "region-c")
	events := []Event{
		ShardRegionRegistered{Region: regionA, MemberID: "member-1",
			Extractor: ExtractorIdentity{Name: "hash-code", NumberOfShards: 100}},
		ShardRegionRegistered{Region: regionB, MemberID: "member-2"}, // an older version: unknown
		ShardRegionRegistered{Region: regionC, MemberID: "member-3",
			Extractor: ExtractorIdentity{Name: "main.orders"}},
		ShardRegionProxyRegistered{Proxy: actor.NewPID("n1", "proxy-1"), MemberID: "member-1"},
		ShardRegionProxyRegistered{Proxy: actor.NewPID("n4", "proxy-4"), MemberID: "member-4"},
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

// assertStateEqual fails t unless want and got have the same content:
// PIDs compared by RegionKey, a nil shard list equal to an empty one.
func assertStateEqual(t testing.TB, want, got State) {
	t.Helper()
	if w, g := dumpState(want), dumpState(got); w != g {
		t.Fatalf("state differs\nwant:\n%s\ngot:\n%s", w, g)
	}
}

func dumpState(s State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "remember=%v\n", s.RememberEntities)
	for _, k := range slices.Sorted(maps.Keys(s.Regions)) {
		r := s.Regions[k]
		fmt.Fprintf(&b, "region %s pid=%s member=%s shards=%v extractor=%+v\n", k, RegionKey(r.PID), r.MemberID, r.Shards, r.Extractor)
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

// Bytes in the store that do not decode fail the read, so the coordinator
// retries it instead of starting from an empty state.
func TestLoadStateCorrupt(t *testing.T) {
	store := coordinatoractor.NewMemoryStore()
	if _, err := store.Save(context.Background(), []byte{0xff, 0xff, 0xff, 0xff}, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadState(context.Background(), store); err == nil || !strings.Contains(err.Error(), "decode coordinator state") {
		t.Fatalf("LoadState of corrupt bytes = %v, want a decode error", err)
	}
}

// An empty store is the empty state at version 0.
func TestLoadStateEmpty(t *testing.T) {
	st, v, err := LoadState(context.Background(), coordinatoractor.NewMemoryStore())
	if err != nil || v != 0 {
		t.Fatalf("LoadState = version %d, %v; want 0", v, err)
	}
	assertStateEqual(t, NewState(false), st)
	if st.Regions == nil || st.Proxies == nil || st.Shards == nil || st.Unallocated == nil {
		t.Errorf("empty state has nil maps: %#v", st)
	}
}

// An invalid state never reaches the store: nothing is written and the
// error is no version conflict.
func TestSaveStateInvalidNotWritten(t *testing.T) {
	store := coordinatoractor.NewMemoryStore()
	bad := NewState(false)
	bad.Regions["x"] = RegionEntry{PID: nil, Shards: []string{"s1"}}
	_, err := SaveState(context.Background(), store, bad, 0)
	if errors.Is(err, coordinatoractor.ErrVersionConflict) || !errors.Is(err, ErrInvalidState) {
		t.Fatalf("SaveState of an invalid state = %v, want ErrInvalidState, not a conflict", err)
	}
	if _, v, err := store.Load(context.Background()); err != nil || v != 0 {
		t.Fatalf("Load = version %d, %v; want nothing stored", v, err)
	}
}
