package singleton

import (
	"errors"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/messages"
)

// handOverOffer is a former oldest's data in End (Akka's EndData, with the
// acknowledged hand-over): where the singleton went, the HandOverDone that
// the new oldest has not acknowledged yet (sent again until it does), and
// the quiet period a leaving member waits for proxied messages to stop.
type handOverOffer struct {
	to       *actor.PID             // the new oldest's manager; nil: handed over to nobody
	done     *messages.HandOverDone // sent and not yet acknowledged
	drainGen int                    // number of the latest quiet-period timer
	quiet    bool                   // no proxied message for a whole quiet period
}

// errNoHandOverPending: an acknowledgement or a resend with no
// HandOverDone awaiting one; nothing changes.
var errNoHandOverPending = errors.New("singleton: no HandOverDone awaits an acknowledgement")

// handedOver records where the singleton went (to nil: nobody); with a new
// oldest, done carries the held messages to it.
func (o handOverOffer) handedOver(to *actor.PID, done *messages.HandOverDone) handOverOffer {
	o.to = to
	if to != nil {
		o.done = done
	}
	return o
}

// pending reports whether a HandOverDone waits for its acknowledgement.
func (o handOverOffer) pending() bool { return o.done != nil && o.to != nil }

// acked takes the new oldest's HandOverDoneAck.
func (o handOverOffer) acked() (handOverOffer, error) {
	if o.done == nil {
		return o, errNoHandOverPending
	}
	o.done = nil
	return o, nil
}

// doneRetryDecision is what End does when its HandOverDone resend timer
// fires.
type doneRetryDecision int

const (
	resendHandOverDone doneRetryDecision = iota
	// giveUpHandOverDone: never acknowledged; the messages it carried
	// are dropped.
	giveUpHandOverDone
)

// retry is resend number count of the HandOverDone, of at most max.
func (o handOverOffer) retry(count, max int) (handOverOffer, doneRetryDecision, []*messages.SingletonEnvelope, error) {
	if !o.pending() {
		return o, 0, nil, errNoHandOverPending
	}
	if count > max {
		dropped := o.done.Buffered
		o.done = nil
		return o, giveUpHandOverDone, dropped, nil
	}
	return o, resendHandOverDone, nil, nil
}

// answerHandOverToMe is End's answer to a HandOverToMe from sender (nil:
// none): the unacknowledged HandOverDone again to the new oldest, or, once
// this member is removed, that it runs nothing.
func (o handOverOffer) answerHandOverToMe(sender *actor.PID, selfID string, selfGone bool) *messages.HandOverDone {
	switch {
	case o.pending() && sender != nil && o.to.Equal(sender):
		return o.done
	case selfGone:
		return &messages.HandOverDone{FromMemberId: selfID}
	}
	return nil
}

// armDrain starts the quiet period again; its timer carries gen.
func (o handOverOffer) armDrain() (next handOverOffer, gen int) {
	o.quiet = false
	o.drainGen++
	return o, o.drainGen
}

// drained takes quiet-period timer gen; it reports whether the period
// passed (a later one was not armed meanwhile).
func (o handOverOffer) drained(gen int) (handOverOffer, bool) {
	if gen != o.drainGen {
		return o, false
	}
	o.quiet = true
	return o, true
}

// leaveMayGoOn decides whether a leaving member's leave hook may return:
// not while a hand-over is in flight, nor while proxied messages may still
// arrive in End, and only in a state that runs nothing.
func leaveMayGoOn(state string, selfExited bool, o handOverOffer) bool {
	if !selfExited || o.done != nil {
		return false
	}
	switch state {
	case stateEnd:
		return o.quiet
	case stateStart, stateYounger:
		return true
	}
	return false
}
