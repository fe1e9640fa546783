package singleton

import (
	"errors"
	"testing"
)

// leaseInput is one input to a leaseHolding, with what it must decide.
type leaseInput struct {
	name string
	do   func(h leaseHolding) (leaseHolding, any, error)
	want any   // the decision (or gen) expected, nil when none
	err  error // the error expected, nil when none
	then leaseHolding
}

func acquireIn() func(leaseHolding) (leaseHolding, any, error) {
	return func(h leaseHolding) (leaseHolding, any, error) {
		h, gen := h.acquire()
		return h, gen, nil
	}
}

func answerIn(gen int, inAcquiring, acquired, held bool) func(leaseHolding) (leaseHolding, any, error) {
	return func(h leaseHolding) (leaseHolding, any, error) {
		h, d := h.answered(gen, inAcquiring, acquired, held)
		return h, d, nil
	}
}

func releaseIn(haveLease, singletonMayRun bool) func(leaseHolding) (leaseHolding, any, error) {
	return func(h leaseHolding) (leaseHolding, any, error) {
		h, err := h.release(haveLease, singletonMayRun)
		return h, nil, err
	}
}

func retryIn(gen int, singletonAlive bool) func(leaseHolding) (leaseHolding, any, error) {
	return func(h leaseHolding) (leaseHolding, any, error) { return h, h.retryDue(gen, singletonAlive), nil }
}

func lostIn(gen int, state string, singletonAlive bool) func(leaseHolding) (leaseHolding, any, error) {
	return func(h leaseHolding) (leaseHolding, any, error) { return h, h.lost(gen, state, singletonAlive), nil }
}

func armRetryIn() func(leaseHolding) (leaseHolding, any, error) {
	return func(h leaseHolding) (leaseHolding, any, error) {
		h, gen := h.armRetry()
		return h, gen, nil
	}
}

func TestLeaseHoldingTransitions(t *testing.T) {
	cases := []struct {
		name   string
		inputs []leaseInput
	}{
		{"acquired while acquiring starts the singleton", []leaseInput{
			{"acquire", acquireIn(), 1, nil, leaseHolding{gen: 1, requested: true, mayHold: true}},
			{"yes, still held", answerIn(1, true, true, true), startWithLease, nil, leaseHolding{gen: 1, mayHold: true}},
			{"started under token 7", func(h leaseHolding) (leaseHolding, any, error) { return h.startedUnder(7), nil, nil },
				nil, nil, leaseHolding{gen: 1, mayHold: true, token: 7}},
			{"lost in Oldest", lostIn(1, stateOldest, true), stopSingletonAndReacquire, nil, leaseHolding{gen: 1, mayHold: true, token: 7}},
			{"release refused while the singleton runs", releaseIn(true, true), nil, errSingletonMayRun,
				leaseHolding{gen: 1, mayHold: true, token: 7}},
			{"release once it stopped", releaseIn(true, false), nil, nil, leaseHolding{gen: 1, token: 7}},
			{"second release: nothing held", releaseIn(true, false), nil, errNothingToRelease, leaseHolding{gen: 1, token: 7}},
		}},
		{"a no is retried, a stale answer ignored", []leaseInput{
			{"acquire 1", acquireIn(), 1, nil, leaseHolding{gen: 1, requested: true, mayHold: true}},
			{"no", answerIn(1, true, false, false), retryLeaseLater, nil, leaseHolding{gen: 1, mayHold: true}},
			{"arm retry", armRetryIn(), 1, nil, leaseHolding{gen: 1, mayHold: true, retryGen: 1}},
			{"retry due", retryIn(1, false), acquireLeaseNow, nil, leaseHolding{gen: 1, mayHold: true, retryGen: 1}},
			{"acquire 2", acquireIn(), 2, nil, leaseHolding{gen: 2, requested: true, mayHold: true, retryGen: 1}},
			{"retry while asking", retryIn(1, false), ignoreLeaseRetry, nil, leaseHolding{gen: 2, requested: true, mayHold: true, retryGen: 1}},
			{"late yes to 1", answerIn(1, true, true, true), ignoreAcquireResult, nil,
				leaseHolding{gen: 2, requested: true, mayHold: true, retryGen: 1}},
			{"loss of 1", lostIn(1, stateOldest, true), ignoreLeaseLost, nil, leaseHolding{gen: 2, requested: true, mayHold: true, retryGen: 1}},
			{"yes to 2 but lost meanwhile", answerIn(2, true, true, false), retryLeaseLater, nil,
				leaseHolding{gen: 2, mayHold: true, retryGen: 1}},
		}},
		{"a yes after leaving AcquiringLease is given back", []leaseInput{
			{"acquire", acquireIn(), 1, nil, leaseHolding{gen: 1, requested: true, mayHold: true}},
			{"yes in Younger", answerIn(1, false, true, true), releaseUnwantedLease, nil, leaseHolding{gen: 1, requested: true, mayHold: true}},
			{"release", releaseIn(true, false), nil, nil, leaseHolding{gen: 1}},
			{"a second yes: release queued already", answerIn(1, false, true, true), ignoreAcquireResult, nil, leaseHolding{gen: 1}},
		}},
		{"no lease made: nothing to release", []leaseInput{
			{"could not ask", func(h leaseHolding) (leaseHolding, any, error) { return h.acquireNotAsked(), nil, nil }, nil, nil, leaseHolding{}},
			{"release", releaseIn(false, false), nil, errNothingToRelease, leaseHolding{}},
		}},
		{"lost while the old singleton stops", []leaseInput{
			{"acquire", acquireIn(), 1, nil, leaseHolding{gen: 1, requested: true, mayHold: true}},
			{"yes", answerIn(1, true, true, true), startWithLease, nil, leaseHolding{gen: 1, mayHold: true}},
			{"lost", lostIn(1, stateOldest, true), stopSingletonAndReacquire, nil, leaseHolding{gen: 1, mayHold: true}},
			{"stop asking", func(h leaseHolding) (leaseHolding, any, error) { return h.stopAsking(), nil, nil }, nil, nil,
				leaseHolding{gen: 1, mayHold: true}},
			{"arm retry", armRetryIn(), 1, nil, leaseHolding{gen: 1, mayHold: true, retryGen: 1}},
			{"retry waits for the singleton", retryIn(1, true), waitForSingletonToStop, nil, leaseHolding{gen: 1, mayHold: true, retryGen: 1}},
			{"stale retry", retryIn(0, false), ignoreLeaseRetry, nil, leaseHolding{gen: 1, mayHold: true, retryGen: 1}},
			{"lost in HandingOver", lostIn(1, stateHandingOver, true), stopSingletonNow, nil, leaseHolding{gen: 1, mayHold: true, retryGen: 1}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h leaseHolding
			for _, in := range c.inputs {
				next, got, err := in.do(h)
				checkTransition(t, in.name, h, next, err, in.err)
				if got != in.want {
					t.Fatalf("%s: decided %v, want %v", in.name, got, in.want)
				}
				if next != in.then {
					t.Fatalf("%s: next %+v, want %+v", in.name, next, in.then)
				}
				h = next
			}
		})
	}
}

// checkTransition fails t unless a transition's error is want (nil: none),
// and a failed transition changed nothing.
func checkTransition[T comparable](t *testing.T, step string, before, after T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) || (want == nil && err != nil) {
		t.Fatalf("%s: error %v, want %v", step, err, want)
	}
	if err != nil && after != before {
		t.Fatalf("%s: failed transition changed %+v to %+v", step, before, after)
	}
}
