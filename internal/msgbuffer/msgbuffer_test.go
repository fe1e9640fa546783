package msgbuffer

import (
	"fmt"
	"slices"
	"testing"
)

func TestBuffer(t *testing.T) {
	type step struct {
		op   string // add, drop-oldest, prepend, take, take-even, take-below
		key  string
		msgs []int
		want []int // what the step returns
		ok   bool  // add: kept; drop-oldest: dropped one
	}
	for _, tc := range []struct {
		name     string
		limit    int
		steps    []step
		wantKeys []string
		wantLen  int
	}{
		{name: "keys keep their own order", limit: 10, steps: []step{
			{op: "add", key: "a", msgs: []int{1}, ok: true},
			{op: "add", key: "b", msgs: []int{2}, ok: true},
			{op: "add", key: "a", msgs: []int{3}, ok: true},
			{op: "take", key: "a", want: []int{1, 3}},
			{op: "take", key: "a"},
		}, wantKeys: []string{"b"}, wantLen: 1},
		{name: "full refuses, across keys", limit: 2, steps: []step{
			{op: "add", key: "a", msgs: []int{1}, ok: true},
			{op: "add", key: "b", msgs: []int{2}, ok: true},
			{op: "add", key: "c", msgs: []int{3}, ok: false},
		}, wantKeys: []string{"a", "b"}, wantLen: 2},
		{name: "drop oldest of the key that waited longest", limit: 2, steps: []step{
			{op: "drop-oldest", key: "a", msgs: []int{1}},
			{op: "drop-oldest", key: "b", msgs: []int{2}},
			{op: "drop-oldest", key: "b", msgs: []int{3}, want: []int{1}, ok: true},
			{op: "take", key: "b", want: []int{2, 3}},
		}, wantKeys: []string{}, wantLen: 0},
		{name: "no room drops the new one", limit: 0, steps: []step{
			{op: "drop-oldest", key: "a", msgs: []int{1}, want: []int{1}, ok: true},
		}, wantKeys: []string{}, wantLen: 0},
		{name: "prepend goes first and past the limit", limit: 2, steps: []step{
			{op: "add", key: "a", msgs: []int{3}, ok: true},
			{op: "add", key: "a", msgs: []int{4}, ok: true},
			{op: "prepend", key: "a", msgs: []int{1, 2}},
			{op: "take", key: "a", want: []int{1, 2, 3, 4}},
		}, wantKeys: []string{}, wantLen: 0},
		{name: "take func keeps the rest in order", limit: 10, steps: []step{
			{op: "add", key: "a", msgs: []int{1}, ok: true},
			{op: "add", key: "a", msgs: []int{2}, ok: true},
			{op: "add", key: "a", msgs: []int{3}, ok: true},
			{op: "add", key: "a", msgs: []int{4}, ok: true},
			{op: "take-even", key: "a", want: []int{2, 4}},
			{op: "take", key: "a", want: []int{1, 3}},
		}, wantKeys: []string{}, wantLen: 0},
		{name: "take while stops at the first that stays", limit: 10, steps: []step{
			{op: "add", key: "a", msgs: []int{1}, ok: true},
			{op: "add", key: "a", msgs: []int{2}, ok: true},
			{op: "add", key: "a", msgs: []int{7}, ok: true},
			{op: "add", key: "a", msgs: []int{3}, ok: true},
			{op: "take-below", key: "a", want: []int{1, 2}},
			{op: "take-below", key: "a"},
		}, wantKeys: []string{"a"}, wantLen: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New[string, int](tc.limit)
			for i, s := range tc.steps {
				var got []int
				ok := false
				switch s.op {
				case "add":
					ok = b.Add(s.key, s.msgs[0])
				case "drop-oldest":
					var d int
					if d, ok = b.AddDroppingOldest(s.key, s.msgs[0]); ok {
						got = []int{d}
					}
				case "prepend":
					b.Prepend(s.key, s.msgs)
				case "take":
					got = b.Take(s.key)
				case "take-even":
					got = b.TakeFunc(s.key, func(m int) bool { return m%2 == 0 })
				case "take-below":
					got = b.TakeWhile(s.key, func(m int) bool { return m < 5 })
				}
				if !slices.Equal(got, s.want) || ok != s.ok {
					t.Fatalf("step %d %s %s: got %v %v, want %v %v", i, s.op, s.key, got, ok, s.want, s.ok)
				}
			}
			if keys := b.Keys(); fmt.Sprint(keys) != fmt.Sprint(tc.wantKeys) {
				t.Errorf("keys %v, want %v", keys, tc.wantKeys)
			}
			if b.Len() != tc.wantLen {
				t.Errorf("len %d, want %d", b.Len(), tc.wantLen)
			}
			sum := 0
			for _, k := range b.Keys() {
				if !b.Has(k) {
					t.Errorf("key %s listed without messages", k)
				}
				sum += b.LenOf(k)
			}
			if sum != b.Len() {
				t.Errorf("the keys hold %d messages, len %d", sum, b.Len())
			}
		})
	}
}

// TestBufferOrderAcrossManyTakes takes keys in another order than they
// came, adds some again, and checks that Keys and the drop of the oldest
// follow the order in which each key's current messages began to wait.
func TestBufferOrderAcrossManyTakes(t *testing.T) {
	const n = 1000
	b := New[int, int](n)
	for k := range n {
		b.Add(k, k)
	}
	for k := n - 1; k >= 0; k -= 2 { // the odd keys, newest first
		if got := b.Take(k); len(got) != 1 || got[0] != k {
			t.Fatalf("Take(%d) = %v", k, got)
		}
	}
	b.Add(1, 1001) // began to wait after every even key
	var want []int
	for k := 0; k < n; k += 2 {
		want = append(want, k)
	}
	want = append(want, 1)
	if got := b.Keys(); !slices.Equal(got, want) {
		t.Fatalf("Keys() = %v..., want %v...", got[:min(5, len(got))], want[:5])
	}
	if b.Len() != n/2+1 || !b.Has(1) || b.Has(3) {
		t.Fatalf("Len %d, Has(1) %v, Has(3) %v", b.Len(), b.Has(1), b.Has(3))
	}
	for _, k := range want[:len(want)-1] {
		b.Take(k)
	}
	for k := range n - 1 { // fill it up behind key 1
		b.Add(n+k, k)
	}
	if dropped, ok := b.AddDroppingOldest(-1, -1); !ok || dropped != 1001 {
		t.Fatalf("AddDroppingOldest dropped %v (%v), want key 1's 1001", dropped, ok)
	}
	if b.Has(1) || b.Len() != n {
		t.Fatalf("after the drop: Has(1) %v, Len %d", b.Has(1), b.Len())
	}
}

// BenchmarkTakeEveryKey: a shard starting n entities takes each one's
// messages in turn.
func BenchmarkTakeEveryKey(b *testing.B) {
	const n = 10000
	for b.Loop() {
		buf := New[int, int](n)
		for k := range n {
			buf.Add(k, k)
		}
		for k := range n {
			buf.Take(k)
		}
	}
}
