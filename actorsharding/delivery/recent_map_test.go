package delivery

import "testing"

// TestRecentMap drives a recentMap step by step: what get finds after each
// put, remove and reset, whether the key found last is still in the map
// or not.
func TestRecentMap(t *testing.T) {
	type step struct {
		op    string // get, put, remove, reset
		key   string
		val   int
		want  int
		found bool
		size  int
	}
	steps := []step{
		{op: "get", key: "a", found: false, size: 0},
		{op: "put", key: "a", val: 1, size: 1},
		{op: "get", key: "a", want: 1, found: true, size: 1},
		{op: "put", key: "b", val: 2, size: 2},
		{op: "get", key: "a", want: 1, found: true, size: 2},
		{op: "put", key: "a", val: 3, size: 2},
		{op: "get", key: "a", want: 3, found: true, size: 2}, // a changed while it was the last found
		{op: "get", key: "b", want: 2, found: true, size: 2},
		{op: "remove", key: "b", size: 1},
		{op: "get", key: "b", found: false, size: 1}, // removed while the last found
		{op: "get", key: "a", want: 3, found: true, size: 1},
		{op: "remove", key: "b", size: 1}, // not there: nothing changes
		{op: "get", key: "a", want: 3, found: true, size: 1},
		{op: "reset", size: 0},
		{op: "get", key: "a", found: false, size: 0}, // reset while the last found
		{op: "put", key: "", val: 4, size: 1},        // the zero key is a key like any other
		{op: "get", key: "", want: 4, found: true, size: 1},
		{op: "remove", key: "", size: 0},
		{op: "get", key: "", found: false, size: 0},
	}
	var r recentMap[string, int]
	for i, s := range steps {
		switch s.op {
		case "get":
			v, ok := r.get(s.key)
			if v != s.want || ok != s.found {
				t.Fatalf("step %d: get(%q) = %d, %v; want %d, %v", i, s.key, v, ok, s.want, s.found)
			}
		case "put":
			r.put(s.key, s.val)
		case "remove":
			r.remove(s.key)
		case "reset":
			r.reset()
		}
		if r.len() != s.size || len(r.all()) != s.size {
			t.Fatalf("step %d (%s %q): %d keys, want %d", i, s.op, s.key, r.len(), s.size)
		}
	}
}
