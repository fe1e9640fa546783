package dispatch

import (
	"bytes"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// goroutineID is the runtime's number of the calling goroutine.
func goroutineID() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	buf = bytes.TrimPrefix(buf, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(buf[:bytes.IndexByte(buf, ' ')]), 10, 64)
	return id
}

// TestReusingKeepsItsGoroutine: runs one after the other run on one
// goroutine, which ends once idle.
func TestReusingKeepsItsGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	d := NewReusing(300, 200*time.Millisecond)
	ids := map[uint64]bool{}
	for range 50 {
		done := make(chan uint64)
		d.Schedule(func() { done <- goroutineID() })
		ids[<-done] = true
		// The goroutine is back waiting before the next run comes, as a
		// mailbox's next message after its last run ended.
		time.Sleep(time.Millisecond)
	}
	if len(ids) != 1 {
		t.Fatalf("50 runs one after the other ran on %d goroutines, want 1", len(ids))
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after the idle time, %d before", n, before)
	}
}

// TestReusingNeverWaitsForABlockedRun: a run that blocks holds its
// goroutine only; the next runs start at once on others.
func TestReusingNeverWaitsForABlockedRun(t *testing.T) {
	d := NewReusing(300, time.Second)
	release := make(chan struct{})
	defer close(release)
	blocked := make(chan struct{})
	d.Schedule(func() { close(blocked); <-release })
	<-blocked
	ran := make(chan struct{}, 10)
	for range 10 {
		d.Schedule(func() { ran <- struct{}{} })
	}
	for i := range 10 {
		select {
		case <-ran:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of 10 runs ran while another blocked", i)
		}
	}
}

func TestReusingThroughput(t *testing.T) {
	if got := NewReusing(300, time.Second).Throughput(); got != 300 {
		t.Fatalf("throughput %d, want 300", got)
	}
}
