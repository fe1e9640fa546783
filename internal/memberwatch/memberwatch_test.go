package memberwatch_test

import (
	"testing"

	"github.com/protoshard/protoshard/internal/memberwatch"
	"github.com/protoshard/protoshard/membership"
)

func TestVanishedLeavers(t *testing.T) {
	up := func(id string) membership.Member { return membership.Member{ID: id, Status: membership.Up} }
	leaving := func(id string) membership.Member { return membership.Member{ID: id, Status: membership.Leaving} }
	graceful := map[string]bool{"b": true, "c": true, "d": true}
	asked := map[string]int{}
	left := func(id string) bool { asked[id]++; return graceful[id] }
	got := memberwatch.VanishedLeavers(
		[]membership.Member{up("a"), up("b"), leaving("c"), up("d"), up("e")},
		[]membership.Member{up("a"), up("d")},
		left)
	// b: vanished while Up and graceful; c: was seen Leaving already; d:
	// still there; e: vanished, not graceful (a crash).
	if len(got) != 1 || got[0].ID != "b" || got[0].Status != membership.Leaving {
		t.Errorf("VanishedLeavers = %+v, want only b, Leaving", got)
	}
	if asked["a"]+asked["c"]+asked["d"] != 0 || asked["b"] != 1 || asked["e"] != 1 {
		t.Errorf("asked about %v; want only the vanished Up members b and e", asked)
	}
}
