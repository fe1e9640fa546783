package singleton

import "testing"

func TestSingletonShownAndIdentified(t *testing.T) {
	cases := []struct {
		state                 string
		shown                 bool
		identified, ifExiting bool
	}{
		{StateStart, false, false, false},
		{StateYounger, false, false, false},
		{StateBecomingOldest, false, false, false},
		{StateAcquiringLease, true, false, false},
		{StateOldest, true, true, false},
		{StateWasOldest, true, false, false},
		{StateHandingOver, true, false, false},
		{StateStopping, true, false, false},
		{StateEnd, false, false, false},
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
