// Package backoff is the one back-off of protoshard: a delay that doubles
// from a minimum up to a maximum, with random jitter, as Akka's
// BackoffSupervisor computes it.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Exponential is Akka's back-off: attempt n waits Min·2ⁿ, at most Max,
// stretched by a random factor in [1, 1+RandomFactor) so that nodes that
// failed together do not retry together.
type Exponential struct {
	// Min is the first delay.
	Min time.Duration
	// Max caps the delay (before jitter). Zero or below Min: Min.
	Max time.Duration
	// RandomFactor is the jitter, 0 for none (Akka's random-factor).
	RandomFactor float64
}

// Delay is the delay before retry number attempt (0 for the first).
func (b Exponential) Delay(attempt int) time.Duration {
	limit := max(b.Max, b.Min)
	d := b.Min
	for i := 0; i < attempt && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	if b.RandomFactor > 0 {
		d += time.Duration(float64(d) * b.RandomFactor * rand.Float64())
	}
	return max(d, 0)
}

// Sleep waits d, or until ctx ends, whichever comes first; it returns
// ctx's error in the second case.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
