package actorsharding

import (
	"time"

	"github.com/protoshard/protoshard/internal/backoff"
)

// registrationSchedule is when an unregistered region registers, as
// Akka's ShardRegion schedules it: when something may have changed the
// coordinator (the region started, joined, lost its coordinator, or the
// oldest member of its role changed) it registers at once, then again
// after a delay that doubles from Akka's initial registration delay up to
// the retry interval. From there on the region's periodic retry tick
// registers it, so a coordinator that is slow to start is asked a few
// times and then at the retry interval, never in a tight loop. A Register
// that found the coordinator still starting, or was lost on its way
// through a proxy that had not yet seen the change, is sent again well
// before the retry interval.
type registrationSchedule struct {
	delays  backoff.Exponential
	limit   time.Duration // the retry interval: the periodic retry takes over
	attempt int
	gen     int // of the current series; a retry of another is stale
}

// minRegistrationDelay is the floor of Akka's initial registration delay.
const minRegistrationDelay = 100 * time.Millisecond

func newRegistrationSchedule(retryInterval time.Duration) registrationSchedule {
	// Akka: initRegistrationDelay = 100.millis max (retryInterval / 2 / 2 / 2).
	return registrationSchedule{
		delays: backoff.Exponential{Min: max(minRegistrationDelay, retryInterval/8), Max: retryInterval},
		limit:  retryInterval,
	}
}

// registerRetry is the timer of one retry of series gen.
type registerRetry struct{ gen int }

// start begins a new series (the region registers now) and returns the
// retry to schedule after delay, unless ok is false: the first delay is
// the retry interval already.
func (s *registrationSchedule) start() (retry registerRetry, delay time.Duration, ok bool) {
	s.gen++
	s.attempt = 0
	return s.following()
}

// due tells whether retry belongs to the current series (the region
// registers again then) and returns the retry after it, as start does.
func (s *registrationSchedule) due(retry registerRetry) (current bool, next registerRetry, delay time.Duration, ok bool) {
	if retry.gen != s.gen {
		return false, registerRetry{}, 0, false
	}
	s.attempt++
	next, delay, ok = s.following()
	return true, next, delay, ok
}

// stop ends the current series: the region registered.
func (s *registrationSchedule) stop() { s.gen++ }

func (s *registrationSchedule) following() (registerRetry, time.Duration, bool) {
	d := s.delays.Delay(s.attempt)
	if d >= s.limit {
		return registerRetry{}, 0, false
	}
	return registerRetry{gen: s.gen}, d, true
}
