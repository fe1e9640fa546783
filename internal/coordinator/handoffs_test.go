package coordinator

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// hoStep is one input to handOffs and what it must answer.
type hoStep struct {
	op     string // begin, assign, wait, done, release
	shard  string
	pid    *actor.PID // the worker (assign), requester (wait) or sender (done)
	want   string     // the answer, as hoApply writes it
	shards []string   // the shards in hand-off after the step
}

// hoApply feeds one step to h and describes its answer.
func hoApply(h *handOffs, s hoStep, at time.Time) string {
	switch s.op {
	case "begin":
		_, replaced, err := h.begin(s.shard, handOffStart{at: at})
		if err != nil {
			return "error: " + errorKind(err)
		}
		return fmt.Sprintf("replaced %v", replaced)
	case "assign":
		h.assign(s.shard, s.pid)
		return ""
	case "wait":
		return fmt.Sprintf("waits %v", h.wait(s.shard, s.pid))
	case "done":
		start, known, err := h.done(s.shard, s.pid)
		if err != nil {
			return "error: " + errorKind(err)
		}
		return fmt.Sprintf("known %v at %v", known, start.at.Equal(at))
	case "release":
		waiting, ok := h.release(s.shard)
		var ids []string
		for _, p := range waiting {
			ids = append(ids, p.GetAddress())
		}
		return fmt.Sprintf("%v [%s]", ok, strings.Join(ids, " "))
	}
	return "unknown op " + s.op
}

func errorKind(err error) string {
	switch {
	case errors.Is(err, errHandOffOrder):
		return "order"
	case errors.Is(err, errNotHandOffWorker):
		return "not worker"
	}
	return err.Error()
}

func TestHandOffTransitions(t *testing.T) {
	worker, other := actor.NewPID("127.0.0.1:1", "worker"), actor.NewPID("127.0.0.1:1", "other")
	r1, r2 := stRegion(1), stRegion(2)
	cases := []struct {
		name  string
		steps []hoStep
	}{
		{"a request for a shard not in hand-off does not wait", []hoStep{
			{op: "wait", shard: "s", pid: r1, want: "waits false"},
			{op: "release", shard: "s", want: "false []"},
		}},
		{"requests wait until the hand-off is released, each sender once", []hoStep{
			{op: "begin", shard: "s", want: "replaced false", shards: []string{"s"}},
			{op: "assign", shard: "s", pid: worker, shards: []string{"s"}},
			{op: "wait", shard: "s", pid: r1, want: "waits true", shards: []string{"s"}},
			{op: "wait", shard: "s", pid: r2, want: "waits true", shards: []string{"s"}},
			{op: "wait", shard: "s", pid: r1, want: "waits true", shards: []string{"s"}},
			{op: "wait", shard: "s", want: "waits true", shards: []string{"s"}},
			{op: "done", shard: "s", pid: worker, want: "known true at true", shards: []string{"s"}},
			{op: "release", shard: "s", want: "true [127.0.0.1:1 127.0.0.2:1]"},
			{op: "wait", shard: "s", pid: r1, want: "waits false"},
		}},
		{"a second hand-off of a shard in hand-off is refused", []hoStep{
			{op: "begin", shard: "s", want: "replaced false", shards: []string{"s"}},
			{op: "begin", shard: "s", want: "error: order", shards: []string{"s"}},
			{op: "begin", shard: "t", want: "replaced false", shards: []string{"s", "t"}},
		}},
		{"only the shard's worker ends its hand-off", []hoStep{
			{op: "begin", shard: "s", want: "replaced false", shards: []string{"s"}},
			{op: "done", shard: "s", pid: worker, want: "error: not worker", shards: []string{"s"}},
			{op: "assign", shard: "s", pid: worker, shards: []string{"s"}},
			{op: "done", shard: "s", pid: other, want: "error: not worker", shards: []string{"s"}},
			{op: "done", shard: "s", want: "error: not worker", shards: []string{"s"}},
			{op: "done", shard: "t", pid: worker, want: "error: not worker", shards: []string{"s"}},
			{op: "done", shard: "s", pid: worker, want: "known true at true", shards: []string{"s"}},
			{op: "done", shard: "s", pid: worker, want: "error: not worker", shards: []string{"s"}},
		}},
		{"a hand-off started again after its release starts afresh", []hoStep{
			{op: "begin", shard: "s", want: "replaced false", shards: []string{"s"}},
			{op: "assign", shard: "s", pid: worker, shards: []string{"s"}},
			{op: "done", shard: "s", pid: worker, want: "known true at true", shards: []string{"s"}},
			{op: "release", shard: "s", want: "true []"},
			{op: "begin", shard: "s", want: "replaced false", shards: []string{"s"}},
		}},
	}
	at := time.Unix(1, 0)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHandOffs()
			for i, s := range tc.steps {
				if got := hoApply(&h, s, at); got != s.want {
					t.Fatalf("step %d %s %s: got %q, want %q", i, s.op, s.shard, got, s.want)
				}
				if got := h.shards(); !slices.Equal(got, s.shards) {
					t.Fatalf("step %d %s %s: in hand-off %v, want %v", i, s.op, s.shard, got, s.shards)
				}
				if h.len() != len(s.shards) || len(h.inProgress()) != len(s.shards) {
					t.Fatalf("step %d: len %d, inProgress %v, want %d shards", i, h.len(), h.inProgress(), len(s.shards))
				}
			}
		})
	}
}

func TestHandOffsWorkersAndUnfinished(t *testing.T) {
	h := newHandOffs()
	w1, w2 := actor.NewPID("127.0.0.1:1", "w1"), actor.NewPID("127.0.0.1:1", "w2")
	for _, s := range []struct {
		shard  string
		worker *actor.PID
	}{{"a", w1}, {"b", w2}} {
		if _, _, err := h.begin(s.shard, handOffStart{rebalance: true}); err != nil {
			t.Fatal(err)
		}
		h.assign(s.shard, s.worker)
	}
	if got := len(h.workerPIDs()); got != 2 {
		t.Fatalf("workers = %d, want 2", got)
	}
	if _, _, err := h.done("a", w1); err != nil {
		t.Fatal(err)
	}
	if got := h.workerPIDs(); len(got) != 1 || !got[0].Equal(w2) {
		t.Fatalf("workers after a's RebalanceDone = %v, want [w2]", got)
	}
	if got := h.unfinished(); len(got) != 1 || !got[0].rebalance {
		t.Fatalf("unfinished = %+v, want b's start", got)
	}
}

// hoPlaced builds a state with regions 1 to n registered (region i by
// member mi) and each "shard@i" of homes on region i.
func hoPlaced(t *testing.T, n int, homes ...string) State {
	t.Helper()
	var events []Event
	for i := 1; i <= n; i++ {
		events = append(events, ShardRegionRegistered{Region: stRegion(i), MemberID: fmt.Sprintf("m%d", i)})
	}
	for _, h := range homes {
		var shard string
		var i int
		if _, err := fmt.Sscanf(strings.Replace(h, "@", " ", 1), "%s %d", &shard, &i); err != nil {
			t.Fatalf("home %q: %v", h, err)
		}
		events = append(events, ShardHomeAllocated{Shard: shard, Region: stRegion(i)})
	}
	return stBuild(t, false, events...)
}

// hoBusy is the bookkeeping of a hand-off of shard in progress.
func hoBusy(t *testing.T, shard string) handOffs {
	t.Helper()
	h := newHandOffs()
	if _, _, err := h.begin(shard, handOffStart{}); err != nil {
		t.Fatal(err)
	}
	return h
}

// settled reports every shard but "unwritten" written.
func settled(shard string) bool { return shard != "unwritten" }

func TestHandOffStartable(t *testing.T) {
	h := hoBusy(t, "busy")
	cases := []struct {
		shard string
		want  bool
	}{{"idle", true}, {"busy", false}, {"unwritten", false}}
	for _, tc := range cases {
		if got := h.startable(tc.shard, settled); got != tc.want {
			t.Fatalf("startable(%s) = %v, want %v", tc.shard, got, tc.want)
		}
	}
}

// TestHandOffEnded drives a hand-off to its end and on: who is answered
// at once, who waits for the old home's forwarding, and for how long.
func TestHandOffEnded(t *testing.T) {
	oldHome, r2, r3 := stRegion(1), stRegion(2), stRegion(3)
	type step struct {
		op     string // begin, wait, forwarded (early or not), ended, endedFailed, endedHomeless, timedOut
		pid    *actor.PID
		answer []*actor.PID // what ended, forwarded or timedOut answer now
		gen    uint64       // ended: the hold started
		held   bool         // after the step: the shard's home is not told around
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"the old home is answered at once, the others once it forwarded", []step{
			{op: "begin"}, {op: "wait", pid: oldHome}, {op: "wait", pid: r2}, {op: "wait", pid: r3},
			{op: "ended", answer: []*actor.PID{oldHome}, gen: 1, held: true},
			{op: "forwarded", answer: []*actor.PID{r2, r3}},
		}},
		{"the hold ends at its time-out", []step{
			{op: "begin"}, {op: "wait", pid: r2},
			{op: "ended", gen: 1, held: true},
			{op: "timedOut", answer: []*actor.PID{r2}},
		}},
		{"an early report ends the hold before it starts", []step{
			{op: "begin"}, {op: "wait", pid: r2},
			{op: "forwarded"},
			{op: "ended", answer: []*actor.PID{r2}},
		}},
		{"a failed hand-off answers everybody and forgets an early report", []step{
			{op: "begin"}, {op: "wait", pid: r2}, {op: "forwarded"},
			{op: "endedFailed", answer: []*actor.PID{r2}},
			{op: "begin"},
			{op: "ended", gen: 1, held: true},
		}},
		{"a shard without a home holds nothing", []step{
			{op: "begin"}, {op: "wait", pid: r2},
			{op: "endedHomeless", answer: []*actor.PID{r2}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, f := newHandOffs(), newForwardHolds()
			var gen uint64
			for i, s := range tc.steps {
				var answer []*actor.PID
				var g uint64
				switch s.op {
				case "begin":
					if _, _, err := h.begin("s", handOffStart{}); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
				case "wait":
					h.wait("s", s.pid)
				case "forwarded":
					answer = f.forwarded("s", oldHome, h.busy("s"))
				case "ended":
					answer, g = h.ended("s", true, oldHome, &f)
					gen = g
				case "endedFailed":
					answer, g = h.ended("s", false, oldHome, &f)
				case "endedHomeless":
					answer, g = h.ended("s", true, nil, &f)
				case "timedOut":
					answer, _ = f.timedOut("s", gen)
				}
				if !slices.EqualFunc(answer, s.answer, func(a, b *actor.PID) bool { return a.Equal(b) }) || g != s.gen {
					t.Fatalf("step %d %s: answers %v, hold %d; want %v, %d", i, s.op, answer, g, s.answer, s.gen)
				}
				if f.held("s") != s.held {
					t.Fatalf("step %d %s: held %v, want %v", i, s.op, f.held("s"), s.held)
				}
			}
		})
	}
}

func TestRebalanceMoves(t *testing.T) {
	st := hoPlaced(t, 2, "a@1", "b@2", "busy@1", "unwritten@1")
	h := hoBusy(t, "busy")
	cases := []struct {
		name   string
		shards []string
		want   string
	}{
		{"nothing to move", nil, ""},
		{"in the strategy's order, each once", []string{"b", "a", "b"}, "b@127.0.0.2:1 a@127.0.0.1:1"},
		{"not a shard in hand-off, unwritten or without a home", []string{"busy", "unwritten", "gone", "a"}, "a@127.0.0.1:1"},
	}
	for _, tc := range cases {
		var got []string
		for _, m := range rebalanceMoves(tc.shards, &st, &h, settled) {
			got = append(got, m.shard+"@"+m.from.GetAddress())
		}
		if strings.Join(got, " ") != tc.want {
			t.Fatalf("%s: rebalanceMoves = %v, want %q", tc.name, got, tc.want)
		}
	}
}
