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
