package coordinator

import (
	"slices"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// TestForwardHolds drives the coordinator's forwarding holds step by step:
// each step is one event and what it must answer.
func TestForwardHolds(t *testing.T) {
	old := actor.NewPID("127.0.0.1:1", "sharding/T")
	r2 := actor.NewPID("127.0.0.1:2", "sharding/T")
	r3 := actor.NewPID("127.0.0.1:3", "sharding/T")
	type step struct {
		do   string // handedOff, hold, forwarded, forwardedEarly, timedOut, regionGone, abandon
		who  *actor.PID
		wait []*actor.PID // handedOff: the requests that waited during the hand-off
		gen  uint64       // timedOut: the hold's generation (0: the last one started)
		// want: the requests answered now; held: hold's verdict, and
		// whether the shard is held after the step.
		want       []*actor.PID
		holdResult bool
		heldAfter  bool
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"the old home's own request is answered, the others wait for its report", []step{
			{do: "handedOff", who: old, wait: []*actor.PID{r2, old, r3}, want: []*actor.PID{old}, heldAfter: true},
			{do: "hold", who: r2, holdResult: true, heldAfter: true},
			{do: "hold", who: old, holdResult: false, heldAfter: true},
			{do: "forwarded", who: old, want: []*actor.PID{r2, r3}, heldAfter: false},
			{do: "hold", who: r2, holdResult: false},
		}},
		{"a report from another region than the old home ends nothing", []step{
			{do: "handedOff", who: old, wait: []*actor.PID{r2}, heldAfter: true},
			{do: "forwarded", who: r3, heldAfter: true},
			{do: "forwarded", who: old, want: []*actor.PID{r2}},
		}},
		{"a report before the hand-off ended: no hold at all", []step{
			{do: "forwardedEarly", who: old},
			{do: "handedOff", who: old, wait: []*actor.PID{r2, r3}, want: []*actor.PID{r2, r3}},
			{do: "hold", who: r2, holdResult: false},
		}},
		{"an early report of another old home does not count", []step{
			{do: "forwardedEarly", who: r3},
			{do: "handedOff", who: old, wait: []*actor.PID{r2}, heldAfter: true},
		}},
		{"a failed hand-off forgets the early report", []step{
			{do: "forwardedEarly", who: old},
			{do: "abandon"},
			{do: "handedOff", who: old, wait: []*actor.PID{r2}, heldAfter: true},
		}},
		{"the time-out releases the hold", []step{
			{do: "handedOff", who: old, wait: []*actor.PID{r2}, heldAfter: true},
			{do: "hold", who: r3, holdResult: true, heldAfter: true},
			{do: "timedOut", want: []*actor.PID{r2, r3}},
		}},
		{"a time-out of an earlier hold does nothing", []step{
			{do: "handedOff", who: old, wait: []*actor.PID{r2}, heldAfter: true},
			{do: "forwarded", who: old, want: []*actor.PID{r2}},
			{do: "handedOff", who: old, wait: []*actor.PID{r3}, heldAfter: true},
			{do: "timedOut", gen: 1, heldAfter: true},
		}},
		{"the old home gone releases its holds", []step{
			{do: "handedOff", who: old, wait: []*actor.PID{r2}, heldAfter: true},
			{do: "regionGone", who: r3, heldAfter: true},
			{do: "regionGone", who: old, want: []*actor.PID{r2}},
		}},
		{"a request waits once", []step{
			{do: "handedOff", who: old, heldAfter: true},
			{do: "hold", who: r2, holdResult: true, heldAfter: true},
			{do: "hold", who: r2, holdResult: true, heldAfter: true},
			{do: "forwarded", who: old, want: []*actor.PID{r2}},
		}},
	}
	const shard = "7"
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newForwardHolds()
			var lastGen uint64
			for i, s := range tc.steps {
				var got []*actor.PID
				switch s.do {
				case "handedOff":
					var gen uint64
					got, gen = f.handedOff(shard, s.who, s.wait)
					if gen != 0 {
						lastGen = gen
					}
					if (gen != 0) != s.heldAfter {
						t.Fatalf("step %d: handedOff generation %d, want a hold: %v", i, gen, s.heldAfter)
					}
				case "hold":
					if h := f.hold(shard, s.who); h != s.holdResult {
						t.Fatalf("step %d: hold(%v) = %v, want %v", i, s.who, h, s.holdResult)
					}
				case "forwarded":
					got = f.forwarded(shard, s.who, false)
				case "forwardedEarly":
					got = f.forwarded(shard, s.who, true)
				case "timedOut":
					gen := s.gen
					if gen == 0 {
						gen = lastGen
					}
					got, _ = f.timedOut(shard, gen)
				case "regionGone":
					got = f.regionGone(s.who)[shard]
				case "abandon":
					f.abandon(shard)
				default:
					t.Fatalf("unknown step %q", s.do)
				}
				if !slices.EqualFunc(got, s.want, func(a, b *actor.PID) bool { return a.Equal(b) }) {
					t.Fatalf("step %d (%s): answered %v, want %v", i, s.do, got, s.want)
				}
				if f.held(shard) != s.heldAfter {
					t.Fatalf("step %d (%s): held = %v, want %v", i, s.do, f.held(shard), s.heldAfter)
				}
			}
		})
	}
}
