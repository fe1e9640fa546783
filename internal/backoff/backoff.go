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

// Series is the bookkeeping of Akka's BackoffSupervisor for one child: the
// delay before each start again grows while the child keeps stopping soon
// after it started, and starts over from Min once the child ran for
// ResetAfter (Akka's AutoReset).
type Series struct {
	Exponential
	// ResetAfter is how long the child must have run for its stop to count
	// as the first of a new series. Zero: Min (Akka's default,
	// AutoReset(minBackoff)).
	ResetAfter time.Duration

	attempt   int
	startedAt time.Time
}

// Started records that the child started at now.
func (s *Series) Started(now time.Time) { s.startedAt = now }

// Stopped records that the child stopped at now and returns the delay
// before it is started again and the number of that start in the series
// (1 for the first).
func (s *Series) Stopped(now time.Time) (delay time.Duration, attempt int) {
	resetAfter := s.ResetAfter
	if resetAfter <= 0 {
		resetAfter = s.Min
	}
	if !s.startedAt.IsZero() && now.Sub(s.startedAt) >= resetAfter {
		s.attempt = 0
	}
	s.startedAt = time.Time{}
	delay = s.Delay(s.attempt)
	s.attempt++
	return delay, s.attempt
}

// Reset starts a new series: the next stop waits Min again.
func (s *Series) Reset() {
	s.attempt = 0
	s.startedAt = time.Time{}
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
