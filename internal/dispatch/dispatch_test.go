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

// TestReusingKeepsItsGoroutine: once a run ended, its goroutine waits
// for the next and runs it.
func TestReusingKeepsItsGoroutine(t *testing.T) {
	d := NewReusing(300, time.Hour) // the test may be slow: no idle end
	done := make(chan uint64)
	run := func() { done <- goroutineID() }
	d.Schedule(run)
	first := <-done
	for i := range 50 {
		// As a mailbox's next message after its last run: handed to the
		// goroutine once it waits again (the test may be slower than it).
		deadline := time.Now().Add(10 * time.Second)
		for !d.handOff(run) {
			if time.Now().After(deadline) {
				t.Fatalf("run %d: no goroutine waited for it", i+2)
			}
			time.Sleep(time.Millisecond)
		}
		if id := <-done; id != first {
			t.Fatalf("run %d ran on goroutine %d, the first on %d", i+2, id, first)
		}
	}
}

// TestReusingEndsIdleGoroutines: a goroutine without a run for the idle
// time ends.
func TestReusingEndsIdleGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	d := NewReusing(300, 50*time.Millisecond)
	done := make(chan struct{})
	d.Schedule(func() { close(done) })
	<-done
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
