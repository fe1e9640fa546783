package actorsharding

import (
	"errors"
	"fmt"
	"testing"

	"github.com/protoshard/protoshard/deadletter"
)

// TestRegionLife drives a region's standing input by input: removals and
// re-joins, the graceful shutdown, and the local stop when nobody is left.
func TestRegionLife(t *testing.T) {
	type step struct {
		op   string // remove <id>, joined <id>, shutDown, stopLocally, stopLocallyProxy, stopLocallyOthersUp
		want string // the transition's answer
		// after: removed, shutting down, stopping locally; and the refusal
		// of a message to buffer and of one to take back.
		after string
	}
	apply := func(l *regionLife, op string) string {
		var id string
		if n, _ := fmt.Sscanf(op, "remove %s", &id); n == 1 {
			return fmt.Sprint(l.remove(id))
		}
		if n, _ := fmt.Sscanf(op, "joined %s", &id); n == 1 {
			if id == "-" {
				id = ""
			}
			return fmt.Sprint(l.joined(id))
		}
		switch op {
		case "shutDown":
			return fmt.Sprint(l.shutDown())
		case "stopLocally":
			return fmt.Sprint(l.stopLocally(false, func() bool { return true }))
		case "stopLocallyProxy":
			return fmt.Sprint(l.stopLocally(true, func() bool { return true }))
		case "stopLocallyOthersUp":
			return fmt.Sprint(l.stopLocally(false, func() bool { return false }))
		}
		return "unknown op " + op
	}
	kind := func(err error) string {
		switch {
		case err == nil:
			return "-"
		case errors.Is(err, deadletter.ErrShuttingDown):
			return "shuttingDown"
		case errors.Is(err, deadletter.ErrMemberRemoved):
			return "removed"
		}
		return err.Error()
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"removed, removed again, re-joined as a new member", []step{
			{"joined m1", "false", "false false false - -"},
			{"remove m1", "true", "true false false - removed"},
			{"remove m1", "false", "true false false - removed"},
			{"joined -", "false", "true false false - removed"},
			{"joined m1", "false", "true false false - removed"},
			{"joined m2", "true", "false false false - -"},
			{"remove m2", "true", "true false false - removed"},
		}},
		{"a removal of another incarnation is news", []step{
			{"remove m1", "true", "true false false - removed"},
			{"remove m0", "true", "true false false - removed"},
			{"joined m1", "true", "false false false - -"},
		}},
		{"graceful shutdown with others up, then nobody left", []step{
			{"stopLocally", "false", "false false false - -"},
			{"shutDown", "true", "false true false - -"},
			{"shutDown", "false", "false true false - -"},
			{"stopLocallyProxy", "false", "false true false - -"},
			{"stopLocallyOthersUp", "false", "false true false - -"},
			{"stopLocally", "true", "false true true shuttingDown shuttingDown"},
			{"stopLocally", "false", "false true true shuttingDown shuttingDown"},
			{"remove m1", "true", "true true true shuttingDown shuttingDown"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l regionLife
			for i, s := range tt.steps {
				if got := apply(&l, s.op); got != s.want {
					t.Fatalf("step %d (%s): %s, want %s", i, s.op, got, s.want)
				}
				after := fmt.Sprintf("%v %v %v %s %s", l.removed, l.gracefulShutdown, l.stoppingLocally, kind(l.refusal(false)), kind(l.refusal(true)))
				if after != s.after {
					t.Fatalf("step %d (%s): %q, want %q", i, s.op, after, s.after)
				}
			}
		})
	}
}

func TestRegionLifeShutdownComplete(t *testing.T) {
	var l regionLife
	if l.shutdownComplete(0, 0, 0) {
		t.Fatal("complete without a shutdown")
	}
	l.shutDown()
	for _, c := range [][3]int{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}} {
		if l.shutdownComplete(c[0], c[1], c[2]) {
			t.Fatalf("complete with %d children, %d buffered, %d owed", c[0], c[1], c[2])
		}
	}
	if !l.shutdownComplete(0, 0, 0) {
		t.Fatal("not complete with nothing left")
	}
}
