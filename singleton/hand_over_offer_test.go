package singleton

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/messages"
)

// TestHandOverOffer drives End's data input by input: each step names the
// input, the decision or answer it must give, and what must hold after it.
func TestHandOverOffer(t *testing.T) {
	newOldest := actor.NewPID("127.0.0.1:2", "mgr")
	stranger := actor.NewPID("127.0.0.1:3", "mgr")
	held := []*messages.SingletonEnvelope{{Hops: 1}}
	done := &messages.HandOverDone{FromMemberId: "a", Buffered: held}
	type step struct {
		name     string
		do       func(o handOverOffer) (handOverOffer, any, error)
		want     any
		err      error
		pending  bool
		quiet    bool
		leaveMay bool // a leaving member in End may let its leave go on
	}
	retry := func(count int) func(handOverOffer) (handOverOffer, any, error) {
		return func(o handOverOffer) (handOverOffer, any, error) {
			o, d, dropped, err := o.retry(count, 2)
			if len(dropped) > 0 {
				return o, len(dropped), err
			}
			return o, d, err
		}
	}
	answer := func(from *actor.PID, gone bool) func(handOverOffer) (handOverOffer, any, error) {
		return func(o handOverOffer) (handOverOffer, any, error) {
			return o, o.answerHandOverToMe(from, "a", gone), nil
		}
	}
	drain := func(o handOverOffer) (handOverOffer, any, error) {
		o, gen := o.armDrain()
		return o, gen, nil
	}
	drained := func(gen int) func(handOverOffer) (handOverOffer, any, error) {
		return func(o handOverOffer) (handOverOffer, any, error) {
			o, over := o.drained(gen)
			return o, over, nil
		}
	}
	acked := func(o handOverOffer) (handOverOffer, any, error) {
		o, err := o.acked()
		return o, nil, err
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"acknowledged hand-over", []step{
			{"handed over", func(o handOverOffer) (handOverOffer, any, error) { return o.handedOver(newOldest, done), nil, nil },
				nil, nil, true, false, false},
			{"drain armed", drain, 1, nil, true, false, false},
			{"HandOverToMe from the new oldest", answer(newOldest, false), done, nil, true, false, false},
			{"HandOverToMe from a stranger", answer(stranger, false), (*messages.HandOverDone)(nil), nil, true, false, false},
			{"resend 1", retry(1), resendHandOverDone, nil, true, false, false},
			{"quiet", drained(1), true, nil, true, true, false},
			{"ack", acked, nil, nil, false, true, true},
			{"second ack", acked, nil, errNoHandOverPending, false, true, true},
			{"resend after ack", retry(2), doneRetryDecision(0), errNoHandOverPending, false, true, true},
		}},
		{"never acknowledged", []step{
			{"handed over", func(o handOverOffer) (handOverOffer, any, error) { return o.handedOver(newOldest, done), nil, nil },
				nil, nil, true, false, false},
			{"resend 2", retry(2), resendHandOverDone, nil, true, false, false},
			{"give up at 3: its messages are dropped", retry(3), len(held), nil, false, false, false},
		}},
		{"handed over to nobody, then removed", []step{
			{"to nobody", func(o handOverOffer) (handOverOffer, any, error) { return o.handedOver(nil, done), nil, nil },
				nil, nil, false, false, false},
			{"HandOverToMe while a member", answer(newOldest, false), (*messages.HandOverDone)(nil), nil, false, false, false},
			{"HandOverToMe once removed", answer(newOldest, true), &messages.HandOverDone{FromMemberId: "a"}, nil, false, false, false},
			{"drain 1", drain, 1, nil, false, false, false},
			{"drain 2 (a proxied message)", drain, 2, nil, false, false, false},
			{"stale quiet timer", drained(1), false, nil, false, false, false},
			{"quiet", drained(2), true, nil, false, true, true},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var o handOverOffer
			for _, s := range c.steps {
				next, got, err := s.do(o)
				checkTransition(t, s.name, o, next, err, s.err)
				if gd, ok := got.(*messages.HandOverDone); ok {
					wd, _ := s.want.(*messages.HandOverDone)
					if (gd == nil) != (wd == nil) || (gd != nil && (gd.FromMemberId != wd.FromMemberId || len(gd.Buffered) != len(wd.Buffered))) {
						t.Fatalf("%s: answered %v, want %v", s.name, gd, wd)
					}
				} else if got != s.want {
					t.Fatalf("%s: decided %v, want %v", s.name, got, s.want)
				}
				if next.pending() != s.pending || next.quiet != s.quiet {
					t.Fatalf("%s: pending %v quiet %v, want %v %v", s.name, next.pending(), next.quiet, s.pending, s.quiet)
				}
				if got := leaveMayGoOn(stateEnd, true, next); got != s.leaveMay {
					t.Fatalf("%s: leave may go on %v, want %v", s.name, got, s.leaveMay)
				}
				o = next
			}
		})
	}
}

func TestLeaveMayGoOn(t *testing.T) {
	quiet := handOverOffer{quiet: true}
	inFlight := handOverOffer{quiet: true, done: &messages.HandOverDone{}}
	cases := []struct {
		state      string
		selfExited bool
		offer      handOverOffer
		want       bool
	}{
		{stateYounger, true, handOverOffer{}, true},
		{stateStart, true, handOverOffer{}, true},
		{stateYounger, false, handOverOffer{}, false},
		{stateEnd, true, handOverOffer{}, false},
		{stateEnd, true, quiet, true},
		{stateEnd, true, inFlight, false},
		{stateYounger, true, inFlight, false},
		{stateOldest, true, quiet, false},
		{stateHandingOver, true, quiet, false},
		{stateWasOldest, true, quiet, false},
		{stateStopping, true, quiet, false},
	}
	for _, c := range cases {
		if got := leaveMayGoOn(c.state, c.selfExited, c.offer); got != c.want {
			t.Errorf("%s exited=%v offer=%+v: %v, want %v", c.state, c.selfExited, c.offer, got, c.want)
		}
	}
}
