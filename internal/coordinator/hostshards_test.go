package coordinator

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// TestHostShardResends drives the HostShard resend bookkeeping input by
// input: a timer per shard, cancelled once and only once.
func TestHostShardResends(t *testing.T) {
	st := hoPlaced(t, 2, "a@1")
	cancelled := map[int]int{} // timer -> times cancelled
	timer := func(n int) func() { return func() { cancelled[n]++ } }
	type step struct {
		op        string // sent, stop, started, due, dueInHandOff, stopAll
		shard     string
		pid       *actor.PID // started: the sender; due: the region
		timer     int        // sent: the timer
		want      string     // started: "true"/"false"; due: the region's address or ""
		cancelled map[int]int
		timers    int // timers left after the step
	}
	steps := []step{
		{op: "sent", shard: "a", timer: 1, cancelled: map[int]int{}, timers: 1},
		{op: "sent", shard: "a", timer: 2, cancelled: map[int]int{1: 1}, timers: 1},
		{op: "started", shard: "a", pid: stRegion(2), want: "false", cancelled: map[int]int{1: 1}, timers: 1},
		{op: "started", shard: "a", want: "false", cancelled: map[int]int{1: 1}, timers: 1},
		{op: "started", shard: "a", pid: stRegion(1), want: "true", cancelled: map[int]int{1: 1, 2: 1}},
		{op: "started", shard: "a", pid: stRegion(1), want: "true", cancelled: map[int]int{1: 1, 2: 1}},
		{op: "sent", shard: "a", timer: 3, cancelled: map[int]int{1: 1, 2: 1}, timers: 1},
		// A timer that fired is forgotten, not cancelled.
		{op: "due", shard: "a", pid: stRegion(1), want: "127.0.0.1:1", cancelled: map[int]int{1: 1, 2: 1}},
		{op: "stop", shard: "a", cancelled: map[int]int{1: 1, 2: 1}},
		{op: "sent", shard: "a", timer: 4, cancelled: map[int]int{1: 1, 2: 1}, timers: 1},
		{op: "due", shard: "a", pid: stRegion(2), want: "", cancelled: map[int]int{1: 1, 2: 1}},
		{op: "due", shard: "b", pid: stRegion(1), want: "", cancelled: map[int]int{1: 1, 2: 1}},
		{op: "dueInHandOff", shard: "a", pid: stRegion(1), want: "", cancelled: map[int]int{1: 1, 2: 1}},
		{op: "sent", shard: "a", timer: 5, cancelled: map[int]int{1: 1, 2: 1}, timers: 1},
		{op: "sent", shard: "b", timer: 6, cancelled: map[int]int{1: 1, 2: 1}, timers: 2},
		{op: "stop", shard: "b", cancelled: map[int]int{1: 1, 2: 1, 6: 1}, timers: 1},
		{op: "stopAll", cancelled: map[int]int{1: 1, 2: 1, 5: 1, 6: 1}},
		{op: "stopAll", cancelled: map[int]int{1: 1, 2: 1, 5: 1, 6: 1}},
	}
	h := newHostShardResends()
	for i, s := range steps {
		got := ""
		switch s.op {
		case "sent":
			h.sent(s.shard, timer(s.timer))
		case "stop":
			h.stop(s.shard)
		case "stopAll":
			h.stopAll()
		case "started":
			if h.started(&st, s.shard, s.pid) {
				got = "true"
			} else {
				got = "false"
			}
		case "due", "dueInHandOff":
			got = h.due(&st, s.shard, s.pid, s.op == "dueInHandOff").GetAddress()
		}
		if got != s.want {
			t.Fatalf("step %d %s %s: got %q, want %q", i, s.op, s.shard, got, s.want)
		}
		if len(cancelled) != len(s.cancelled) {
			t.Fatalf("step %d %s %s: cancelled %v, want %v", i, s.op, s.shard, cancelled, s.cancelled)
		}
		for n, c := range s.cancelled {
			if cancelled[n] != c {
				t.Fatalf("step %d %s %s: cancelled %v, want %v", i, s.op, s.shard, cancelled, s.cancelled)
			}
		}
		if len(h.cancels) != s.timers {
			t.Fatalf("step %d %s %s: %d timers, want %d", i, s.op, s.shard, len(h.cancels), s.timers)
		}
	}
}
