package backoff

import (
	"testing"
	"time"
)

func TestExponential(t *testing.T) {
	b := Exponential{Min: time.Second, Max: 5 * time.Second}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for attempt, w := range want {
		if got := b.Delay(attempt); got != w {
			t.Errorf("Delay(%d) = %v, want %v", attempt, got, w)
		}
	}
	if got := (Exponential{Min: time.Second}).Delay(10); got != time.Second {
		t.Errorf("no Max: Delay(10) = %v, want the minimum", got)
	}
	if got := (Exponential{Min: time.Second, Max: time.Minute}).Delay(1000); got != time.Minute {
		t.Errorf("a large attempt: Delay = %v, want the maximum", got)
	}
	jittered := Exponential{Min: time.Second, Max: 5 * time.Second, RandomFactor: 0.2}
	for range 100 {
		if got := jittered.Delay(1); got < 2*time.Second || got >= 2400*time.Millisecond {
			t.Fatalf("jittered Delay(1) = %v, want in [2s, 2.4s)", got)
		}
	}
}

func TestSeries(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type step struct {
		ranFor      time.Duration // from Started to Stopped; negative: Reset instead
		wantDelay   time.Duration
		wantAttempt int
	}
	cases := []struct {
		name       string
		resetAfter time.Duration
		steps      []step
	}{
		{"quick stops double the delay up to the maximum", time.Minute, []step{
			{time.Millisecond, time.Second, 1}, {time.Second, 2 * time.Second, 2},
			{time.Second, 4 * time.Second, 3}, {time.Second, 5 * time.Second, 4}, {time.Second, 5 * time.Second, 5},
		}},
		{"a long run starts a new series", time.Minute, []step{
			{time.Second, time.Second, 1}, {time.Second, 2 * time.Second, 2},
			{time.Minute, time.Second, 1}, {time.Second, 2 * time.Second, 2},
		}},
		{"zero ResetAfter is Min", 0, []step{
			{999 * time.Millisecond, time.Second, 1}, {999 * time.Millisecond, 2 * time.Second, 2},
			{time.Second, time.Second, 1},
		}},
		{"Reset starts a new series", time.Minute, []step{
			{time.Second, time.Second, 1}, {time.Second, 2 * time.Second, 2},
			{-1, 0, 0}, {time.Second, time.Second, 1},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := Series{Exponential: Exponential{Min: time.Second, Max: 5 * time.Second}, ResetAfter: c.resetAfter}
			now := t0
			for i, st := range c.steps {
				if st.ranFor < 0 {
					s.Reset()
					continue
				}
				s.Started(now)
				now = now.Add(st.ranFor)
				delay, attempt := s.Stopped(now)
				if delay != st.wantDelay || attempt != st.wantAttempt {
					t.Fatalf("step %d: Stopped = (%v, %d), want (%v, %d)", i, delay, attempt, st.wantDelay, st.wantAttempt)
				}
				now = now.Add(delay)
			}
		})
	}
}
