package actorsharding

import (
	"testing"
	"time"
)

// The delays of one series: Akka's initial registration delay, doubling,
// until the next would reach the retry interval, where the periodic retry
// takes over.
func TestRegistrationSchedule(t *testing.T) {
	ms := time.Millisecond
	for _, tt := range []struct {
		retryInterval time.Duration
		want          []time.Duration
	}{
		{2 * time.Second, []time.Duration{250 * ms, 500 * ms, 1000 * ms}},
		{10 * time.Second, []time.Duration{1250 * ms, 2500 * ms, 5000 * ms}},
		{400 * ms, []time.Duration{100 * ms, 200 * ms}},
		// The floor is the retry interval already: no retries besides
		// the periodic one.
		{100 * ms, nil},
		{50 * ms, nil},
	} {
		s := newRegistrationSchedule(tt.retryInterval)
		var got []time.Duration
		retry, d, ok := s.start()
		for ok {
			got = append(got, d)
			if len(got) > 20 {
				t.Fatalf("retry interval %v: the series does not end: %v", tt.retryInterval, got)
			}
			var current bool
			current, retry, d, ok = s.due(retry)
			if !current {
				t.Fatalf("retry interval %v: retry %d is not current", tt.retryInterval, len(got))
			}
		}
		if len(got) != len(tt.want) {
			t.Fatalf("retry interval %v: delays %v, want %v", tt.retryInterval, got, tt.want)
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Fatalf("retry interval %v: delays %v, want %v", tt.retryInterval, got, tt.want)
			}
		}
	}
}

// A retry of an earlier series, or one after the region registered, is
// stale; a new series starts from the first delay again.
func TestRegistrationScheduleStaleRetries(t *testing.T) {
	s := newRegistrationSchedule(2 * time.Second)
	first, _, _ := s.start()
	current, second, d, ok := s.due(first)
	if !current || !ok || d != 500*time.Millisecond {
		t.Fatalf("first retry: current %v, next after %v (%v)", current, d, ok)
	}
	again, d, ok := s.start()
	if !ok || d != 250*time.Millisecond {
		t.Fatalf("a new series starts after %v (%v), want 250ms", d, ok)
	}
	if current, _, _, _ := s.due(second); current {
		t.Fatal("a retry of the earlier series is current")
	}
	s.stop()
	if current, _, _, _ := s.due(again); current {
		t.Fatal("a retry after the registration is current")
	}
}
