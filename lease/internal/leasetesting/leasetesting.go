// Package leasetesting holds the helpers of the lease tests: a holder released
// when the test ends, an acquisition retried until it succeeds, and a recorder
// of lease-lost callbacks.
package leasetesting

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/protoshard/protoshard/lease"
)

// Holder returns p's new holder of the lease name for owner, released when
// the test ends.
func Holder(t *testing.T, p lease.Provider, name, owner string) lease.Lease {
	t.Helper()
	l, err := p.NewLease(name, owner)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = l.Release(ctx)
	})
	return l
}

// AcquireEventually retries Acquire every 50ms until it succeeds or deadline
// passes, returning the token and when it succeeded.
func AcquireEventually(t *testing.T, l lease.Lease, deadline time.Duration) (uint64, time.Time) {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		token, ok, err := l.Acquire(ctx, nil)
		cancel()
		if ok && err == nil {
			return token, time.Now()
		}
		if time.Now().After(end) {
			t.Fatalf("no Acquire succeeded within %v (last: %v, %v)", deadline, ok, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// LostRecorder is a lease-lost callback that remembers its first call.
type LostRecorder struct {
	mu     sync.Mutex
	at     time.Time
	reason error
	calls  int
	first  chan struct{}
}

// NewLostRecorder returns a recorder that has not been called.
func NewLostRecorder() *LostRecorder { return &LostRecorder{first: make(chan struct{})} }

// Callback is the lease.LostFunc to give to Acquire.
func (r *LostRecorder) Callback(reason error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.calls == 1 {
		r.at, r.reason = time.Now(), reason
		close(r.first)
	}
}

// Wait waits up to deadline for the first call and returns its time and
// reason.
func (r *LostRecorder) Wait(t *testing.T, deadline time.Duration) (time.Time, error) {
	t.Helper()
	select {
	case <-r.first:
	case <-time.After(deadline):
		t.Fatalf("the lease-lost callback did not run within %v", deadline)
	}
	return r.Last()
}

// Last returns the first call's time and reason; the zero time when it has
// not been called.
func (r *LostRecorder) Last() (time.Time, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.at, r.reason
}

// Calls returns how often the callback ran.
func (r *LostRecorder) Calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}
