package singleton

import (
	"fmt"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/membership"
)

// TestOldestHistory drives a Younger member c through the oldest changes
// and removals of a cluster a, b, c, input by input; each step gives the
// decision expected and the previous oldest members (most recent first)
// and removed members after it.
func TestOldestHistory(t *testing.T) {
	a, b, c := mem("a", 1), mem("b", 2), mem("c", 3)
	type step struct {
		name        string
		do          func(h *oldestHistory) any
		want        any
		wantPrev    string
		wantRemoved string
	}
	changed := func(o *membership.Member) func(*oldestHistory) any {
		return func(h *oldestHistory) any { return h.oldestChanged(c, o) }
	}
	removed := func(id string) func(*oldestHistory) any {
		return func(h *oldestHistory) any { return h.memberRemoved(id) }
	}
	counted := func(id string) func(*oldestHistory) any {
		return func(h *oldestHistory) any { h.removalCounted(id); return nil }
	}
	previousRemoved := func(id string) func(*oldestHistory) any {
		return func(h *oldestHistory) any { return h.previousRemoved(id) }
	}
	takeOver := func(id string, sender *actor.PID) func(*oldestHistory) any {
		return func(h *oldestHistory) any { return h.takeOverFromMe(id, sender) }
	}
	doneFrom := func(id string) func(*oldestHistory) any {
		return func(h *oldestHistory) any { return h.handOverDoneFrom(id) }
	}
	firstLive := func(h *oldestHistory) any {
		p, ok := h.firstLive()
		return fmt.Sprintf("%s %v", p.ID, ok)
	}
	cases := []struct {
		name  string
		only  *membership.Member
		steps []step
	}{
		{"the oldest leaves, then the next one crashes", ptr(a), []step{
			{"b becomes oldest", changed(ptr(b)), stayYounger, "b a", ""},
			{"b again", changed(ptr(b)), stayYounger, "b a", ""},
			{"a removed: counted after the margin", removed("a"), true, "b a", ""},
			{"a counted", counted("a"), nil, "b", "a"},
			{"b crashes: counted later", removed("b"), true, "b", "a"},
			{"c becomes oldest: b may still run it", changed(ptr(c)), askHandOver, "b", "a"},
			{"HandOverDone from a stranger", doneFrom("x"), false, "b", "a"},
			{"HandOverDone from b", doneFrom("b"), true, "b", "a"},
			{"b counted in BecomingOldest: take over", previousRemoved("b"), true, "b", "a b"},
			{"no live previous oldest", firstLive, " false", "b", "a b"},
		}},
		{"a member that is not a previous oldest is removed at once", ptr(a), []step{
			{"x removed", removed("x"), false, "a", "x"},
			{"x counted in BecomingOldest: not a previous oldest", previousRemoved("x"), false, "a", "x"},
			{"a becomes first live", firstLive, "a true", "a", "x"},
			{"TakeOverFromMe from x (removed)", takeOver("x", actor.NewPID("127.0.0.1:x", "m")), ignoreRemovedTakeOver, "a", "x"},
			{"TakeOverFromMe from b (unexpected)", takeOver("b", actor.NewPID("127.0.0.1:b", "m")), ignoreUnexpectedTakeOver, "a", "x"},
			{"TakeOverFromMe from a", takeOver("a", nil), answerHandOverToMe, "a", "x"},
		}},
		{"a TakeOverFromMe names the previous oldest when none is known", nil, []step{
			{"c becomes oldest with nobody before", changed(ptr(c)), becomeOldestNow, "", ""},
			{"TakeOverFromMe without a sender", takeOver("a", nil), ignoreUnexpectedTakeOver, "", ""},
			{"TakeOverFromMe from a", takeOver("a", actor.NewPID("127.0.0.1:a", "m")), answerHandOverToMe, "a", ""},
			{"a is now waited for", doneFrom("a"), true, "a", ""},
			{"two removed previous oldest: still a", previousRemoved("b"), false, "a", "b"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newOldestHistory()
			h.only(tc.only)
			for _, s := range tc.steps {
				if got := s.do(&h); got != s.want {
					t.Fatalf("%s: got %v, want %v", s.name, got, s.want)
				}
				var prev []string
				for _, p := range h.previous {
					prev = append(prev, p.ID)
				}
				var gone []string
				for _, id := range []string{"a", "b", "c", "x"} {
					if h.isRemoved(id) {
						gone = append(gone, id)
					}
				}
				if fmt.Sprint(prev) != "["+s.wantPrev+"]" || fmt.Sprint(gone) != "["+s.wantRemoved+"]" {
					t.Fatalf("%s: previous %v removed %v, want [%s] [%s]", s.name, prev, gone, s.wantPrev, s.wantRemoved)
				}
			}
			h.rejoined()
			if h.isRemoved("a") || h.isRemoved("b") || h.isRemoved("x") {
				t.Fatal("a re-joined member still knows members removed before")
			}
			h.forget()
			if _, ok := h.mostRecent(); ok {
				t.Fatal("forget kept a previous oldest")
			}
		})
	}
}
