package singleton

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
)

// stateData is the manager's state name with the data of its hand-over
// (Akka's State and Data: YoungerData's and BecomingOldestData's previous
// oldest members and retry timer, WasOldestData's new oldest,
// HandingOverData's handOverTo, StoppingData's re-join, EndData's
// hand-over offer, and the leaving and removed flags every state keeps).
// step is its only transition: the manager decodes a message, asks step,
// and carries out the actions it returns.
type stateData struct {
	state    string
	self     membership.Member
	settings settings // hand-over retry limits

	// timerGen numbers the hand-over retry timers (HandOverRetry,
	// TakeOverRetry, HandOverDoneRetry): a timer of an earlier number is
	// stale (Akka cancels it).
	timerGen       int
	newOldest      *membership.Member  // WasOldest
	handOverTo     *actor.PID          // HandingOver: the new oldest's manager
	pendingInitial *initialOldestState // Stopping: a re-join seen while the singleton still stops
	offer          handOverOffer       // End: where the singleton went
	// history: the previous oldest members (YoungerData's and
	// BecomingOldestData's previousOldest) and the members removed.
	history oldestHistory

	selfExited bool // this member is leaving
	selfGone   bool // this incarnation was removed
}

// errInvalidTransition: an input that the state does not take; nothing
// changed.
var errInvalidTransition = errors.New("singleton: invalid manager transition")

// errIgnored: an input that changes nothing: a hand-over retry timer of
// an earlier number, or a second removal of this member.
var errIgnored = errors.New("singleton: stale hand-over input")

// The inputs of step that are not the manager's messages as they come.
type (
	// handOverInProgress is BecomingOldest's HandOverInProgress.
	handOverInProgress struct{}
	// oldestLeft: the oldest changed while this member ran the singleton
	// (Oldest, AcquiringLease).
	oldestLeft struct {
		oldest           *membership.Member
		singletonRunning bool
	}
	// takeOverRetryDue is WasOldest's TakeOverRetry.
	takeOverRetryDue struct {
		retry            takeOverRetry
		singletonRunning bool
	}
	// handOverAsked is a HandOverToMe of member from, sent by sender.
	handOverAsked struct {
		from             string
		sender           *actor.PID
		singletonRunning bool
	}
	// takeOverOffered is a TakeOverFromMe of member from, sent by sender
	// (nil: none to answer).
	takeOverOffered struct {
		from   string
		sender *actor.PID
	}
	// memberGone is a MemberRemoved of another member in WasOldest: it
	// counts as removed at once.
	memberGone struct {
		id               string
		singletonRunning bool
	}
	// singletonStopped: the singleton this state stopped has terminated.
	singletonStopped struct{}
	// handOverDoneSent: End's HandOverDone went out; it is sent again
	// until acknowledged.
	handOverDoneSent struct{}
	// selfRemoved: this incarnation is out of the cluster for good.
	selfRemoved struct {
		graceful         bool
		singletonRunning bool
	}
)

// actionKind is what the manager does for one action of step.
type actionKind int

const (
	// actBecome: go to state (the manager's become).
	actBecome                 actionKind = iota + 1
	actSendToPeer                        // msg to the manager on member
	actSend                              // msg to pid
	actReply                             // msg to the sender of the input
	actSchedule                          // timer after the hand-over retry interval
	actLogHandOverStuck                  // previous oldest member, retry count
	actLogTakeOverStuck                  // new oldest member, retry count
	actLogSelfRemoved                    // graceful
	actLogIgnoredHandOverToMe            // from
	actTakeOver                          // Akka's tryGotoOldest, without a hand-over
	actTerminateSingleton                // the hand-over's stop (termination message)
	actStopSingleton                     // stop it at once (this member was removed)
	actHandOverDone                      // the singleton terminated: hand over to pid
	actForgetPreviousOldest              // none can run the singleton any more
	actAskNext                           // ask the buffer for the next change
	actCloseHandOver                     // End's entry: drop the held, release the lease, drain
	actReplayInitial                     // send initial to self
	actLogRejoined                       // member from
	actMakeLease                         // the lease of this incarnation, if one is used
	actGiveUpHandOverDone                // to pid: drop what it carried
	actAnswerLeaveWaiters                // let the leave go on if nothing runs here
	actTryGotoOldest                     // Akka's tryGotoOldest
	actDeliver                           // envelopes handed over, to the singleton
	actForgetIdentifyWaiters             // they ask the other member next
	actLogUnexpected                     // text from from, expected member
	actLogPreviousRemoved                // from
)

// action is one thing the manager carries out, in order.
type action struct {
	kind      actionKind
	state     string
	member    *membership.Member
	pid       *actor.PID
	msg       any
	timer     any
	count     int
	graceful  bool
	from      string
	initial   *initialOldestState
	text      string
	envelopes []*messages.SingletonEnvelope
}

func become(state string) action { return action{kind: actBecome, state: state} }

func schedule(timer any) action { return action{kind: actSchedule, timer: timer} }

func sendTo(m *membership.Member, msg any) action {
	return action{kind: actSendToPeer, member: m, msg: msg}
}

func reply(msg any) action { return action{kind: actReply, msg: msg} }

func invalid(state string, in any) error {
	return fmt.Errorf("%w: %T in %s", errInvalidTransition, in, state)
}

// step takes input in: the next data (its state the one the last
// actBecome goes to), the actions to carry out, or an error (nothing
// changed).
func (d stateData) step(in any) (stateData, []action, error) {
	switch in := in.(type) {
	case handOverInProgress:
		if d.state != stateBecomingOldest {
			return d, nil, invalid(d.state, in)
		}
		d.timerGen++ // Akka cancels the retry timer
		return d, nil, nil
	case handOverRetry:
		return d.handOverRetryDue(in)
	case *messages.HandOverDone, takeOverOffered, delayedMemberRemoved:
		if d.state != stateBecomingOldest {
			return d, nil, invalid(d.state, in)
		}
		return d.becomingOldest(in)
	case oldestLeft:
		return d.oldestLeft(in)
	case takeOverRetryDue:
		return d.takeOverRetryDue(in)
	case handOverAsked:
		switch d.state {
		case stateOldest, stateAcquiringLease, stateWasOldest:
			if d.history.isRemoved(in.from) {
				return d, nil, nil
			}
			return d.handOver(in.sender, in.singletonRunning)
		case stateYounger:
			if d.selfExited {
				return d, []action{{kind: actLogIgnoredHandOverToMe, from: in.from}}, nil
			}
			// This member never ran the singleton in this incarnation (it
			// may be a quick restart on the same host:port): confirm that.
			return d, []action{reply(&messages.HandOverDone{FromMemberId: d.self.ID})}, nil
		case stateEnd:
			// Nothing runs here any more.
			if done := d.offer.answerHandOverToMe(in.sender, d.self.ID, d.selfGone); done != nil {
				return d, []action{reply(done)}, nil
			}
			return d, nil, nil
		case stateHandingOver:
			if d.handOverTo != nil && in.sender != nil && d.handOverTo.Equal(in.sender) {
				return d, []action{reply(&messages.HandOverInProgress{FromMemberId: d.self.ID})}, nil
			}
			return d, nil, nil
		}
		return d, nil, invalid(d.state, in)
	case memberGone:
		if d.state != stateWasOldest {
			return d, nil, invalid(d.state, in)
		}
		d.history = d.history.withRemoved(in.id)
		if !d.selfExited && d.newOldest != nil && in.id == d.newOldest.ID {
			return d.handOver(nil, in.singletonRunning)
		}
		return d, nil, nil
	case singletonStopped:
		switch d.state {
		case stateHandingOver:
			return d.handOverDone()
		case stateStopping:
			return d.end(nil)
		}
		return d, nil, invalid(d.state, in)
	case *initialOldestState:
		switch d.state {
		case stateStart:
			return d.join(in, nil)
		case stateStopping:
			d.pendingInitial = in
			return d, nil, nil
		case stateEnd:
			if in.self.ID != d.self.ID {
				return d.join(in, []action{{kind: actLogRejoined, from: in.self.ID}})
			}
			return d, []action{{kind: actAskNext}}, nil
		}
		return d, nil, invalid(d.state, in)
	case *oldestChanged:
		if d.state == stateYounger {
			return d.younger(in)
		}
		if d.state != stateEnd {
			return d, nil, invalid(d.state, in)
		}
		// Not interested any more; a removed member keeps draining so
		// that a re-join's initial state gets through.
		if d.selfGone {
			return d, []action{{kind: actAskNext}}, nil
		}
		return d, nil, nil
	case *messages.HandOverDoneAck:
		if d.state != stateEnd {
			return d, nil, invalid(d.state, in)
		}
		var err error
		if d.offer, err = d.offer.acked(); err != nil {
			return d, nil, errIgnored
		}
		return d, []action{{kind: actAnswerLeaveWaiters}}, nil
	case drained:
		if d.state != stateEnd {
			return d, nil, invalid(d.state, in)
		}
		var over bool
		if d.offer, over = d.offer.drained(in.gen); !over {
			return d, nil, errIgnored
		}
		return d, []action{{kind: actAnswerLeaveWaiters}}, nil
	case handOverDoneRetry:
		if err := d.timerDue(stateEnd, in.gen, in); err != nil {
			return d, nil, err
		}
		next, decision, dropped, err := d.offer.retry(in.count, maxTakeOverRetries(d.settings))
		if err != nil {
			return d, nil, errIgnored
		}
		if decision == giveUpHandOverDone {
			d.offer = next
			return d, []action{{kind: actGiveUpHandOverDone, pid: d.offer.to, envelopes: dropped}, {kind: actAnswerLeaveWaiters}}, nil
		}
		return d, []action{{kind: actSend, pid: d.offer.to, msg: d.offer.done}, schedule(handOverDoneRetry{count: in.count + 1, gen: d.timerGen})}, nil
	case handOverDoneSent:
		if !d.offer.pending() {
			return d, nil, errIgnored
		}
		d.timerGen++
		return d, []action{{kind: actSend, pid: d.offer.to, msg: d.offer.done}, schedule(handOverDoneRetry{count: 1, gen: d.timerGen})}, nil
	case leaving:
		d.selfExited = true
		return d, nil, nil
	case selfRemoved:
		if d.selfGone {
			return d, nil, errIgnored
		}
		d.selfGone = true
		d.timerGen++
		acts := []action{{kind: actLogSelfRemoved, graceful: in.graceful}}
		if in.singletonRunning {
			d.state = stateStopping
			return d, append(acts, action{kind: actStopSingleton}, become(stateStopping)), nil
		}
		d, end, _ := d.end(nil)
		return d, append(acts, end...), nil
	}
	return d, nil, invalid(d.state, in)
}

// younger is Younger's OldestChanged: this member takes over at once
// when no previous oldest may still run the singleton, asks the most
// recent one to hand over, or stays younger.
func (d stateData) younger(in *oldestChanged) (stateData, []action, error) {
	d.history.previous = slices.Clone(d.history.previous)
	switch d.history.oldestChanged(d.self, in.oldest) {
	case becomeOldestNow:
		return d, []action{{kind: actTryGotoOldest}}, nil
	case askHandOver:
		return d.askHandOver()
	}
	// The proxies that took this member for the oldest ask the other
	// one next.
	return d, []action{{kind: actForgetIdentifyWaiters}, {kind: actAskNext}}, nil
}

// join starts incarnation in.self after acts: the oldest becomes Oldest
// at once only when it is safe (no older member is still leaving, which
// might still run the singleton); otherwise it waits for a hand-over in
// BecomingOldest.
func (d stateData) join(in *initialOldestState, acts []action) (stateData, []action, error) {
	d.self, d.selfGone, d.selfExited = in.self, false, false
	acts = append(acts, action{kind: actMakeLease})
	d.history.rejoined()
	switch decideStart(in.self, in.oldest, in.safeToBeOldest) {
	case startAsOldest:
		return d, append(acts, action{kind: actTryGotoOldest}), nil
	case startBecomingOldest:
		d.history.forget()
		d, asking, err := d.askHandOver()
		return d, append(acts, asking...), err
	}
	d.history.only(in.oldest)
	d.state = stateYounger
	return d, append(acts, become(stateYounger), action{kind: actAskNext}), nil
}

// askHandOver goes to BecomingOldest, asking the most recent previous
// oldest alive (if any) to hand over.
func (d stateData) askHandOver() (stateData, []action, error) {
	return d.asking(stateBecomingOldest, &messages.HandOverToMe{FromMemberId: d.self.ID}, d.livePrevious(),
		func(gen int) any { return handOverRetry{count: 1, gen: gen} })
}

// becomingOldest takes the previous oldest's answers in BecomingOldest.
func (d stateData) becomingOldest(in any) (stateData, []action, error) {
	prev, _ := d.history.firstLive()
	switch in := in.(type) {
	case *messages.HandOverDone:
		if !d.history.handOverDoneFrom(in.FromMemberId) {
			return d, []action{{kind: actLogUnexpected, text: "HandOverDone", from: in.FromMemberId, member: &prev}}, nil
		}
		return d, []action{reply(&messages.HandOverDoneAck{FromMemberId: d.self.ID}), {kind: actTryGotoOldest},
			{kind: actDeliver, envelopes: in.Buffered}}, nil
	case takeOverOffered:
		d.history.previous = slices.Clone(d.history.previous)
		switch d.history.takeOverFromMe(in.from, in.sender) {
		case answerHandOverToMe:
			return d, []action{reply(&messages.HandOverToMe{FromMemberId: d.self.ID})}, nil
		case ignoreUnexpectedTakeOver:
			return d, []action{{kind: actLogUnexpected, text: "TakeOverFromMe", from: in.from, member: &prev}}, nil
		}
		return d, nil, nil
	case delayedMemberRemoved:
		d.history = d.history.withRemoved(in.member.ID)
		if d.history.previousRemoved(in.member.ID) {
			return d, []action{{kind: actLogPreviousRemoved, from: in.member.ID}, {kind: actTryGotoOldest}}, nil
		}
		return d, nil, nil
	}
	return d, nil, invalid(d.state, in)
}

// withRemoved is h with member id counted removed, on a copy of its
// removed set: step never changes the data it was given.
func (h oldestHistory) withRemoved(id string) oldestHistory {
	h.removed = maps.Clone(h.removed)
	if h.removed == nil {
		h.removed = map[string]bool{}
	}
	h.removed[id] = true
	return h
}

// livePrevious is the most recent previous oldest not removed (nil: none).
func (d stateData) livePrevious() *membership.Member {
	if prev, ok := d.history.firstLive(); ok {
		return &prev
	}
	return nil
}

// timerDue checks a hand-over retry timer number gen, for state.
func (d stateData) timerDue(state string, gen int, in any) error {
	switch {
	case d.state != state:
		return invalid(d.state, in)
	case gen != d.timerGen:
		return errIgnored
	}
	return nil
}

func (d stateData) handOverRetryDue(in handOverRetry) (stateData, []action, error) {
	previous := d.livePrevious()
	if err := d.timerDue(stateBecomingOldest, in.gen, in); err != nil {
		return d, nil, err
	}
	var acts []action
	switch decideHandOverRetry(in.count, d.settings, previous != nil) {
	case takeOverWithoutHandOver:
		return d, []action{{kind: actTakeOver}}, nil
	case askHandOverAgainStuck:
		acts = append(acts, action{kind: actLogHandOverStuck, member: previous, count: in.count})
	}
	return d, append(acts, sendTo(previous, &messages.HandOverToMe{FromMemberId: d.self.ID}),
		schedule(handOverRetry{count: in.count + 1, gen: d.timerGen})), nil
}

func (d stateData) oldestLeft(in oldestLeft) (stateData, []action, error) {
	if d.state != stateOldest && d.state != stateAcquiringLease {
		return d, nil, invalid(d.state, in)
	}
	switch decideOldestChanged(d.self, in.oldest, d.history.removed, d.selfExited) {
	case stayOldest:
		return d, []action{{kind: actAskNext}}, nil
	case handOverToNobody:
		return d.handOver(nil, in.singletonRunning)
	}
	d.newOldest = in.oldest
	return d.asking(stateWasOldest, &messages.TakeOverFromMe{FromMemberId: d.self.ID}, in.oldest,
		func(gen int) any { return takeOverRetry{count: 1, gen: gen} })
}

// asking goes to state, which asks peer (nil: nobody) with message send, and
// again at each retry: the first retry, of a new number, is scheduled.
func (d stateData) asking(state string, send any, peer *membership.Member, firstRetry func(gen int) any) (stateData, []action, error) {
	var acts []action
	if peer != nil {
		acts = append(acts, sendTo(peer, send))
	}
	d.state = state
	d.timerGen++
	return d, append(acts, become(state), schedule(firstRetry(d.timerGen))), nil
}

func (d stateData) takeOverRetryDue(in takeOverRetryDue) (stateData, []action, error) {
	if err := d.timerDue(stateWasOldest, in.retry.gen, in); err != nil {
		return d, nil, err
	}
	var acts []action
	switch decideTakeOverRetry(in.retry.count, d.settings, d.selfExited, d.newOldest != nil) {
	case stopSingleton:
		return d.handOver(nil, in.singletonRunning)
	case stuck:
		if stuckReported(in.retry.count, maxTakeOverRetries(d.settings)) {
			acts = append(acts, action{kind: actLogTakeOverStuck, member: d.newOldest, count: in.retry.count})
		}
	}
	if d.newOldest != nil {
		acts = append(acts, sendTo(d.newOldest, &messages.TakeOverFromMe{FromMemberId: d.self.ID}))
	}
	return d, append(acts, schedule(takeOverRetry{count: in.retry.count + 1, gen: d.timerGen})), nil
}

// handOver hands the singleton over to the manager to (nil: nobody):
// stops it, or, when it is not running, hands over at once.
func (d stateData) handOver(to *actor.PID, singletonRunning bool) (stateData, []action, error) {
	d.handOverTo = to
	if !singletonRunning {
		return d.handOverDone()
	}
	var acts []action
	if to != nil {
		acts = append(acts, action{kind: actSend, pid: to, msg: &messages.HandOverInProgress{FromMemberId: d.self.ID}})
	}
	d.state = stateHandingOver
	return d, append(acts, action{kind: actTerminateSingleton}, become(stateHandingOver)), nil
}

// handOverDone: the singleton has terminated; a leaving member, or one
// that handed over to another member, ends; one that handed over to
// nobody stays as a younger member.
func (d stateData) handOverDone() (stateData, []action, error) {
	to := d.handOverTo
	d.handOverTo = nil
	d.newOldest = nil
	acts := []action{{kind: actHandOverDone, pid: to}}
	if to == nil && !d.selfExited {
		d.state = stateYounger
		return d, append(acts, action{kind: actForgetPreviousOldest}, become(stateYounger), action{kind: actAskNext}), nil
	}
	return d.end(acts)
}

// end goes to End after acts: a re-join seen meanwhile is taken again
// there; a removed member keeps draining the buffer.
func (d stateData) end(acts []action) (stateData, []action, error) {
	d.state = stateEnd
	acts = append(acts, action{kind: actCloseHandOver}, become(stateEnd))
	switch {
	case d.pendingInitial != nil:
		acts = append(acts, action{kind: actReplayInitial, initial: d.pendingInitial})
		d.pendingInitial = nil
	case d.selfGone:
		acts = append(acts, action{kind: actAskNext})
	}
	return d, acts, nil
}
