package singleton

import "testing"

func TestSingletonShownAndIdentified(t *testing.T) {
	cases := []struct {
		state                 string
		shown                 bool
		identified, ifExiting bool
	}{
		{stateStart, false, false, false},
		{stateYounger, false, false, false},
		{stateBecomingOldest, false, false, false},
		{stateAcquiringLease, true, false, false},
		{stateOldest, true, true, false},
		{stateWasOldest, true, false, false},
		{stateHandingOver, true, false, false},
		{stateStopping, true, false, false},
		{stateEnd, false, false, false},
	}
	for _, c := range cases {
		if got := singletonShownIn(c.state); got != c.shown {
			t.Errorf("%s: shown %v, want %v", c.state, got, c.shown)
		}
		if got := singletonIdentifiedIn(c.state, false); got != c.identified {
			t.Errorf("%s: identified %v, want %v", c.state, got, c.identified)
		}
		if got := singletonIdentifiedIn(c.state, true); got != c.ifExiting {
			t.Errorf("%s leaving: identified %v, want %v", c.state, got, c.ifExiting)
		}
	}
}
