package delivery

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestPinnedDispatcher: runs go one at a time, in order, on the dispatcher's
// goroutine while it runs, and on their own after stop (which ends that
// goroutine, even when called from a run).
func TestPinnedDispatcher(t *testing.T) {
	before := runtime.NumGoroutine()
	d := newPinnedDispatcher()
	var mu sync.Mutex
	var got []int
	done := make(chan struct{})
	for i := range 3 {
		d.Schedule(func() {
			mu.Lock()
			got = append(got, i)
			mu.Unlock()
			if i == 2 {
				d.stop() // from a run, as the actor's Stopped does
				close(done)
			}
		})
		time.Sleep(time.Millisecond) // as a mailbox does: one run waits at most
	}
	<-done
	ran := make(chan struct{})
	d.Schedule(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("a run scheduled after stop did not run")
	}
	mu.Lock()
	if len(got) != 3 || got[0] != 0 || got[1] != 1 || got[2] != 2 {
		t.Fatalf("runs %v, want 0, 1, 2", got)
	}
	mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after stop, %d before: the dispatcher's goroutine did not end", n, before)
	}
}
