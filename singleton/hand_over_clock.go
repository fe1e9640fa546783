package singleton

import "time"

// handOverClock measures the hand-over time: from when this member became
// the oldest (BecomingOldest) until the singleton runs here, through
// AcquiringLease and refused starts.
type handOverClock struct {
	since time.Time // zero: not measuring
}

// entered takes the manager entering state at now, with the singleton
// running or not; measured reports a hand-over that ended, of took.
func (c handOverClock) entered(state string, singletonRunning bool, now time.Time) (next handOverClock, took time.Duration, measured bool) {
	switch state {
	case stateBecomingOldest:
		return handOverClock{since: now}, 0, false
	case stateOldest:
		if !singletonRunning {
			return c, 0, false // its start was refused: the hand-over ends once it runs
		}
		if !c.since.IsZero() {
			return handOverClock{}, now.Sub(c.since), true
		}
		return handOverClock{}, 0, false
	case stateAcquiringLease:
		return c, 0, false
	default:
		return handOverClock{}, 0, false
	}
}
