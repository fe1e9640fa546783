package expiring

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// Each case drives a set step by step, with the time of each step given:
// an entry must be there for its whole retention after its last put, and
// gone after the first write once that has passed, unless pinned.
func TestSet(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	const retention = time.Hour
	type step struct {
		at     time.Duration // since t0
		put    string        // key to put ("": none)
		del    string        // key to delete
		prune  bool
		pin    []string // pinned from this step on
		want   []string // the keys afterwards
		reason string
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"kept for its retention, then pruned by a write", []step{
			{at: 0, put: "a", want: []string{"a"}},
			{at: 30 * time.Minute, put: "b", want: []string{"a", "b"}},
			{at: retention - time.Nanosecond, put: "c", want: []string{"a", "b", "c"}, reason: "a is one nanosecond short of its retention"},
			{at: retention, put: "d", want: []string{"b", "c", "d"}, reason: "a's retention has passed"},
			{at: 3 * time.Hour, prune: true, want: nil},
		}},
		{"reads never prune: an expired entry stays until a write", []step{
			{at: 0, put: "a", want: []string{"a"}},
			{at: 10 * retention, want: []string{"a"}},
			{at: 10 * retention, put: "b", want: []string{"b"}},
		}},
		{"a put again starts the retention again", []step{
			{at: 0, put: "a"},
			{at: 50 * time.Minute, put: "a"},
			{at: 90 * time.Minute, put: "b", want: []string{"a", "b"}},
			{at: 110 * time.Minute, put: "c", want: []string{"b", "c"}},
		}},
		{"a burst of writes evicts nothing within the retention", []step{
			{at: 0, put: "a"},
			{at: time.Minute, put: "b0"}, {at: time.Minute, put: "b1"}, {at: time.Minute, put: "b2"},
			{at: time.Minute, put: "b3"}, {at: time.Minute, put: "b4"}, {at: time.Minute, put: "b5"},
			{at: 59 * time.Minute, put: "c", want: []string{"a", "b0", "b1", "b2", "b3", "b4", "b5", "c"}},
		}},
		{"a pinned entry outlives its retention, and gets another once unpinned", []step{
			{at: 0, put: "a", pin: []string{"a"}},
			{at: 0, put: "b"},
			{at: 2 * time.Hour, prune: true, want: []string{"a"}, reason: "a is pinned; its retention starts again"},
			{at: 2*time.Hour + 30*time.Minute, pin: []string{}, prune: true, want: []string{"a"}, reason: "unpinned, a still has half an hour"},
			{at: 3 * time.Hour, prune: true, want: nil},
		}},
		{"delete", []step{
			{at: 0, put: "a"}, {at: 0, put: "b"},
			{at: time.Minute, del: "a", want: []string{"b"}},
			{at: 2 * time.Hour, prune: true, want: nil},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var pinned []string
			s := NewSet[int](retention, func(k string) bool { return slices.Contains(pinned, k) })
			for i, st := range tc.steps {
				now := t0.Add(st.at)
				if st.pin != nil {
					pinned = st.pin
				}
				if st.put != "" {
					s.Put(st.put, i, now)
				}
				if st.del != "" {
					s.Delete(st.del)
				}
				if st.prune {
					s.Prune(now)
				}
				if st.want == nil && st.put != "" && !st.prune {
					continue // a step that only builds the set up
				}
				if got := keys(&s); !slices.Equal(got, st.want) {
					t.Fatalf("step %d (at %v): keys %v, want %v %s", i, st.at, got, st.want, st.reason)
				}
			}
		})
	}
}

func keys(s *Set[int]) []string {
	var out []string
	for k := range s.entries {
		if !s.Has(k) {
			panic("Has disagrees with the entries")
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Get returns what was put last; a set that shrank to a quarter of its
// peak is copied into a fresh map, and keeps its entries.
func TestSetValuesAndShrink(t *testing.T) {
	t0 := time.Now()
	s := NewSet[string](time.Minute, nil)
	for i := range 1000 {
		s.Put(fmt.Sprint(i), "v", t0)
	}
	s.Put("kept", "first", t0.Add(30*time.Second))
	s.Put("kept", "second", t0.Add(40*time.Second))
	if v, ok := s.Get("kept"); !ok || v != "second" {
		t.Fatalf("Get = %q, %v; want the last value", v, ok)
	}
	if s.peak != 1001 {
		t.Fatalf("peak %d, want 1001", s.peak)
	}
	s.Prune(t0.Add(time.Minute))
	if s.Len() != 1 || !s.Has("kept") || s.peak != 1 {
		t.Fatalf("after the prune: %d entries, peak %d; want only kept, in a fresh map", s.Len(), s.peak)
	}
	if _, ok := s.Get("0"); ok {
		t.Fatal("an expired entry is still there")
	}
}

func TestWindow(t *testing.T) {
	cases := []struct {
		def, bound, want time.Duration
	}{
		{24 * time.Hour, 0, 24 * time.Hour},
		{24 * time.Hour, 95 * time.Second, 24 * time.Hour},
		{0, 0, SafetyFactor * time.Minute},
		{time.Hour, 30 * time.Minute, SafetyFactor * 30 * time.Minute},
	}
	for _, c := range cases {
		if got := Window(c.def, c.bound); got != c.want {
			t.Errorf("Window(%v, %v) = %v, want %v", c.def, c.bound, got, c.want)
		}
	}
}
