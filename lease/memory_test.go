package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/protoshard/protoshard/lease"
	"github.com/protoshard/protoshard/lease/leasetest"
)

func TestMemoryLeaseContract(t *testing.T) {
	leases := lease.NewMemoryLeases()
	leasetest.Run(t, leasetest.Harness{
		NewLease: func(t *testing.T, name, owner string) lease.Lease {
			l, err := leases.NewLease(name, owner)
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		Lose: func(t *testing.T, name string, _ lease.Lease) {
			if _, ok := leases.Revoke(name); !ok {
				t.Fatalf("Revoke(%q): nobody held it", name)
			}
		},
		Deadline: 5 * time.Second,
	})
}

// A revoked lease stays out of others' reach until its holder lets go, by
// releasing it or by acquiring it again (with a new token).
func TestMemoryLeasesRevoke(t *testing.T) {
	ctx := context.Background()
	leases := lease.NewMemoryLeases()
	a, _ := leases.NewLease("x", "a")
	b, _ := leases.NewLease("x", "b")

	if _, ok := leases.Revoke("x"); ok {
		t.Fatal("Revoke of a free lease reported a holder")
	}
	var reason error
	first, _, _ := a.Acquire(ctx, func(r error) { reason = r })
	if owner, token, ok := leases.Holder("x"); !ok || owner != "a" || token != first {
		t.Fatalf("Holder = (%q, %d, %v), want (a, %d, true)", owner, token, ok, first)
	}
	if owner, ok := leases.Revoke("x"); !ok || owner != "a" {
		t.Fatalf("Revoke = (%q, %v), want (a, true)", owner, ok)
	}
	if !errors.Is(reason, lease.ErrLost) {
		t.Fatalf("callback reason %v, want one wrapping ErrLost", reason)
	}
	if _, _, ok := leases.Holder("x"); ok {
		t.Fatal("a revoked holder is still reported as the holder")
	}
	if _, ok := leases.Revoke("x"); ok {
		t.Fatal("a second Revoke found a holder")
	}
	if _, ok, _ := b.Acquire(ctx, nil); ok {
		t.Fatal("another acquired a revoked lease before its holder let go")
	}
	second, ok, _ := a.Acquire(ctx, nil)
	if !ok || second <= first {
		t.Fatalf("the revoked holder acquiring again = (%d, %v), want a token above %d", second, ok, first)
	}
	if released, _ := a.Release(ctx); !released {
		t.Fatal("Release of the new holding reported false")
	}
	if third, ok, _ := b.Acquire(ctx, nil); !ok || third <= second {
		t.Fatalf("Acquire after the release = (%d, %v), want a token above %d", third, ok, second)
	}
}

func TestMemoryLeasesRejectEmptyName(t *testing.T) {
	if _, err := lease.NewMemoryLeases().NewLease("", "a"); err == nil {
		t.Fatal("NewLease with an empty name succeeded")
	}
}
