package caslease

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/protoshard/protoshard/lease"
	"github.com/protoshard/protoshard/lease/internal/leasetesting"
	"github.com/protoshard/protoshard/lease/leasetest"
)

// Short timings for the in-memory store: the holder gives up 0.79 s after
// its last renewal started, a contender takes over after 1.21 s of an
// unchanged record. Waits are generous: the machine is shared.
const waitDeadline = 30 * time.Second

const testRenewInterval = 150 * time.Millisecond

// testOptions are the test leases' options: short timings.
func testOptions() []Option {
	return []Option{
		WithKeyPrefix("test/lease/"),
		WithDuration(time.Second),
		WithRenewInterval(testRenewInterval),
		WithSafetyMargin(200 * time.Millisecond),
		WithOperationTimeout(200 * time.Millisecond),
		WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	}
}

// memoryTiming is the clock arithmetic of testOptions.
func memoryTiming(t *testing.T) leaseTiming {
	t.Helper()
	return newProvider(t, &MemoryStore{}).cfg.timing()
}

func newProvider(t *testing.T, store Store) *Provider {
	t.Helper()
	p, err := NewProvider(store, testOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newLease(t *testing.T, p *Provider, name, owner string) *casLease {
	t.Helper()
	return leasetesting.Holder(t, p, name, owner).(*casLease)
}

// takeOver writes a record of another holder over key, as a contender that
// wrongly took over would: the holder must notice at its next renewal.
func takeOver(t *testing.T, store Store, key string) {
	t.Helper()
	ctx := context.Background()
	_, version, _, err := store.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := store.CAS(ctx, key, []byte(`{"holder":"intruder#0","owner":"intruder","token":1}`), version); !ok || err != nil {
		t.Fatalf("overwriting %s: %v, %v", key, ok, err)
	}
}

func TestMemoryStoreLeaseContract(t *testing.T) {
	store := &MemoryStore{}
	p := newProvider(t, store)
	leasetest.Run(t, leasetest.Harness{
		NewLease: func(t *testing.T, name, owner string) lease.Lease { return newLease(t, p, name, owner) },
		Lose: func(t *testing.T, _ string, holder lease.Lease) {
			takeOver(t, store, holder.(*casLease).key)
		},
		Deadline: waitDeadline,
	})
}

// cutStore stands between one holder and the store: while cut, every
// request hangs until its context ends, as across a network partition; a
// request let through after a cut may have its answer dropped.
type cutStore struct {
	Store
	cut      atomic.Bool
	dropNext atomic.Bool // the next write goes through but reports an error
}

var errDropped = errors.New("answer lost")

func (s *cutStore) Get(ctx context.Context, key string) ([]byte, uint64, bool, error) {
	if s.cut.Load() {
		<-ctx.Done()
		return nil, 0, false, ctx.Err()
	}
	return s.Store.Get(ctx, key)
}

func (s *cutStore) CAS(ctx context.Context, key string, value []byte, version uint64) (uint64, bool, error) {
	if s.cut.Load() {
		<-ctx.Done()
		return 0, false, ctx.Err()
	}
	v, ok, err := s.Store.CAS(ctx, key, value, version)
	if err == nil && s.dropNext.CompareAndSwap(true, false) {
		return 0, false, errDropped
	}
	return v, ok, err
}

// holderAndContender returns two holders of the lease name on one memory
// store: a reaches it through cut, b directly.
func holderAndContender(t *testing.T, name string) (cut *cutStore, a, b *casLease) {
	store := &MemoryStore{}
	cut = &cutStore{Store: store}
	return cut, newLease(t, newProvider(t, cut), name, "a"), newLease(t, newProvider(t, store), name, "b")
}

// A holder cut off from the store reports the loss HoldFor after its last
// renewal started, and the contender, polling all along, takes over no
// sooner than WaitFor after it first read that renewal: after the loss,
// with a larger token.
func TestPartitionedHolderStopsBeforeTakeover(t *testing.T) {
	cut, a, b := holderAndContender(t, "partition")
	timing := memoryTiming(t)
	lost := leasetesting.NewLostRecorder()
	ta, ok, err := a.Acquire(context.Background(), lost.Callback)
	if !ok || err != nil {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	time.Sleep(400 * time.Millisecond) // renewals go on
	if !a.CheckLease() {
		t.Fatal("the holder lost its lease while renewing")
	}
	if _, ok, err := b.Acquire(context.Background(), nil); ok || err != nil {
		t.Fatalf("b acquired a renewed lease (or failed: %v)", err)
	}

	cutAt := time.Now()
	cut.cut.Store(true)
	tb, acquiredAt := leasetesting.AcquireEventually(t, b, waitDeadline)
	lostAt, reason := lost.Wait(t, waitDeadline)
	t.Logf("partition: the holder reported the loss after %v, the contender took over after %v",
		lostAt.Sub(cutAt).Round(time.Millisecond), acquiredAt.Sub(cutAt).Round(time.Millisecond))
	if !errors.Is(reason, lease.ErrLost) || !strings.Contains(reason.Error(), "no successful renewal") {
		t.Errorf("reason %v", reason)
	}
	if !lostAt.Before(acquiredAt) {
		t.Fatalf("the contender took over at %v, before the holder stopped at %v", acquiredAt, lostAt)
	}
	if gap := acquiredAt.Sub(lostAt); gap < timing.waitFor()-timing.holdFor() {
		t.Fatalf("takeover only %v after the loss, want at least WaitFor − HoldFor = %v", gap, timing.waitFor()-timing.holdFor())
	}
	if lostAt.Sub(cutAt) > timing.holdFor()+100*time.Millisecond {
		t.Errorf("the loss came %v after the cut, later than HoldFor %v after the last renewal", lostAt.Sub(cutAt), timing.holdFor())
	}
	if a.CheckLease() {
		t.Fatal("CheckLease is true after the loss")
	}
	if tb <= ta {
		t.Fatalf("token %d of the new holder is not above %d", tb, ta)
	}
	// Back from the partition: the old holder finds the record taken.
	cut.cut.Store(false)
	if ok, err := a.Release(context.Background()); ok || err != nil {
		t.Fatalf("Release after the loss = %v, %v", ok, err)
	}
	if !b.CheckLease() {
		t.Fatal("the old holder's Release took the new holder's lease")
	}
}

// A holder cut off only briefly keeps its lease: a later renewal succeeds
// before HoldFor runs out.
func TestShortPartitionKeepsTheLease(t *testing.T) {
	store := &MemoryStore{}
	cut := &cutStore{Store: store}
	a := newLease(t, newProvider(t, cut), "short", "a")
	lost := leasetesting.NewLostRecorder()
	if _, ok, err := a.Acquire(context.Background(), lost.Callback); !ok || err != nil {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	cut.cut.Store(true)
	time.Sleep(300 * time.Millisecond)
	cut.cut.Store(false)
	time.Sleep(time.Second)
	if lost.Calls() != 0 {
		_, reason := lost.Last()
		t.Fatalf("lost after a 300ms partition: %v", reason)
	}
	if !a.CheckLease() {
		t.Fatal("CheckLease false after the partition healed")
	}
}

// A renewal whose answer is lost but which went through: the holder adopts
// its own record at the next conflict and keeps the lease; Release frees
// it.
func TestLostAnswerOfARenewal(t *testing.T) {
	store := &MemoryStore{}
	cut := &cutStore{Store: store}
	a := newLease(t, newProvider(t, cut), "dropped", "a")
	lost := leasetesting.NewLostRecorder()
	token, ok, err := a.Acquire(context.Background(), lost.Callback)
	if !ok || err != nil {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	cut.dropNext.Store(true)
	time.Sleep(time.Second)
	if lost.Calls() != 0 {
		_, reason := lost.Last()
		t.Fatalf("lost after a dropped answer: %v", reason)
	}
	if cut.dropNext.Load() {
		t.Fatal("no renewal was written")
	}
	if got, ok, err := a.Acquire(context.Background(), nil); !ok || err != nil || got != token {
		t.Fatalf("Acquire again = %d, %v, %v; want the same token %d", got, ok, err, token)
	}
	if ok, err := a.Release(context.Background()); !ok || err != nil {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	b := newLease(t, newProvider(t, store), "dropped", "b")
	if tb, ok, err := b.Acquire(context.Background(), nil); !ok || err != nil || tb <= token {
		t.Fatalf("after Release another's Acquire = %d, %v, %v; want at once with a token above %d", tb, ok, err, token)
	}
}

// A holder that lost its lease to timeouts frees the record on Release once
// it has stopped, so the next holder need not wait out the record.
func TestReleaseAfterTimeoutFreesTheRecord(t *testing.T) {
	cut, a, b := holderAndContender(t, "timeout")
	lost := leasetesting.NewLostRecorder()
	if _, ok, err := a.Acquire(context.Background(), lost.Callback); !ok || err != nil {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	if _, ok, _ := b.Acquire(context.Background(), nil); ok {
		t.Fatal("b acquired a held lease")
	}
	cut.cut.Store(true)
	lost.Wait(t, waitDeadline)
	cut.cut.Store(false)
	if ok, err := a.Release(context.Background()); ok || err != nil {
		t.Fatalf("Release after the loss = %v, %v; want false, nil", ok, err)
	}
	if _, ok, err := b.Acquire(context.Background(), nil); !ok || err != nil {
		t.Fatalf("Acquire after the lost holder released = %v, %v; want at once", ok, err)
	}
}

func TestForeignRecordIsAnError(t *testing.T) {
	store := &MemoryStore{}
	a := newLease(t, newProvider(t, store), "foreign", "a")
	if _, ok, err := store.CAS(context.Background(), a.key, []byte("owner-x"), 0); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, ok, err := a.Acquire(context.Background(), nil); ok || !errors.Is(err, errBadRecord) {
		t.Fatalf("Acquire over a foreign value = %v, %v; want errBadRecord", ok, err)
	}
}

func TestConfigChecks(t *testing.T) {
	store := &MemoryStore{}
	for _, c := range []struct {
		name  string
		store Store
		opts  []Option
		want  string
	}{
		{"no store", nil, nil, "the store is nil"},
		{"renewal slower than the holding", store, []Option{WithRenewInterval(4 * time.Second)}, "leaves no renewal"},
		{"drift too large", store, []Option{WithDrift(0.5)}, "WithDrift: 0.5 is outside"},
		{"negative drift", store, []Option{WithDrift(-0.1)}, "WithDrift: -0.1 is outside"},
		{"zero duration", store, []Option{WithDuration(0)}, "WithDuration: 0s is not positive"},
		{"zero renew interval", store, []Option{WithRenewInterval(0)}, "WithRenewInterval"},
		{"negative safety margin", store, []Option{WithSafetyMargin(-time.Second)}, "WithSafetyMargin"},
		{"zero operation timeout", store, []Option{WithOperationTimeout(0)}, "WithOperationTimeout"},
		{"nil logger", store, []Option{WithLogger(nil)}, "WithLogger: nil logger"},
		{"nil option", store, []Option{nil}, "nil option"},
	} {
		if _, err := NewProvider(c.store, c.opts...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: NewProvider = %v, want an error with %q", c.name, err, c.want)
		}
	}
	d, err := NewProvider(store)
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if got, want := d.cfg.timing(), (leaseTiming{Duration: 5 * time.Second, SafetyMargin: time.Second, Drift: 0.01}); got != want {
		t.Errorf("default timing %+v, want %+v", got, want)
	}
	noDrift, err := NewProvider(store, WithDrift(0))
	if err != nil {
		t.Fatal(err)
	}
	if got := noDrift.cfg.timing().Drift; got != 0 {
		t.Errorf("WithDrift(0): drift %v", got)
	}
	p := newProvider(t, store)
	if _, err := p.NewLease("/", "a"); err == nil {
		t.Error("an empty lease name was accepted")
	}
}

// A contender that observes ahead (lease.Observer, as the singleton's
// manager does) takes over a dead holder's lease at its first Acquire once
// WaitFor has passed since the last renewal; while the holder renews, it
// never can.
func TestObserveCountsAhead(t *testing.T) {
	cut, a, b := holderAndContender(t, "observe")
	timing := memoryTiming(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go b.Observe(ctx)
	lost := leasetesting.NewLostRecorder()
	ta, ok, err := a.Acquire(context.Background(), lost.Callback)
	if !ok || err != nil {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	time.Sleep(timing.waitFor() + 300*time.Millisecond)
	if _, ok, err := b.Acquire(context.Background(), nil); ok || err != nil {
		t.Fatalf("b took over a renewed lease after observing it for WaitFor (err %v)", err)
	}

	killedAt := time.Now()
	cut.cut.Store(true)
	time.Sleep(timing.waitFor() + 2*testRenewInterval)
	tb, ok, err := b.Acquire(context.Background(), nil)
	if !ok || err != nil {
		t.Fatalf("first Acquire %v after the holder died = %v, %v; want a takeover", time.Since(killedAt), ok, err)
	}
	lostAt, _ := lost.Last()
	if lost.Calls() != 1 || !lostAt.Before(time.Now()) {
		t.Fatal("taken over before the holder reported the loss")
	}
	if tb <= ta {
		t.Fatalf("token %d not above %d", tb, ta)
	}
}
