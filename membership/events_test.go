package membership_test

import (
	"reflect"
	"testing"

	"github.com/protoshard/protoshard/membership"
)

func up(id string, age uint64) membership.Member {
	return membership.Member{ID: id, Age: age, Address: "127.0.0.1:" + id}
}

func leaving(id string, age uint64) membership.Member {
	m := up(id, age)
	m.Status = membership.Leaving
	return m
}

func TestDiff(t *testing.T) {
	a, b, c, d, e := up("a", 1), up("b", 2), up("c", 3), up("d", 4), up("e", 5)
	la, lb, lc := leaving("a", 1), leaving("b", 2), leaving("c", 3)
	tests := []struct {
		name       string
		prev, next []membership.Member
		removed    map[string]bool
		want       []any
	}{
		{name: "nothing", want: nil},
		{name: "no change", prev: []membership.Member{a, lb}, next: []membership.Member{lb, a}, want: nil},
		{name: "join", prev: []membership.Member{a}, next: []membership.Member{a, b},
			want: []any{membership.MemberUp{Member: b}}},
		{name: "first snapshot, oldest first whatever the input order", next: []membership.Member{c, a, b},
			want: []any{membership.MemberUp{Member: a}, membership.MemberUp{Member: b}, membership.MemberUp{Member: c}}},
		{name: "leave", prev: []membership.Member{a, b}, next: []membership.Member{a, lb},
			want: []any{membership.MemberLeft{Member: lb}}},
		{name: "leaving back to up is not an event", prev: []membership.Member{a, lb}, next: []membership.Member{a, b}, want: nil},
		{name: "removal without leave is not graceful", prev: []membership.Member{a, b}, next: []membership.Member{a},
			want: []any{membership.MemberRemoved{Member: b, Graceful: false}}},
		{name: "removal after leave is graceful", prev: []membership.Member{a, lb}, next: []membership.Member{a},
			want: []any{membership.MemberRemoved{Member: lb, Graceful: true}}},
		{name: "appears already leaving: up then left", prev: []membership.Member{a}, next: []membership.Member{a, lb},
			want: []any{membership.MemberUp{Member: b}, membership.MemberLeft{Member: lb}}},
		{name: "removed id ignored when it comes back", prev: []membership.Member{a}, next: []membership.Member{a, b},
			removed: map[string]bool{"b": true}, want: nil},
		{name: "removed id ignored when it comes back leaving", prev: []membership.Member{a}, next: []membership.Member{lb, a},
			removed: map[string]bool{"b": true}, want: nil},
		{name: "removed id ignored in the first snapshot", next: []membership.Member{a, b},
			removed: map[string]bool{"a": true}, want: []any{membership.MemberUp{Member: b}}},
		{name: "everyone gone, oldest first", prev: []membership.Member{c, la, b}, next: nil,
			want: []any{
				membership.MemberRemoved{Member: la, Graceful: true},
				membership.MemberRemoved{Member: b},
				membership.MemberRemoved{Member: c},
			}},
		{
			name: "mixed: removals oldest first, then ups and lefts oldest first",
			prev: []membership.Member{c, b, a, d},
			next: []membership.Member{e, lc, b, up("f", 6)},
			want: []any{
				membership.MemberRemoved{Member: a},
				membership.MemberRemoved{Member: d},
				membership.MemberLeft{Member: lc},
				membership.MemberUp{Member: e},
				membership.MemberUp{Member: up("f", 6)},
			},
		},
		{
			// A re-join after removal: same address, new id and age. The
			// old incarnation must be gone before the new one is up.
			name: "re-joined incarnation: old removed before new up",
			prev: []membership.Member{a, b},
			next: []membership.Member{a, {ID: "b2", Age: 7, Address: b.Address}},
			want: []any{
				membership.MemberRemoved{Member: b},
				membership.MemberUp{Member: membership.Member{ID: "b2", Age: 7, Address: b.Address}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			removed := tt.removed
			if removed == nil {
				removed = map[string]bool{}
			}
			got := membership.Diff(tt.prev, tt.next, removed)
			if len(got) == 0 && len(tt.want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Diff =\n  %+v\nwant\n  %+v", got, tt.want)
			}
		})
	}
}

func TestDiffIsDeterministic(t *testing.T) {
	prev := []membership.Member{up("a", 1), up("b", 2), up("c", 3), up("d", 4)}
	next := []membership.Member{leaving("c", 3), up("x", 9), up("y", 8), up("a", 1)}
	want := membership.Diff(prev, next, map[string]bool{})
	for i := 0; i < 50; i++ {
		// Shuffle the inputs by rotating them; map iteration inside must
		// not leak into the order of the events.
		p := append(append([]membership.Member{}, prev[i%len(prev):]...), prev[:i%len(prev)]...)
		n := append(append([]membership.Member{}, next[i%len(next):]...), next[:i%len(next)]...)
		if got := membership.Diff(p, n, map[string]bool{}); !reflect.DeepEqual(got, want) {
			t.Fatalf("rotation %d: Diff =\n  %+v\nwant\n  %+v", i, got, want)
		}
	}
}

func TestDiffDoesNotModifyRemoved(t *testing.T) {
	removed := map[string]bool{"z": true}
	membership.Diff([]membership.Member{up("a", 1)}, nil, removed)
	if len(removed) != 1 {
		t.Errorf("Diff changed removed: %v", removed)
	}
}
