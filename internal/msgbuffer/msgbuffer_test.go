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
