// Package leasetest holds the contract tests of lease.Lease: every
// implementation runs them (lease.MemoryLeases in package lease, the Consul
// lease in lease/consul) through Run with a Harness of its own.
package leasetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/protoshard/protoshard/internal/testsupport"
	"github.com/protoshard/protoshard/lease"
	"github.com/protoshard/protoshard/lease/internal/leasetesting"
)

// Harness adapts one lease implementation to the contract tests.
type Harness struct {
	// NewLease returns a new holder of the lease name for owner. Every call
	// is a separate holder.
	NewLease func(t *testing.T, name, owner string) lease.Lease
	// Lose makes holder, which holds the lease name, lose it the way the
	// implementation can lose a lease (revoked, its session destroyed).
	Lose func(t *testing.T, name string, holder lease.Lease)
	// Deadline bounds each wait, such as another holder's acquisition after
	// a loss (which may wait out the implementation's lock delay). Default
	// 60s.
	Deadline time.Duration
}

// Run runs every contract test against h, each as a subtest with a lease
// name of its own.
func Run(t *testing.T, h Harness) {
	if h.Deadline <= 0 {
		h.Deadline = 60 * time.Second
	}
	tests := []struct {
		name string
		run  func(t *testing.T, h Harness, name string)
	}{
		{"OneHolderAtATime", oneHolderAtATime},
		{"AcquireAgainKeepsTheHolding", acquireAgainKeepsTheHolding},
		{"ReleaseLetsAnotherAcquireWithALargerToken", releaseLetsAnotherAcquire},
		{"ReleaseWithoutHoldingReportsFalse", releaseWithoutHolding},
		{"LostHolderIsToldBeforeAnotherAcquires", lostHolderIsToldFirst},
		{"CanceledContextDoesNotAcquire", canceledContext},
		{"NamesAreIndependent", namesAreIndependent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, h, testsupport.NameOf(t))
		})
	}
}

func opCtx(t *testing.T, h Harness) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), h.Deadline)
	t.Cleanup(cancel)
	return ctx
}

func mustAcquire(t *testing.T, h Harness, l lease.Lease, cb lease.LostFunc) uint64 {
	t.Helper()
	token, ok, err := l.Acquire(opCtx(t, h), cb)
	if err != nil || !ok {
		t.Fatalf("Acquire = (%d, %v, %v), want acquired", token, ok, err)
	}
	if !l.CheckLease() {
		t.Fatal("CheckLease is false right after a successful Acquire")
	}
	return token
}

func mustNotAcquire(t *testing.T, h Harness, l lease.Lease) {
	t.Helper()
	token, ok, err := l.Acquire(opCtx(t, h), nil)
	if err != nil || ok {
		t.Fatalf("Acquire = (%d, %v, %v), want not acquired and no error (another holder has it)", token, ok, err)
	}
	if l.CheckLease() {
		t.Fatal("CheckLease is true after a failed Acquire")
	}
}

func release(t *testing.T, h Harness, l lease.Lease, want bool) {
	t.Helper()
	ok, err := l.Release(opCtx(t, h))
	if err != nil || ok != want {
		t.Fatalf("Release = (%v, %v), want (%v, nil)", ok, err, want)
	}
	if l.CheckLease() {
		t.Fatal("CheckLease is true after Release")
	}
}

func oneHolderAtATime(t *testing.T, h Harness, name string) {
	a, b := h.NewLease(t, name, "a"), h.NewLease(t, name, "b")
	mustAcquire(t, h, a, nil)
	mustNotAcquire(t, h, b)
	if !a.CheckLease() {
		t.Fatal("the holder's CheckLease turned false when another failed to acquire")
	}
	release(t, h, a, true)
}

func acquireAgainKeepsTheHolding(t *testing.T, h Harness, name string) {
	a := h.NewLease(t, name, "a")
	first := mustAcquire(t, h, a, nil)
	second := mustAcquire(t, h, a, nil)
	if first != second {
		t.Fatalf("acquiring a held lease again changed the token from %d to %d", first, second)
	}
	release(t, h, a, true)
}

func releaseLetsAnotherAcquire(t *testing.T, h Harness, name string) {
	a, b := h.NewLease(t, name, "a"), h.NewLease(t, name, "b")
	ta := mustAcquire(t, h, a, func(reason error) { t.Errorf("a release must not call the lease-lost callback: %v", reason) })
	release(t, h, a, true)
	tb := mustAcquire(t, h, b, nil)
	if tb <= ta {
		t.Fatalf("the next holder's token %d is not larger than the previous %d", tb, ta)
	}
	mustNotAcquire(t, h, a)
	release(t, h, b, true)
	ta2 := mustAcquire(t, h, a, nil)
	if ta2 <= tb {
		t.Fatalf("the next holder's token %d is not larger than the previous %d", ta2, tb)
	}
	release(t, h, a, true)
}

func releaseWithoutHolding(t *testing.T, h Harness, name string) {
	a, b := h.NewLease(t, name, "a"), h.NewLease(t, name, "b")
	release(t, h, a, false)
	mustAcquire(t, h, a, nil)
	release(t, h, b, false)
	if !a.CheckLease() {
		t.Fatal("another's Release took the holder's lease")
	}
	release(t, h, a, true)
	release(t, h, a, false)
}

// lostHolderIsToldFirst: a holder that loses its lease is told (once, with
// a reason wrapping lease.ErrLost) before another holder can acquire it,
// and the next holding has a larger token.
func lostHolderIsToldFirst(t *testing.T, h Harness, name string) {
	a, b := h.NewLease(t, name, "a"), h.NewLease(t, name, "b")
	lost := leasetesting.NewLostRecorder()
	ta := mustAcquire(t, h, a, lost.Callback)
	h.Lose(t, name, a)
	lostAt, reason := lost.Wait(t, h.Deadline)
	if !errors.Is(reason, lease.ErrLost) {
		t.Errorf("lost reason %v does not wrap lease.ErrLost", reason)
	}
	if a.CheckLease() {
		t.Fatal("CheckLease is true after the lease-lost callback")
	}
	// The holder has stopped what the lease protected: it lets go.
	release(t, h, a, false)
	tb, acquiredAt := leasetesting.AcquireEventually(t, b, h.Deadline)
	if !acquiredAt.After(lostAt) {
		t.Fatalf("b acquired at %v, not after a was told of the loss at %v", acquiredAt, lostAt)
	}
	if tb <= ta {
		t.Fatalf("the next holder's token %d is not larger than the lost holder's %d", tb, ta)
	}
	if calls := lost.Calls(); calls != 1 {
		t.Fatalf("the lease-lost callback ran %d times, want once", calls)
	}
	release(t, h, b, true)
}

func canceledContext(t *testing.T, h Harness, name string) {
	a := h.NewLease(t, name, "a")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	token, ok, err := a.Acquire(ctx, nil)
	if err == nil || ok {
		t.Fatalf("Acquire with a canceled context = (%d, %v, %v), want an error", token, ok, err)
	}
	if a.CheckLease() {
		t.Fatal("CheckLease is true after a canceled Acquire")
	}
	b := h.NewLease(t, name, "b")
	mustAcquire(t, h, b, nil)
	release(t, h, b, true)
}

func namesAreIndependent(t *testing.T, h Harness, name string) {
	a, b := h.NewLease(t, name+"-x", "a"), h.NewLease(t, name+"-y", "b")
	mustAcquire(t, h, a, nil)
	mustAcquire(t, h, b, nil)
	release(t, h, a, true)
	release(t, h, b, true)
}
