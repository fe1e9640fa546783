package actorsharding

import (
	"fmt"
	"strings"
	"testing"
)

// viewOf reads a shardView from its flags' names, for compact tables:
// "removed down awaiting buffered known self running alive".
func viewOf(flags string) shardView {
	var v shardView
	for _, f := range strings.Fields(flags) {
		switch f {
		case "removed":
			v.removed = true
		case "down":
			v.shuttingDown = true
		case "awaiting":
			v.awaiting = true
		case "buffered":
			v.buffered = true
		case "known":
			v.known = true
		case "self":
			v.known, v.homeIsSelf = true, true
		case "running":
			v.running, v.alive = true, true
		case "alive":
			v.alive = true
		default:
			panic("unknown flag " + f)
		}
	}
	return v
}

func TestDeliveryDecision(t *testing.T) {
	tests := []struct {
		view      string
		forwarded bool
		stale     bool
		want      deliveryAction
		staleRead bool // whether the decision reads the clock
	}{
		{"removed self running", false, false, deliverDropRemoved, false},
		{"removed", true, true, deliverDropRemoved, false},
		// The hot path: running here, nothing older waits; the shard
		// checks staleness itself.
		{"self running", false, true, deliverToShard, false},
		{"self running", true, false, deliverToShard, false},
		// Older messages wait in the buffer: behind them.
		{"self running buffered", false, false, deliverBuffer, true},
		{"known buffered", false, false, deliverBuffer, true},
		{"buffered", false, false, deliverBuffer, true},
		// The old home still forwards: this node's senders wait; the
		// forwarding goes ahead of them.
		{"awaiting self running", false, false, deliverBuffer, false},
		{"awaiting self running buffered", true, false, deliverToShard, false},
		{"awaiting self buffered alive", true, false, deliverBuffer, true},
		{"awaiting self buffered", true, false, deliverStartShard, true},
		{"awaiting buffered", true, false, deliverBufferAndAsk, true},
		// Off the hot path, a stale membership drops.
		{"self", false, true, deliverDropStale, true},
		{"known", false, true, deliverDropStale, true},
		{"buffered", false, true, deliverDropStale, true},
		{"", false, false, deliverBufferAndAsk, true},
		{"self", false, false, deliverStartShard, true},
		// An earlier child still stops, or the region shuts down.
		{"self alive", false, false, deliverBuffer, true},
		{"self down", false, false, deliverBuffer, true},
		{"self down running", false, false, deliverToShard, false},
		{"known", false, false, deliverToRegion, true},
		{"known running", true, false, deliverToRegion, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/forwarded=%v/stale=%v", tt.view, tt.forwarded, tt.stale), func(t *testing.T) {
			read := false
			got := decideDelivery(viewOf(tt.view), tt.forwarded, func() bool { read = true; return tt.stale })
			if got != tt.want || read != tt.staleRead {
				t.Fatalf("decideDelivery = %v (clock read %v), want %v (clock read %v)", got, read, tt.want, tt.staleRead)
			}
		})
	}
}

func TestRouteState(t *testing.T) {
	tests := []struct {
		view               string
		proxy, homeLive    bool
		wantOpen, wantRemo bool
	}{
		{"self running", false, true, true, false},
		{"self running", true, true, false, false},
		{"self running awaiting", false, true, false, false},
		{"self running removed", false, true, false, false},
		{"self alive", false, true, false, false},
		{"running", false, true, false, false},
		{"known", false, true, false, true},
		{"known", true, true, false, true},
		{"known", false, false, false, false},
		{"known removed", false, true, false, false},
		{"", false, true, false, false},
	}
	for _, tt := range tests {
		open, remote := routeState(viewOf(tt.view), tt.proxy, tt.homeLive)
		if open != tt.wantOpen || remote != tt.wantRemo {
			t.Errorf("routeState(%q, proxy %v, home live %v) = open %v remote %v, want %v %v",
				tt.view, tt.proxy, tt.homeLive, open, remote, tt.wantOpen, tt.wantRemo)
		}
	}
}

// TestReleaseBuffered drives a shard's buffer through a hand-off to this
// region: its own senders' messages wait while the old home forwards,
// the forwarded ones go on at once, and at the end the rest follows.
func TestReleaseBuffered(t *testing.T) {
	own := func(id string) bufferedMessage { return bufferedMessage{entityID: id} }
	fwd := func(id string) bufferedMessage { return bufferedMessage{entityID: id, forwarded: true} }
	ids := func(ms []bufferedMessage) string {
		var out []string
		for _, m := range ms {
			out = append(out, m.entityID)
		}
		return strings.Join(out, " ")
	}
	type step struct {
		add                  []bufferedMessage
		awaiting, homeIsSelf bool
		want                 string // released, in order
		left                 int
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"new home: forwarded first, while awaiting only they", []step{
			{add: []bufferedMessage{own("o1"), fwd("f1"), own("o2"), fwd("f2")}, awaiting: true, homeIsSelf: true, want: "f1 f2", left: 2},
			{add: []bufferedMessage{fwd("f3"), own("o3")}, awaiting: true, homeIsSelf: true, want: "f3", left: 3},
			{awaiting: false, homeIsSelf: true, want: "o1 o2 o3", left: 0},
		}},
		{"at the home without a hand-off: forwarded ones ahead", []step{
			{add: []bufferedMessage{own("o1"), fwd("f1"), own("o2")}, homeIsSelf: true, want: "f1 o1 o2", left: 0},
		}},
		{"home elsewhere: all, in arrival order", []step{
			{add: []bufferedMessage{own("o1"), fwd("f1"), own("o2")}, want: "o1 f1 o2", left: 0},
			{want: "", left: 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newShardBuffers(100)
			for i, s := range tt.steps {
				for _, m := range s.add {
					if err := b.add("7", m); err != nil {
						t.Fatal(err)
					}
				}
				if got := ids(b.releaseBuffered("7", s.awaiting, s.homeIsSelf)); got != s.want || b.len() != s.left {
					t.Fatalf("step %d: released %q, %d left; want %q, %d", i, got, b.len(), s.want, s.left)
				}
			}
		})
	}
}

func TestBufferUsageStep(t *testing.T) {
	b := newShardBuffers(30)
	var steps []int
	for i := 1; i <= 30; i++ {
		if err := b.add(fmt.Sprint(i%4), bufferedMessage{}); err != nil {
			t.Fatal(err)
		}
		if b.usageStep() {
			steps = append(steps, i)
		}
	}
	if got := fmt.Sprint(steps); got != "[3 6 9 12 15 18 21 24 27 30]" {
		t.Fatalf("usage logged at %s, want every tenth of the limit", got)
	}
	small := newShardBuffers(9)
	if err := small.add("1", bufferedMessage{}); err != nil || small.usageStep() {
		t.Fatalf("a limit under 10 logs no usage (err %v)", err)
	}
}
