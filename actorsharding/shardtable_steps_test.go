package actorsharding

import (
	"fmt"
	"strings"
	"testing"
)

// TestShardTableHandOffChild drives HandOffs for one shard through the
// life of its children, input by input: each answer says what the region
// does (and to which child), and the table's state after it.
func TestShardTableHandOffChild(t *testing.T) {
	type step struct {
		op   string // start <child>, handoff, stop, terminated <child>
		want string // handoff: "<step> <child>" or "error"; else ""
		// state: the shard's child and its state after the step.
		state string
	}
	apply := func(tb *shardTable, s step) string {
		f := strings.Fields(s.op)
		switch f[0] {
		case "start":
			return errText(tb.started("1", child(f[1])))
		case "stop":
			_, err := tb.stop("1")
			return errText(err)
		case "terminated":
			_, _, err := tb.terminated(child(f[1]).Id)
			return errText(err)
		case "handoff":
			st, pid, err := tb.handOffChild("1", otherPID)
			if err != nil {
				return "error"
			}
			return fmt.Sprintf("%d %s", st, strings.TrimPrefix(pid.GetId(), "sharding/T/"))
		}
		return "unknown op"
	}
	stateOf := func(tb *shardTable) string {
		pid, st, ok := tb.child("1")
		if !ok {
			return "none"
		}
		return strings.TrimPrefix(pid.Id, "sharding/T/") + " " + st.String()
	}
	answer, forward, again, await := fmt.Sprint(int(handOffAnswer)), fmt.Sprint(int(handOffForward)),
		fmt.Sprint(int(handOffForwardAgain)), fmt.Sprint(int(handOffAwaitStop))
	tests := []struct {
		name  string
		steps []step
	}{
		{"no child: answered at once", []step{
			{"handoff", answer + " ", "none"},
		}},
		{"a running child hands off; a repeated HandOff goes to it again", []step{
			{"start a", "", "a running"},
			{"handoff", forward + " a", "a handingOff"},
			{"handoff", again + " a", "a handingOff"},
			{"terminated a", "", "none"},
			{"handoff", answer + " ", "none"},
		}},
		{"a child the region stopped: the region answers once it terminated", []step{
			{"start a", "", "a running"},
			{"stop", "", "a stopping"},
			{"handoff", await + " a", "a stopping"},
			{"handoff", await + " a", "a stopping"},
			{"terminated a", "", "none"},
		}},
		{"a new child after the old one terminated hands off in turn", []step{
			{"start a", "", "a running"},
			{"handoff", forward + " a", "a handingOff"},
			{"start b", "error", "a handingOff"},
			{"terminated a", "", "none"},
			{"start b", "", "b running"},
			{"handoff", forward + " b", "b handingOff"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := newShardTable(selfPID)
			for i, s := range tt.steps {
				if got := apply(&tb, s); got != s.want {
					t.Fatalf("step %d (%s): %q, want %q", i, s.op, got, s.want)
				}
				if got := stateOf(&tb); got != s.state {
					t.Fatalf("step %d (%s): state %q, want %q", i, s.op, got, s.state)
				}
			}
			// A child stopped by the region answers the HandOff senders
			// it was given, once, at its Terminated.
			if l, ok := tb.local["1"]; ok && l.state == shardStopping && len(l.handOffReplyTo) != 1 {
				t.Fatalf("%d HandOff senders to answer, want 1", len(l.handOffReplyTo))
			}
		})
	}
}

func errText(err error) string {
	if err != nil {
		return "error"
	}
	return ""
}

func TestShardTableRestartWanted(t *testing.T) {
	tb := newShardTable(selfPID)
	tb.setHome("here", selfPID)
	tb.setHome("there", otherPID)
	tb.setHome("asked", selfPID)
	tb.awaitStart("asked", otherPID)
	tests := []struct {
		shard                   string
		buffered, down, removed bool
		want                    bool
	}{
		{"here", true, false, false, true},
		{"here", false, false, false, false}, // nothing waits: it starts on its next message
		{"asked", false, false, false, true}, // a HostShard waits
		{"here", true, true, false, false},
		{"here", true, false, true, false},
		{"asked", false, true, false, false},
		{"there", true, false, false, false},
		{"unknown", true, false, false, false},
	}
	for _, tt := range tests {
		if got := tb.restartWanted(tt.shard, tt.buffered, tt.down, tt.removed); got != tt.want {
			t.Errorf("restartWanted(%s, buffered %v, shutting down %v, removed %v) = %v, want %v",
				tt.shard, tt.buffered, tt.down, tt.removed, got, tt.want)
		}
	}
}

func TestDecideShardHome(t *testing.T) {
	tests := []struct {
		view            string // see viewOf
		refIsSelf, live bool
		want            shardHomeStep
		wantStopLocal   bool
	}{
		{"", false, false, homeIgnoreGone, false},
		{"self running", false, false, homeIgnoreGone, false},
		{"", false, true, homeElsewhere, false},
		{"known", false, true, homeElsewhere, false},
		// The coordinator homes elsewhere a shard this region runs.
		{"self running", false, true, homeElsewhere, true},
		{"self alive", false, true, homeElsewhere, false},
		{"", true, false, homeHere, false},
		{"self running", true, true, homeHere, false},
		{"down", true, true, homeNotWhileShuttingDown, false},
		{"down alive", true, true, homeNotWhileShuttingDown, false},
		{"down self running", true, true, homeHere, false},
		{"down", false, true, homeElsewhere, false},
	}
	for _, tt := range tests {
		step, stop := decideShardHome(viewOf(tt.view), tt.refIsSelf, tt.live)
		if step != tt.want || stop != tt.wantStopLocal {
			t.Errorf("decideShardHome(%q, self %v, live %v) = %d stop %v, want %d stop %v",
				tt.view, tt.refIsSelf, tt.live, step, stop, tt.want, tt.wantStopLocal)
		}
	}
}

func TestEndOf(t *testing.T) {
	tests := []struct {
		state    localShardState
		remember bool
		want     shardEnd
	}{
		{shardRunning, false, shardEndOnNextMessage},
		{shardRunning, true, shardEndRestartLater},
		{shardHandingOff, false, shardEndExpected},
		{shardHandingOff, true, shardEndExpected},
		{shardStopping, false, shardEndExpected},
		{shardStopping, true, shardEndExpected},
	}
	for _, tt := range tests {
		if got := endOf(tt.state, tt.remember); got != tt.want {
			t.Errorf("endOf(%s, remember %v) = %d, want %d", tt.state, tt.remember, got, tt.want)
		}
	}
}
