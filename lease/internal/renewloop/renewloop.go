// Package renewloop runs a lease holder's renewals, for the lease
// implementations that renew (lease/consul, lease/caslease).
package renewloop

import (
	"context"
	"errors"
	"time"
)

// ErrExpired: the holding's time ran out before a renewal succeeded.
var ErrExpired = errors.New("holding expired")

// Loop describes one holding's renewals.
type Loop struct {
	// Interval is the time from the start of one renewal to the next.
	Interval time.Duration
	// OperationTimeout bounds each renewal.
	OperationTimeout time.Duration
	// UntilLoss returns how long the holding lasts from now without a
	// further successful renewal (Renew moves it on when it succeeds).
	UntilLoss func() time.Duration
	// Renew renews once; start is when this attempt began, the time a
	// successful renewal counts from.
	Renew func(ctx context.Context, start time.Time) error
	// Final reports whether a renewal error ends the holding (the lease
	// was taken or deleted) rather than being retried.
	Final func(error) bool
	// Retrying is told of each error that is retried.
	Retrying func(error)
}

// Run renews every Interval until ctx ends (nil), the holding's time runs
// out (ErrExpired) or a renewal fails with a final error (that error). A
// renewal that hangs does not delay the expiry: the loss timer runs on its
// own.
func Run(ctx context.Context, l Loop) error {
	loss := time.NewTimer(l.UntilLoss())
	defer loss.Stop()
	next := time.NewTimer(l.Interval)
	defer next.Stop()
	// expired checks at the loss timer: a renewal may have moved the end.
	expired := func() bool {
		if d := l.UntilLoss(); d > 0 {
			loss.Reset(d)
			return false
		}
		return true
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-loss.C:
			if expired() {
				return ErrExpired
			}
			continue
		case <-next.C:
		}
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, l.OperationTimeout)
		done := make(chan error, 1)
		go func() { done <- l.Renew(rctx, start) }()
		err, stop, stopErr := wait(ctx, loss, expired, done)
		cancel()
		switch {
		case stop:
			return stopErr
		case err != nil && l.Final(err):
			return err
		case err != nil:
			l.Retrying(err)
		}
		loss.Reset(l.UntilLoss())
		next.Reset(max(0, l.Interval-time.Since(start)))
	}
}

// wait waits for a renewal's result, unless the loop must end first: stop
// with nil when ctx ended, with ErrExpired when the holding expired.
func wait(ctx context.Context, loss *time.Timer, expired func() bool, done <-chan error) (result error, stop bool, stopErr error) {
	for {
		select {
		case <-ctx.Done():
			return nil, true, nil
		case <-loss.C:
			if expired() {
				return nil, true, ErrExpired
			}
		case err := <-done:
			return err, false, nil
		}
	}
}
