package singleton

import (
	"fmt"
	"testing"

	"github.com/protoshard/protoshard/messages"
)

func TestRouteEnvelope(t *testing.T) {
	cases := []struct {
		state          string
		running        bool
		restartPending bool
		want           envelopeRoute
	}{
		{stateOldest, true, false, deliverToSingleton},
		{stateOldest, false, true, holdEnvelope},
		{stateOldest, false, false, dropNotRestarted},
		{stateWasOldest, true, false, deliverToSingleton},
		{stateWasOldest, false, true, dropNotRestarted},
		{stateStart, false, false, holdEnvelope},
		{stateBecomingOldest, false, false, holdEnvelope},
		{stateAcquiringLease, true, false, holdEnvelope},
		{stateHandingOver, true, false, holdEnvelope},
		{stateYounger, false, false, passToPreviousOldest},
		{stateEnd, false, false, passToHandedOver},
		{stateStopping, true, false, dropMemberRemoved},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s running=%v pending=%v", c.state, c.running, c.restartPending), func(t *testing.T) {
			if got := routeEnvelope(c.state, c.running, c.restartPending); got != c.want {
				t.Fatalf("route %v, want %v", got, c.want)
			}
		})
	}
}

func TestDecidePassOn(t *testing.T) {
	cases := []struct {
		name       string
		knownOther bool
		hops       int32
		want       passOnDecision
	}{
		{"first hop", true, 0, passOn},
		{"last hop allowed", true, maxEnvelopeHops - 1, passOn},
		{"too many hops", true, maxEnvelopeHops, dropTooManyHops},
		{"no other manager", false, 0, dropNoManager},
		{"no other manager wins over hops", false, maxEnvelopeHops, dropNoManager},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := decidePassOn(c.knownOther, c.hops); got != c.want {
				t.Fatalf("decided %v, want %v", got, c.want)
			}
		})
	}
}

// TestHeldEnvelopes drives a buffer of two input by input.
func TestHeldEnvelopes(t *testing.T) {
	env := func(hops int32) *messages.SingletonEnvelope { return &messages.SingletonEnvelope{Hops: hops} }
	e1, e2, e3, e4 := env(1), env(2), env(3), env(4)
	steps := []struct {
		name        string
		hold        *messages.SingletonEnvelope // nil: take
		wantDropped *messages.SingletonEnvelope
		wantTaken   []*messages.SingletonEnvelope
		wantHeld    []*messages.SingletonEnvelope
	}{
		{"hold 1", e1, nil, nil, []*messages.SingletonEnvelope{e1}},
		{"hold 2", e2, nil, nil, []*messages.SingletonEnvelope{e1, e2}},
		{"hold 3: the oldest makes way", e3, e1, nil, []*messages.SingletonEnvelope{e2, e3}},
		{"take", nil, nil, []*messages.SingletonEnvelope{e2, e3}, nil},
		{"take none", nil, nil, nil, nil},
		{"hold 4", e4, nil, nil, []*messages.SingletonEnvelope{e4}},
	}
	var h heldEnvelopes
	for _, s := range steps {
		var taken []*messages.SingletonEnvelope
		var dropped *messages.SingletonEnvelope
		if s.hold != nil {
			h, dropped = h.hold(s.hold, 2)
		} else {
			h, taken = h.take()
		}
		if dropped != s.wantDropped {
			t.Fatalf("%s: dropped %v, want %v", s.name, dropped, s.wantDropped)
		}
		if fmt.Sprint(taken) != fmt.Sprint(s.wantTaken) || fmt.Sprint(h.envs) != fmt.Sprint(s.wantHeld) || h.len() != len(s.wantHeld) {
			t.Fatalf("%s: took %v holding %v, want %v holding %v", s.name, taken, h.envs, s.wantTaken, s.wantHeld)
		}
	}
}
