package singleton

import (
	"fmt"
	"testing"
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
