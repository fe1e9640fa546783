package singleton

import (
	"errors"
	"fmt"
	"time"

	"github.com/protoshard/protoshard/internal/backoff"
	"github.com/protoshard/protoshard/internal/staleness"
)

// childPhase is where the singleton child of a manager is in its life.
type childPhase int

const (
	// childAbsent: no singleton child runs and none is due to start.
	childAbsent childPhase = iota
	// childRunning: the child runs (or stops and its Terminated is due).
	childRunning
	// childRestartPending: the child terminated on its own while its
	// manager was the oldest, or its start was refused because this node's
	// membership was stale; a timer starts it again after the back-off.
	childRestartPending
)

func (p childPhase) String() string {
	switch p {
	case childAbsent:
		return "absent"
	case childRunning:
		return "running"
	case childRestartPending:
		return "restartPending"
	}
	return fmt.Sprintf("childPhase(%d)", int(p))
}

var (
	// errChildAlive: a start while a child runs or a restart is pending
	// would make two incarnations.
	errChildAlive = errors.New("singleton child already running or due to start again")
	// errNoChild: a termination of a child that never started.
	errNoChild = errors.New("no singleton child running")
)

// singletonRestarts is the manager's bookkeeping of its singleton child:
// at most one runs, and one that terminated on its own while its manager is
// the oldest starts again after a back-off (WithSingletonRestartBackoff),
// unless a hand-over, leave or removal cancels it first. So does one whose
// start was refused because this node's membership was stale (the node may
// have been removed, and the singleton started elsewhere, without its
// knowing yet): its removal, when it hears of it, cancels the start; if it
// confirms its membership again instead, the start goes ahead. The manager
// does the I/O: it spawns the child, arms the timer with the number this
// hands out, and cancels on every transition away from Oldest.
type singletonRestarts struct {
	enabled bool           // settings.SingletonRestartMinBackoff is not negative
	series  backoff.Series // with restarts disabled, only refused starts wait it
	phase   childPhase
	gen     int // numbers the pending restart's timer
	attempt int // the pending (or last) restart's number in its series
}

func newSingletonRestarts(s settings) singletonRestarts {
	series, enabled := s.singletonRestartBackoff()
	return singletonRestarts{enabled: enabled, series: series}
}

// restartPlan is what the manager does after its child terminated.
type restartPlan struct {
	restart bool          // arm a timer with gen, firing after delay
	delay   time.Duration // the back-off
	attempt int           // the restart's number in its series (1 for the first)
	gen     int
}

// started records that the child is being started at now.
func (r *singletonRestarts) started(now time.Time) error {
	if r.phase != childAbsent {
		return fmt.Errorf("start while %s: %w", r.phase, errChildAlive)
	}
	r.phase = childRunning
	r.series.Started(now)
	return nil
}

// stopped records that the child terminated at now. restartable: it stopped
// on its own while its manager is the oldest and not leaving; then, with
// restarts enabled, it is started again after the plan's delay.
func (r *singletonRestarts) stopped(now time.Time, restartable bool) (restartPlan, error) {
	if r.phase != childRunning {
		return restartPlan{}, fmt.Errorf("termination while %s: %w", r.phase, errNoChild)
	}
	if !restartable || !r.enabled {
		r.phase = childAbsent
		r.series.Reset()
		return restartPlan{}, nil
	}
	return r.restartLater(now), nil
}

// notStarted records that the start just recorded (started) did not
// happen, for err. Refused because this node's membership was stale
// (staleness.ErrStale): the child is due to start after the back-off, as
// after a stop on its own, and with restarts disabled too, for it never
// ran. Any other error: the child stays absent (the manager logs it).
func (r *singletonRestarts) notStarted(now time.Time, err error) (restartPlan, error) {
	if r.phase != childRunning {
		return restartPlan{}, fmt.Errorf("failed start while %s: %w", r.phase, errNoChild)
	}
	if !errors.Is(err, staleness.ErrStale) {
		r.phase = childAbsent
		r.series.Reset()
		return restartPlan{}, nil
	}
	return r.restartLater(now), nil
}

// fencedStop records that the child was stopped by its stale fence (see
// staleFence): as after a refused start, it is due to start again after
// the back-off, with restarts disabled too, for it stopped only because
// this node's membership was stale.
func (r *singletonRestarts) fencedStop(now time.Time) (restartPlan, error) {
	if r.phase != childRunning {
		return restartPlan{}, fmt.Errorf("termination while %s: %w", r.phase, errNoChild)
	}
	return r.restartLater(now), nil
}

// restartLater makes the child due to start again after the series' next
// delay, under a new timer number.
func (r *singletonRestarts) restartLater(now time.Time) restartPlan {
	delay, attempt := r.series.Stopped(now)
	r.phase = childRestartPending
	r.gen++
	r.attempt = attempt
	return restartPlan{restart: true, delay: delay, attempt: attempt, gen: r.gen}
}

// due handles the firing of restart timer gen: ok when it is the pending
// restart, which the manager now carries out (a stale timer: not ok).
func (r *singletonRestarts) due(gen int) (attempt int, ok bool) {
	if r.phase != childRestartPending || gen != r.gen {
		return 0, false
	}
	r.phase = childAbsent
	return r.attempt, true
}

// cancel drops a pending restart (hand-over, leave, removal, lease loss);
// the next series starts from the minimum. It reports whether one was
// pending.
func (r *singletonRestarts) cancel() bool {
	if r.phase != childRestartPending {
		return false
	}
	r.phase = childAbsent
	r.gen++
	r.series.Reset()
	return true
}

// pending reports whether the child is due to start again.
func (r *singletonRestarts) pending() bool { return r.phase == childRestartPending }
