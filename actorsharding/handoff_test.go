package actorsharding

import (
	"maps"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

type relayStep struct {
	learn  bool          // homeLearned instead of beginHandOff
	at     time.Duration // when, after the first step
	worker *actor.PID    // the worker asking; nil: worker1
	home   *actor.PID    // the home known at BeginHandOff
	want   *actor.PID    // where the ack goes (nil: the worker)
}

func samePID(a, b *actor.PID) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && a.Equal(b))
}

// TestHandOffsRelays: a region acknowledges BeginHandOff through the old
// home it forwarded to, again on a BeginHandOff the same worker repeats
// even though it forgot that home at the first, until it learns the
// shard's home; another worker's BeginHandOff is a new hand-off.
func TestHandOffsRelays(t *testing.T) {
	oldHome := actor.NewPID("127.0.0.1:1", "sharding/T")
	worker1 := actor.NewPID("127.0.0.1:9", "sharding/TCoordinator/singleton/coordinator/$1")
	worker2 := actor.NewPID("127.0.0.1:9", "sharding/TCoordinator/singleton/coordinator/$2")
	cases := []struct {
		name  string
		steps []relayStep
	}{
		{"knew the home: through it, twice", []relayStep{{home: oldHome, want: oldHome}, {home: nil, want: oldHome}}},
		{"knew no home: straight to the worker", []relayStep{{home: nil, want: nil}, {home: nil, want: nil}}},
		{"the home learned again ends the relay", []relayStep{{home: oldHome, want: oldHome}, {learn: true}, {home: nil, want: nil}}},
		{"another worker's hand-off: the old relay no longer counts", []relayStep{{home: oldHome, want: oldHome}, {worker: worker2, home: nil, want: nil}}},
		{"within the hand-off timeout: still through the old home", []relayStep{{home: oldHome, want: oldHome}, {at: 9 * time.Second, home: nil, want: oldHome}}},
		{"after the hand-off timeout the worker gave up: the relay is gone", []relayStep{{home: oldHome, want: oldHome}, {at: 10 * time.Second, home: nil, want: nil}}},
	}
	const timeout = 10 * time.Second
	t0 := time.Unix(1000, 0)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHandOffs()
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				h.expireAwaiting(now, timeout, func(string) bool { return true })
				if s.learn {
					h.homeLearned("7")
					continue
				}
				worker := s.worker
				if worker == nil {
					worker = worker1
				}
				if got := h.beginHandOff("7", worker, s.home, now); !samePID(got, s.want) {
					t.Fatalf("step %d: ack through %v, want %v", i, got, s.want)
				}
				if !h.involves("7") && s.want != nil {
					t.Fatalf("step %d: a relayed shard is not involved in a hand-off", i)
				}
			}
		})
	}
}

// TestHandOffsOwed: the old home's debt from HandOff to the coordinator's
// acknowledgement of its report.
func TestHandOffsOwed(t *testing.T) {
	newHome := actor.NewPID("127.0.0.1:2", "sharding/T")
	t0 := time.Unix(1000, 0)
	h := newHandOffs()
	if owes, _ := h.owes("7"); owes {
		t.Fatal("owes before any hand-off")
	}
	if err := h.reported("7", nil); err == nil {
		t.Fatal("a report of a shard not owed was accepted")
	}
	h.handedOff("7", t0)
	h.handedOff("7", t0.Add(time.Second)) // a repeated HandOff keeps the first time
	h.handedOff("8", t0.Add(2*time.Second))
	if owes, reported := h.owes("7"); !owes || reported {
		t.Fatalf("after HandOff: owes %v, reported %v", owes, reported)
	}
	if len(h.resends()) != 0 {
		t.Fatal("resends before any report")
	}
	if err := h.reported("7", newHome); err != nil {
		t.Fatal(err)
	}
	if err := h.reported("8", nil); err != nil {
		t.Fatal(err)
	}
	want := map[string]*actor.PID{"7": newHome, "8": nil}
	if got := h.resends(); !maps.EqualFunc(got, want, samePID) {
		t.Fatalf("resends %v, want %v", got, want)
	}
	if h.owedCount() != 2 {
		t.Fatalf("owed %d, want 2", h.owedCount())
	}
	if !h.acked("7") || h.acked("7") {
		t.Fatal("acked: want true once, then false")
	}
	if got := h.expire(t0.Add(3*time.Second), 2*time.Second); len(got) != 0 {
		t.Fatalf("expired %v before its time-out", got)
	}
	if got := h.expire(t0.Add(4*time.Second), 2*time.Second); len(got) != 1 || got[0] != "8" {
		t.Fatalf("expired %v, want [8]", got)
	}
	if h.owedCount() != 0 {
		t.Fatalf("owed %d after all ended, want 0", h.owedCount())
	}
}

// TestHandOffsAwaitForward: the new home waits for its old home's report,
// unless the report came first; a wait ends with the report, the time-out
// or the old home's removal.
func TestHandOffsAwaitForward(t *testing.T) {
	oldHome := actor.NewPID("127.0.0.1:1", "sharding/T")
	other := actor.NewPID("127.0.0.1:3", "sharding/T")
	t0 := time.Unix(1000, 0)
	timeout := 10 * time.Second
	live := func(string) bool { return true }

	h := newHandOffs()
	if !h.awaitForward("7", oldHome, t0, timeout) || !h.awaits("7") {
		t.Fatal("HostShard with a forwarding old home: want a wait")
	}
	if h.forwardArrived("7", other, t0) || !h.awaits("7") {
		t.Fatal("another region's report ended the wait")
	}
	if !h.forwardArrived("7", oldHome, t0) || h.awaits("7") {
		t.Fatal("the old home's report did not end the wait")
	}

	// The report first, then the HostShard: no wait; but only for a
	// report within the time-out.
	h = newHandOffs()
	if h.forwardArrived("8", oldHome, t0) {
		t.Fatal("a report with nobody waiting ended a wait")
	}
	if h.awaitForward("8", oldHome, t0.Add(time.Second), timeout) {
		t.Fatal("waited for a report that had arrived")
	}
	h.forwardArrived("9", oldHome, t0)
	if !h.awaitForward("9", oldHome, t0.Add(timeout), timeout) {
		t.Fatal("a report older than the time-out counted")
	}

	// Expiry: by time-out, and by the old home's removal.
	h = newHandOffs()
	h.awaitForward("1", oldHome, t0, timeout)
	h.awaitForward("2", other, t0.Add(5*time.Second), timeout)
	if got := h.expireAwaiting(t0.Add(9*time.Second), timeout, live); len(got) != 0 {
		t.Fatalf("expired %v early", got)
	}
	if got := h.expireAwaiting(t0.Add(10*time.Second), timeout, live); len(got) != 1 || got[0] != "1" {
		t.Fatalf("expired %v, want [1]", got)
	}
	gone := func(addr string) bool { return addr != other.Address }
	if got := h.expireAwaiting(t0.Add(11*time.Second), timeout, gone); len(got) != 1 || got[0] != "2" {
		t.Fatalf("expired %v, want [2] (its old home is gone)", got)
	}
}

// TestShardBuffersTakeForwarded: what other regions forwarded leaves the
// buffer first, in order; the rest stays in order.
func TestShardBuffersTakeForwarded(t *testing.T) {
	b := newShardBuffers(10)
	for i, fwd := range []bool{false, true, false, true, true} {
		if err := b.add("7", bufferedMessage{entityID: string(rune('a' + i)), forwarded: fwd}); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(ms []bufferedMessage) string {
		out := ""
		for _, m := range ms {
			out += m.entityID
		}
		return out
	}
	if got := ids(b.takeForwarded("7")); got != "bde" {
		t.Fatalf("forwarded %q, want bde", got)
	}
	if b.len() != 2 || !b.has("7") {
		t.Fatalf("after takeForwarded: len %d", b.len())
	}
	if got := b.takeForwarded("7"); got != nil {
		t.Fatalf("forwarded again: %v", got)
	}
	if got := ids(b.take("7")); got != "ac" {
		t.Fatalf("rest %q, want ac", got)
	}
	b.add("8", bufferedMessage{entityID: "x", forwarded: true})
	b.takeForwarded("8")
	if b.len() != 0 || b.has("8") || len(b.shards()) != 0 {
		t.Fatal("a buffer emptied by takeForwarded is still open")
	}
}
