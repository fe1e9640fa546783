package loss

import (
	"errors"
	"testing"
)

func TestHolding(t *testing.T) {
	errLost := errors.New("lost")
	for _, tc := range []struct {
		name       string
		notify     bool // a second Acquire changed the callback
		release    bool // released before the loss
		wantCalled string
		wantEnded  bool // End after all: it had ended
	}{
		{name: "lost once calls the callback", wantCalled: "first", wantEnded: true},
		{name: "a new callback replaces the old", notify: true, wantCalled: "second", wantEnded: true},
		{name: "released calls nothing", release: true, wantCalled: "", wantEnded: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cancelled := 0
			called := ""
			h := New(func() { cancelled++ }, func(error) { called += "first" })
			if tc.notify {
				h.Notify(func(error) { called += "second" })
			}
			if tc.release && h.End() {
				t.Fatal("End of a live holding reports it ended")
			}
			for range 2 { // a second loss is no loss
				if cb := h.Lose(); cb != nil {
					cb(errLost)
				}
			}
			if called != tc.wantCalled || !h.Ended() || cancelled == 0 || h.End() != tc.wantEnded {
				t.Fatalf("called %q, ended %t, cancelled %d times", called, h.Ended(), cancelled)
			}
		})
	}
}
