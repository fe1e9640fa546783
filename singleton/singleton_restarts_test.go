package singleton

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/staleness"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSingletonRestarts(t *testing.T) {
	enabled := settings{SingletonRestartMinBackoff: time.Second, SingletonRestartMaxBackoff: 4 * time.Second,
		SingletonRestartRandomFactor: -1, SingletonRestartResetAfter: time.Minute}.withDefaults()
	disabled := settings{SingletonRestartMinBackoff: -1, SingletonRestartRandomFactor: -1}.withDefaults()

	// A step is one event at now; the checks say what it must answer.
	type step struct {
		at          time.Duration // since the start of the case
		op          string        // start, stop, stopAsked, refused, failed, fenced, due, dueStale, cancel
		wantErr     error
		wantRestart bool
		wantDelay   time.Duration
		wantAttempt int
		wantOK      bool // due, cancel
		wantPhase   childPhase
	}
	cases := []struct {
		name     string
		settings settings
		steps    []step
	}{
		{"stops on its own: restarts with a growing back-off", enabled, []step{
			{at: 0, op: "start", wantPhase: childRunning},
			{at: time.Second, op: "stop", wantRestart: true, wantDelay: time.Second, wantAttempt: 1, wantPhase: childRestartPending},
			{at: 2 * time.Second, op: "due", wantOK: true, wantAttempt: 1, wantPhase: childAbsent},
			{at: 2 * time.Second, op: "start", wantPhase: childRunning},
			{at: 3 * time.Second, op: "stop", wantRestart: true, wantDelay: 2 * time.Second, wantAttempt: 2, wantPhase: childRestartPending},
			{at: 5 * time.Second, op: "due", wantOK: true, wantAttempt: 2, wantPhase: childAbsent},
			{at: 5 * time.Second, op: "start", wantPhase: childRunning},
			{at: 6 * time.Second, op: "stop", wantRestart: true, wantDelay: 4 * time.Second, wantAttempt: 3, wantPhase: childRestartPending},
			{at: 10 * time.Second, op: "due", wantOK: true, wantAttempt: 3, wantPhase: childAbsent},
			{at: 10 * time.Second, op: "start", wantPhase: childRunning},
			{at: 11 * time.Second, op: "stop", wantRestart: true, wantDelay: 4 * time.Second, wantAttempt: 4, wantPhase: childRestartPending},
		}},
		{"ran past ResetAfter: the back-off starts over", enabled, []step{
			{at: 0, op: "start", wantPhase: childRunning},
			{at: time.Second, op: "stop", wantRestart: true, wantDelay: time.Second, wantAttempt: 1, wantPhase: childRestartPending},
			{at: 2 * time.Second, op: "due", wantOK: true, wantAttempt: 1, wantPhase: childAbsent},
			{at: 2 * time.Second, op: "start", wantPhase: childRunning},
			{at: 2*time.Second + time.Minute, op: "stop", wantRestart: true, wantDelay: time.Second, wantAttempt: 1, wantPhase: childRestartPending},
		}},
		{"asked to stop: no restart, and a new series after", enabled, []step{
			{at: 0, op: "start", wantPhase: childRunning},
			{at: time.Second, op: "stop", wantRestart: true, wantDelay: time.Second, wantAttempt: 1, wantPhase: childRestartPending},
			{at: 2 * time.Second, op: "due", wantOK: true, wantAttempt: 1, wantPhase: childAbsent},
			{at: 2 * time.Second, op: "start", wantPhase: childRunning},
			{at: 3 * time.Second, op: "stopAsked", wantPhase: childAbsent},
			{at: 4 * time.Second, op: "start", wantPhase: childRunning},
			{at: 5 * time.Second, op: "stop", wantRestart: true, wantDelay: time.Second, wantAttempt: 1, wantPhase: childRestartPending},
		}},
		{"cancelled: the timer is stale and a new series starts", enabled, []step{
			{at: 0, op: "start", wantPhase: childRunning},
			{at: time.Second, op: "stop", wantRestart: true, wantDelay: time.Second, wantAttempt: 1, wantPhase: childRestartPending},
			{at: time.Second, op: "cancel", wantOK: true, wantPhase: childAbsent},
			{at: time.Second, op: "cancel", wantOK: false, wantPhase: childAbsent},
			{at: 2 * time.Second, op: "dueStale", wantOK: false, wantPhase: childAbsent},
			{at: 3 * time.Second, op: "start", wantPhase: childRunning},
			{at: 4 * time.Second, op: "stop", wantRestart: true, wantDelay: time.Second, wantAttempt: 1, wantPhase: childRestartPending},
		}},
		{"a timer of an earlier series does not start a pending one", enabled, []step{
			{at: 0, op: "start", wantPhase: childRunning},
			{at: time.Second, op: "stop", wantRestart: true, wantDelay: time.Second, wantAttempt: 1, wantPhase: childRestartPending},
			{at: time.Second, op: "cancel", wantOK: true, wantPhase: childAbsent},
			{at: time.Second, op: "start", wantPhase: childRunning},
			{at: 2 * time.Second, op: "stop", wantRestart: true, wantDelay: time.Second, wantAttempt: 1, wantPhase: childRestartPending},
			{at: 2 * time.Second, op: "dueStale", wantOK: false, wantPhase: childRestartPending},
			{at: 3 * time.Second, op: "due", wantOK: true, wantAttempt: 1, wantPhase: childAbsent},
		}},
		{"never two children: a start while one runs or one is due is refused", enabled, []step{
			{at: 0, op: "start", wantPhase: childRunning},
			{at: 0, op: "start", wantErr: errChildAlive, wantPhase: childRunning},
			{at: time.Second, op: "stop", wantRestart: true, wantDelay: time.Second, wantAttempt: 1, wantPhase: childRestartPending},
			{at: time.Second, op: "start", wantErr: errChildAlive, wantPhase: childRestartPending},
		}},
		{"a termination without a child is refused", enabled, []step{
			{at: 0, op: "stop", wantErr: errNoChild, wantPhase: childAbsent},
			{at: 0, op: "start", wantPhase: childRunning},
			{at: time.Second, op: "stop", wantRestart: true, wantDelay: time.Second, wantAttempt: 1, wantPhase: childRestartPending},
			{at: time.Second, op: "stop", wantErr: errNoChild, wantPhase: childRestartPending},
		}},
		{"refused while the membership is stale: due again after a growing back-off", enabled, []step{
			{at: 0, op: "start", wantPhase: childRunning},
			{at: 0, op: "refused", wantRestart: true, wantDelay: time.Second, wantAttempt: 1, wantPhase: childRestartPending},
			{at: time.Second, op: "start", wantErr: errChildAlive, wantPhase: childRestartPending},
			{at: time.Second, op: "due", wantOK: true, wantAttempt: 1, wantPhase: childAbsent},
			{at: time.Second, op: "start", wantPhase: childRunning},
			{at: time.Second, op: "refused", wantRestart: true, wantDelay: 2 * time.Second, wantAttempt: 2, wantPhase: childRestartPending},
			{at: 3 * time.Second, op: "due", wantOK: true, wantAttempt: 2, wantPhase: childAbsent},
			{at: 3 * time.Second, op: "start", wantPhase: childRunning},
			{at: 4 * time.Second, op: "stop", wantRestart: true, wantDelay: 4 * time.Second, wantAttempt: 3, wantPhase: childRestartPending},
		}},
		{"refused, then cancelled by the removal: the timer is stale", enabled, []step{
			{at: 0, op: "start", wantPhase: childRunning},
			{at: 0, op: "refused", wantRestart: true, wantDelay: time.Second, wantAttempt: 1, wantPhase: childRestartPending},
			{at: 0, op: "cancel", wantOK: true, wantPhase: childAbsent},
			{at: time.Second, op: "dueStale", wantOK: false, wantPhase: childAbsent},
			{at: 2 * time.Second, op: "start", wantPhase: childRunning},
			{at: 3 * time.Second, op: "stop", wantRestart: true, wantDelay: time.Second, wantAttempt: 1, wantPhase: childRestartPending},
		}},
		{"refused with restarts disabled: due again all the same, after the default minimum", disabled, []step{
			{at: 0, op: "start", wantPhase: childRunning},
			{at: 0, op: "refused", wantRestart: true, wantDelay: time.Second, wantAttempt: 1, wantPhase: childRestartPending},
			{at: time.Second, op: "due", wantOK: true, wantAttempt: 1, wantPhase: childAbsent},
			{at: time.Second, op: "start", wantPhase: childRunning},
			{at: 2 * time.Second, op: "stop", wantRestart: false, wantPhase: childAbsent},
		}},
		{"stopped by its stale fence: due again, restarts disabled too", disabled, []step{
			{at: 0, op: "start", wantPhase: childRunning},
			{at: time.Second, op: "fenced", wantRestart: true, wantDelay: time.Second, wantAttempt: 1, wantPhase: childRestartPending},
			{at: 2 * time.Second, op: "due", wantOK: true, wantAttempt: 1, wantPhase: childAbsent},
			{at: 2 * time.Second, op: "start", wantPhase: childRunning},
			{at: 3 * time.Second, op: "stop", wantRestart: false, wantPhase: childAbsent},
			{at: 3 * time.Second, op: "fenced", wantErr: errNoChild, wantPhase: childAbsent},
		}},
		{"failed for another reason: absent, never started again", enabled, []step{
			{at: 0, op: "start", wantPhase: childRunning},
			{at: 0, op: "failed", wantRestart: false, wantPhase: childAbsent},
			{at: time.Second, op: "start", wantPhase: childRunning},
		}},
		{"a failed start without a start is refused", enabled, []step{
			{at: 0, op: "refused", wantErr: errNoChild, wantPhase: childAbsent},
			{at: 0, op: "start", wantPhase: childRunning},
			{at: 0, op: "refused", wantRestart: true, wantDelay: time.Second, wantAttempt: 1, wantPhase: childRestartPending},
			{at: 0, op: "failed", wantErr: errNoChild, wantPhase: childRestartPending},
		}},
		{"restart disabled: Akka's behaviour, it stays stopped", disabled, []step{
			{at: 0, op: "start", wantPhase: childRunning},
			{at: time.Second, op: "stop", wantRestart: false, wantPhase: childAbsent},
			{at: 2 * time.Second, op: "dueStale", wantOK: false, wantPhase: childAbsent},
			{at: 3 * time.Second, op: "start", wantPhase: childRunning},
		}},
	}
	t0 := time.Unix(1000, 0)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newSingletonRestarts(c.settings)
			var lastGen int
			for i, st := range c.steps {
				now := t0.Add(st.at)
				var err error
				switch st.op {
				case "start":
					err = r.started(now)
				case "stop", "stopAsked", "refused", "failed", "fenced":
					var plan restartPlan
					switch st.op {
					case "fenced":
						plan, err = r.fencedStop(now)
					case "refused":
						plan, err = r.notStarted(now, fmt.Errorf("spawn: %w", staleness.ErrStale))
					case "failed":
						plan, err = r.notStarted(now, errors.New("spawn: name exists"))
					default:
						plan, err = r.stopped(now, st.op == "stop")
					}
					assert.Equal(t, st.wantRestart, plan.restart, "step %d: restart", i)
					assert.Equal(t, st.wantDelay, plan.delay, "step %d: delay", i)
					assert.Equal(t, st.wantAttempt, plan.attempt, "step %d: attempt", i)
					if plan.restart {
						lastGen = plan.gen
					}
				case "due", "dueStale":
					gen := lastGen
					if st.op == "dueStale" {
						gen = lastGen - 1
					}
					attempt, ok := r.due(gen)
					assert.Equal(t, st.wantOK, ok, "step %d: due", i)
					assert.Equal(t, st.wantAttempt, attempt, "step %d: attempt", i)
				case "cancel":
					assert.Equal(t, st.wantOK, r.cancel(), "step %d: cancel", i)
				default:
					t.Fatalf("unknown op %q", st.op)
				}
				if st.wantErr != nil {
					require.True(t, errors.Is(err, st.wantErr), "step %d: error %v, want %v", i, err, st.wantErr)
				} else {
					require.NoError(t, err, "step %d", i)
				}
				assert.Equal(t, st.wantPhase, r.phase, "step %d: phase", i)
				assert.Equal(t, r.phase == childRestartPending, r.pending(), "step %d: pending", i)
			}
		})
	}
}

func TestSingletonRestartSettings(t *testing.T) {
	d := settings{}.withDefaults()
	assert.Equal(t, time.Second, d.SingletonRestartMinBackoff)
	assert.Equal(t, 30*time.Second, d.SingletonRestartMaxBackoff)
	assert.Equal(t, 0.2, d.SingletonRestartRandomFactor)
	series, ok := d.singletonRestartBackoff()
	require.True(t, ok, "restarts are on by default")
	assert.Equal(t, time.Second, series.Min)

	noJitter := settings{SingletonRestartRandomFactor: -1}.withDefaults()
	assert.Equal(t, 0.0, noJitter.SingletonRestartRandomFactor)

	series, ok = settings{SingletonRestartMinBackoff: -time.Nanosecond}.withDefaults().singletonRestartBackoff()
	assert.False(t, ok, "a negative minimum keeps Akka's behaviour")
	assert.Equal(t, time.Second, series.Min, "a refused start waits the default minimum")
}

func TestDecideRestartDue(t *testing.T) {
	cases := []struct {
		name      string
		useLease  bool
		leaseHeld bool
		want      restartDueDecision
	}{
		{"no lease", false, false, startAgainNow},
		{"lease still held: same holding", true, true, startAgainNow},
		{"lease lost meanwhile", true, false, acquireLeaseBeforeRestart},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, decideRestartDue(c.useLease, c.leaseHeld))
		})
	}
}

func TestFencedWhileStale(t *testing.T) {
	cases := []struct {
		msg    any
		fenced bool
	}{
		{&actor.Started{}, false},
		{&actor.Stopping{}, false},
		{&actor.Stopped{}, false},
		{&actor.Restarting{}, false},
		{&actor.PoisonPill{}, false},
		{&actor.ReceiveTimeout{}, true},
		{"a tick of its own timer", true},
		{&actor.MessageEnvelope{Message: "through a proxy"}, true},
	}
	for _, c := range cases {
		if got := fencedWhileStale(c.msg); got != c.fenced {
			t.Errorf("fencedWhileStale(%T) = %v, want %v", c.msg, got, c.fenced)
		}
	}
}
