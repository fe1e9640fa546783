package throttle

import (
	"slices"
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type step struct {
		key   string
		at    time.Duration
		flush bool // Flush at at instead of Allow
		want  Decision
		held  []Held
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"first event of a key is logged", []step{
			{key: "a", at: 0, want: Decision{Log: true}},
		}},
		{"repeats within the interval are held back; the first one arms a flush", []step{
			{key: "a", at: 0, want: Decision{Log: true}},
			{key: "a", at: time.Second, want: Decision{FlushAt: at(10 * time.Second)}},
			{key: "a", at: 2 * time.Second, want: Decision{}},
			{key: "a", at: 9*time.Second + 999*time.Millisecond, want: Decision{}},
		}},
		{"keys are independent", []step{
			{key: "a", at: 0, want: Decision{Log: true}},
			{key: "b", at: time.Second, want: Decision{Log: true}},
			{key: "a", at: 2 * time.Second, want: Decision{FlushAt: at(10 * time.Second)}},
			{key: "b", at: 3 * time.Second, want: Decision{FlushAt: at(11 * time.Second)}},
		}},
		{"the next window's first event reports what the flush did not", []step{
			{key: "a", at: 0, want: Decision{Log: true}},
			{key: "a", at: time.Second, want: Decision{FlushAt: at(10 * time.Second)}},
			{key: "a", at: 2 * time.Second, want: Decision{}},
			{key: "a", at: 10 * time.Second, want: Decision{Log: true, Suppressed: 2}},
			{key: "a", at: 11 * time.Second, want: Decision{FlushAt: at(20 * time.Second)}},
		}},
		{"flush reports ended windows only, and the key logs at once after it", []step{
			{key: "a", at: 0, want: Decision{Log: true}},
			{key: "a", at: time.Second, want: Decision{FlushAt: at(10 * time.Second)}},
			{key: "a", at: 2 * time.Second, want: Decision{}},
			{key: "b", at: 5 * time.Second, want: Decision{Log: true}},
			{key: "b", at: 6 * time.Second, want: Decision{FlushAt: at(15 * time.Second)}},
			{flush: true, at: 9 * time.Second, held: nil},
			{flush: true, at: 10 * time.Second, held: []Held{{Key: "a", Count: 2}}},
			{key: "a", at: 10*time.Second + time.Millisecond, want: Decision{Log: true}},
			{flush: true, at: 16 * time.Second, held: []Held{{Key: "b", Count: 1}}},
			{flush: true, at: 30 * time.Second, held: nil},
		}},
		{"a window without held events flushes nothing", []step{
			{key: "a", at: 0, want: Decision{Log: true}},
			{flush: true, at: time.Minute, held: nil},
			{key: "a", at: time.Minute, want: Decision{Log: true}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := New(10 * time.Second)
			for i, s := range tt.steps {
				if s.flush {
					if got := l.Flush(at(s.at)); !slices.Equal(got, s.held) {
						t.Fatalf("step %d: Flush(%v) = %v, want %v", i, s.at, got, s.held)
					}
					continue
				}
				if got := l.Allow(s.key, at(s.at)); got != s.want {
					t.Fatalf("step %d: Allow(%q, %v) = %+v, want %+v", i, s.key, s.at, got, s.want)
				}
			}
		})
	}
}
