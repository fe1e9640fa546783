package renewloop

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// holding is a test holding that lasts hold after its last success.
type holding struct {
	mu      sync.Mutex
	renewed time.Time
	hold    time.Duration
}

func (h *holding) untilLoss() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return max(0, h.hold-time.Since(h.renewed))
}

func (h *holding) succeeded(start time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.renewed = start
}

var errFinal = errors.New("taken")

func loop(h *holding, renew func(ctx context.Context, start time.Time) error, retried *atomic.Int32) Loop {
	return Loop{
		Interval: 20 * time.Millisecond, OperationTimeout: 50 * time.Millisecond,
		UntilLoss: h.untilLoss, Renew: renew,
		Final:    func(err error) bool { return errors.Is(err, errFinal) },
		Retrying: func(error) { retried.Add(1) },
	}
}

func TestRun(t *testing.T) {
	cases := []struct {
		name    string
		renew   func(h *holding) func(ctx context.Context, start time.Time) error
		want    error
		retried bool
	}{
		{"renewals keep it until ctx ends", func(h *holding) func(context.Context, time.Time) error {
			return func(_ context.Context, start time.Time) error { h.succeeded(start); return nil }
		}, nil, false},
		{"a hanging renewal does not delay the expiry", func(*holding) func(context.Context, time.Time) error {
			return func(context.Context, time.Time) error { time.Sleep(time.Second); return nil }
		}, ErrExpired, false},
		{"failing renewals are retried until the expiry", func(*holding) func(context.Context, time.Time) error {
			return func(context.Context, time.Time) error { return errors.New("unreachable") }
		}, ErrExpired, true},
		{"a final error ends it at once", func(*holding) func(context.Context, time.Time) error {
			return func(context.Context, time.Time) error { return errFinal }
		}, errFinal, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := &holding{renewed: time.Now(), hold: 200 * time.Millisecond}
			ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
			defer cancel()
			var retried atomic.Int32
			began := time.Now()
			err := Run(ctx, loop(h, c.renew(h), &retried))
			took := time.Since(began)
			if !errors.Is(err, c.want) || (c.want == nil && err != nil) {
				t.Fatalf("Run = %v after %v, want %v", err, took, c.want)
			}
			if (retried.Load() > 0) != c.retried {
				t.Fatalf("retried %d times", retried.Load())
			}
			if errors.Is(err, ErrExpired) && (took < 200*time.Millisecond || took > 500*time.Millisecond) {
				t.Fatalf("expired after %v, want about 200ms", took)
			}
		})
	}
}
