package shard

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestEntityTable runs random puts and deletes against a map, with IDs
// few enough to collide and to empty the table again, and checks every
// record after each step.
func TestEntityTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 20 {
		var table entityTable
		want := map[string]*entityRecord{}
		ids := 1 + rng.IntN(300)
		for step := range 3000 {
			id := fmt.Sprint("e", rng.IntN(ids))
			if rng.IntN(3) == 0 {
				table.delete(id)
				delete(want, id)
			} else {
				r := &entityRecord{id: id, mark: uint32(step)}
				table.put(r)
				want[id] = r
			}
			if table.len() != len(want) {
				t.Fatalf("round %d step %d: len %d, want %d", round, step, table.len(), len(want))
			}
			if step%97 != 0 {
				continue
			}
			seen := map[string]bool{}
			for r := range table.all() {
				if seen[r.id] || want[r.id] != r {
					t.Fatalf("round %d step %d: all yielded %q (seen %v)", round, step, r.id, seen[r.id])
				}
				seen[r.id] = true
			}
			for i := range ids {
				id := fmt.Sprint("e", i)
				if got := table.get(id); got != want[id] {
					t.Fatalf("round %d step %d: get(%q) = %v, want %v", round, step, id, got, want[id])
				}
			}
		}
	}
}

func TestEntityTableZeroValue(t *testing.T) {
	var table entityTable
	if table.get("a") != nil || table.len() != 0 {
		t.Fatal("an empty table has a record")
	}
	table.delete("a")
	for range table.all() {
		t.Fatal("an empty table yields a record")
	}
	a := &entityRecord{id: "a"}
	table.put(a)
	again := &entityRecord{id: "a", state: active}
	table.put(again)
	if table.get("a") != again || table.len() != 1 {
		t.Fatal("put did not replace the record of the same ID")
	}
	table.delete("a")
	if table.get("a") != nil || table.len() != 0 {
		t.Fatal("delete")
	}
	// Stop early.
	for _, id := range []string{"x", "y", "z"} {
		table.put(&entityRecord{id: id})
	}
	n := 0
	for range table.all() {
		n++
		break
	}
	if n != 1 {
		t.Fatalf("iteration went on after a stop: %d", n)
	}
}
