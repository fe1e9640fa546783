package singleton

import (
	"testing"
	"time"
)

// TestHandOverClock drives the clock through the states a member passes
// on its way to running the singleton.
func TestHandOverClock(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	type step struct {
		state    string
		running  bool
		now      time.Time
		took     time.Duration
		measured bool
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"hand-over then lease then start", []step{
			{stateYounger, false, at(0), 0, false},
			{stateBecomingOldest, false, at(1), 0, false},
			{stateAcquiringLease, false, at(3), 0, false},
			{stateOldest, true, at(4), 3 * time.Second, true},
			{stateOldest, true, at(9), 0, false}, // a restart is no hand-over
		}},
		{"a refused start goes on counting", []step{
			{stateBecomingOldest, false, at(0), 0, false},
			{stateOldest, false, at(2), 0, false},
			{stateOldest, true, at(5), 5 * time.Second, true},
		}},
		{"oldest at once measures nothing", []step{
			{stateStart, false, at(0), 0, false},
			{stateOldest, true, at(1), 0, false},
		}},
		{"leaving BecomingOldest stops the clock", []step{
			{stateBecomingOldest, false, at(0), 0, false},
			{stateEnd, false, at(1), 0, false},
			{stateOldest, true, at(2), 0, false},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var clock handOverClock
			for i, s := range c.steps {
				var took time.Duration
				var measured bool
				clock, took, measured = clock.entered(s.state, s.running, s.now)
				if took != s.took || measured != s.measured {
					t.Fatalf("step %d (%s): took %v measured %v, want %v %v", i, s.state, took, measured, s.took, s.measured)
				}
			}
		})
	}
}
