package singleton

import (
	"testing"
	"time"
)

// TestDecideHandOverRetry drives BecomingOldest's retries one timer at a
// time with Akka's defaults (15 hand-over retries).
func TestDecideHandOverRetry(t *testing.T) {
	s := settings{HandOverRetryInterval: time.Second, MinNumberOfHandOverRetries: 15}
	cases := []struct {
		count        int
		previousLive bool
		want         handOverRetryDecision
	}{
		{1, true, askHandOverAgain},
		{15, true, askHandOverAgain},
		{16, true, askHandOverAgainStuck},
		{17, true, askHandOverAgain},
		{30, true, askHandOverAgain},
		{31, true, askHandOverAgainStuck},
		{1, false, takeOverWithoutHandOver},
		{16, false, takeOverWithoutHandOver},
	}
	for _, c := range cases {
		if got := decideHandOverRetry(c.count, s, c.previousLive); got != c.want {
			t.Errorf("retry %d (previous live %v): %v, want %v", c.count, c.previousLive, got, c.want)
		}
	}
}

func TestStuckReported(t *testing.T) {
	cases := []struct {
		count, max int
		want       bool
	}{
		{12, 12, false},
		{13, 12, true},
		{14, 12, false},
		{25, 12, true},
		{2, 1, false}, // one retry: count%1 is never 1, so no report
		{4, 3, true},
	}
	for _, c := range cases {
		if got := stuckReported(c.count, c.max); got != c.want {
			t.Errorf("count %d of %d: %v, want %v", c.count, c.max, got, c.want)
		}
	}
}
