package singleton

import (
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
	"github.com/stretchr/testify/assert"
)

// stateStep is one input to stateData.step and what it must give.
type stateStep struct {
	name  string
	in    any
	acts  []action
	err   error  // errors.Is; nil: accepted
	state string // the state after the step
	check func(t *testing.T, d stateData)
}

// checkStateInvariants verifies what every accepted step keeps: the
// per-state data only in its state.
func checkStateInvariants(t *testing.T, d stateData) {
	t.Helper()
	if d.handOverTo != nil && d.state != stateHandingOver {
		t.Fatalf("handOverTo %v in %s", d.handOverTo, d.state)
	}
	if d.newOldest != nil && d.state != stateWasOldest && d.state != stateHandingOver {
		t.Fatalf("newOldest %v in %s", d.newOldest, d.state)
	}
	if d.pendingInitial != nil && d.state != stateStopping {
		t.Fatalf("pending re-join in %s", d.state)
	}
}

func runStates(t *testing.T, d stateData, steps []stateStep) {
	t.Helper()
	for _, s := range steps {
		next, acts, err := d.step(s.in)
		if s.err != nil {
			if !errors.Is(err, s.err) {
				t.Fatalf("%s: error %v, want %v", s.name, err, s.err)
			}
			assert.Equal(t, d, next, "%s: data changed by a refused input", s.name)
		} else if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		assert.Equal(t, s.acts, acts, s.name)
		for _, a := range acts {
			if a.kind == actBecome && a.state != next.state {
				t.Fatalf("%s: becomes %s, data in %s", s.name, a.state, next.state)
			}
		}
		d = next
		assert.Equal(t, s.state, d.state, s.name)
		checkStateInvariants(t, d)
		if s.check != nil {
			s.check(t, d)
		}
	}
}

func TestManagerStates(t *testing.T) {
	// HandOver retries at most 5, TakeOver retries at most 2.
	settings := settings{HandOverRetryInterval: time.Second, MinNumberOfHandOverRetries: 5}
	a, b := mem("a", 1), mem("b", 2)
	pidB := actor.NewPID(b.Address, "singletonManager")
	pidC := actor.NewPID("127.0.0.1:c", "singletonManager")
	initial := &initialOldestState{self: mem("a2", 3)}
	rejoin := []action{{kind: actLogRejoined, from: "a2"}, {kind: actMakeLease}, become(stateYounger), {kind: actAskNext}}
	in := func(state string) stateData {
		return stateData{state: state, self: a, settings: settings, history: newOldestHistory()}
	}
	c := mem("c", 3)
	after := func(state string, oldest membership.Member) stateData {
		d := in(state)
		d.history.only(&oldest)
		return d
	}
	removedB := func(state string) stateData {
		d := after(state, b)
		d.history = d.history.withRemoved("b")
		return d
	}
	gen := func(want int) func(t *testing.T, d stateData) {
		return func(t *testing.T, d stateData) { assert.Equal(t, want, d.timerGen, "timer number") }
	}
	handOverToMe := func(m membership.Member) action { return sendTo(&m, &messages.HandOverToMe{FromMemberId: "a"}) }
	takeOverFromMe := func(m membership.Member) action { return sendTo(&m, &messages.TakeOverFromMe{FromMemberId: "a"}) }
	inProgress := &messages.HandOverInProgress{FromMemberId: "a"}
	done := &messages.HandOverDone{FromMemberId: "a", Buffered: []*messages.SingletonEnvelope{{Hops: 1}}}
	done2 := &messages.HandOverDone{FromMemberId: "b", Buffered: []*messages.SingletonEnvelope{{Hops: 2}}}
	// offered is End after a hand-over to b, its drain timer armed once.
	offered := func() stateData {
		d := in(stateEnd)
		d.offer, _ = d.offer.handedOver(pidB, done).armDrain()
		return d
	}

	cases := []struct {
		name  string
		from  stateData
		steps []stateStep
	}{
		{"Younger follows the oldest, then waits for the previous ones", after(stateYounger, b), []stateStep{
			{"c is the oldest", &oldestChanged{oldest: &c}, []action{{kind: actForgetIdentifyWaiters}, {kind: actAskNext}}, nil, stateYounger,
				func(t *testing.T, d stateData) { assert.Equal(t, []membership.Member{c, b}, d.history.previous) }},
			{"a is the oldest", &oldestChanged{oldest: &a}, []action{handOverToMe(c), become(stateBecomingOldest),
				schedule(handOverRetry{count: 1, gen: 1})}, nil, stateBecomingOldest, nil},
			{"TakeOverFromMe of b", takeOverOffered{from: "b", sender: pidB},
				[]action{{kind: actLogUnexpected, text: "TakeOverFromMe", from: "b", member: &c}}, nil, stateBecomingOldest, nil},
			{"HandOverDone of b", &messages.HandOverDone{FromMemberId: "b"},
				[]action{{kind: actLogUnexpected, text: "HandOverDone", from: "b", member: &c}}, nil, stateBecomingOldest, nil},
			{"c removed", delayedMemberRemoved{member: c}, nil, nil, stateBecomingOldest,
				func(t *testing.T, d stateData) { assert.True(t, d.history.isRemoved("c")) }},
			{"b removed", delayedMemberRemoved{member: b}, []action{{kind: actLogPreviousRemoved, from: "b"}, {kind: actTryGotoOldest}},
				nil, stateBecomingOldest, nil},
		}},
		{"BecomingOldest takes the hand-over", after(stateYounger, b), []stateStep{
			{"a is the oldest", &oldestChanged{oldest: &a}, []action{handOverToMe(b), become(stateBecomingOldest),
				schedule(handOverRetry{count: 1, gen: 1})}, nil, stateBecomingOldest, nil},
			{"TakeOverFromMe of b", takeOverOffered{from: "b", sender: pidB},
				[]action{reply(&messages.HandOverToMe{FromMemberId: "a"})}, nil, stateBecomingOldest, nil},
			{"HandOverDone of b", done2, []action{reply(&messages.HandOverDoneAck{FromMemberId: "a"}), {kind: actTryGotoOldest},
				{kind: actDeliver, envelopes: done2.Buffered}}, nil, stateBecomingOldest, nil},
		}},
		{"Younger takes over at once after the previous oldest's removal", removedB(stateYounger), []stateStep{
			{"a is the oldest", &oldestChanged{oldest: &a}, []action{{kind: actTryGotoOldest}}, nil, stateYounger, nil},
		}},
		{"BecomingOldest learns the previous oldest from its TakeOverFromMe", in(stateBecomingOldest), []stateStep{
			{"TakeOverFromMe without a sender", takeOverOffered{from: "b"},
				[]action{{kind: actLogUnexpected, text: "TakeOverFromMe", from: "b", member: &membership.Member{}}}, nil, stateBecomingOldest, nil},
			{"TakeOverFromMe of b", takeOverOffered{from: "b", sender: pidB},
				[]action{reply(&messages.HandOverToMe{FromMemberId: "a"})}, nil, stateBecomingOldest,
				func(t *testing.T, d stateData) {
					assert.Equal(t, []membership.Member{{ID: "b", Address: b.Address}}, d.history.previous)
				}},
			{"b removed", delayedMemberRemoved{member: b}, []action{{kind: actLogPreviousRemoved, from: "b"}, {kind: actTryGotoOldest}},
				nil, stateBecomingOldest, nil},
			{"TakeOverFromMe of the removed b", takeOverOffered{from: "b", sender: pidB}, nil, nil, stateBecomingOldest, nil},
		}},
		{"BecomingOldest asks until HandOverInProgress stops the timer", after(stateYounger, b), []stateStep{
			{"a is the oldest", &oldestChanged{oldest: &a}, []action{handOverToMe(b), become(stateBecomingOldest),
				schedule(handOverRetry{count: 1, gen: 1})}, nil, stateBecomingOldest, gen(1)},
			{"retry", handOverRetry{count: 1, gen: 1},
				[]action{handOverToMe(b), schedule(handOverRetry{count: 2, gen: 1})}, nil, stateBecomingOldest, nil},
			{"in progress", handOverInProgress{}, nil, nil, stateBecomingOldest, gen(2)},
			{"cancelled retry", handOverRetry{count: 2, gen: 1}, nil, errIgnored, stateBecomingOldest, nil},
			{"OldestChanged", &oldestChanged{oldest: &a}, nil, errInvalidTransition, stateBecomingOldest, nil},
		}},
		{"BecomingOldest is stuck once every max retries", after(stateYounger, b), []stateStep{
			{"a is the oldest", &oldestChanged{oldest: &a}, []action{handOverToMe(b), become(stateBecomingOldest),
				schedule(handOverRetry{count: 1, gen: 1})}, nil, stateBecomingOldest, nil},
			{"retry 5", handOverRetry{count: 5, gen: 1},
				[]action{handOverToMe(b), schedule(handOverRetry{count: 6, gen: 1})}, nil, stateBecomingOldest, nil},
			{"retry 6 stuck", handOverRetry{count: 6, gen: 1},
				[]action{{kind: actLogHandOverStuck, member: &b, count: 6}, handOverToMe(b),
					schedule(handOverRetry{count: 7, gen: 1})}, nil, stateBecomingOldest, nil},
			{"retry 7", handOverRetry{count: 7, gen: 1},
				[]action{handOverToMe(b), schedule(handOverRetry{count: 8, gen: 1})}, nil, stateBecomingOldest, nil},
		}},
		{"Start: the oldest starts at once when safe", removedB(stateStart), []stateStep{
			{"initial state", &initialOldestState{self: a, oldest: &a, safeToBeOldest: true},
				[]action{{kind: actMakeLease}, {kind: actTryGotoOldest}}, nil, stateStart,
				func(t *testing.T, d stateData) {
					assert.False(t, d.history.isRemoved("b"), "removals of an earlier incarnation")
				}},
		}},
		{"Start: a younger member takes the oldest for its previous oldest", removedB(stateStart), []stateStep{
			{"initial state", &initialOldestState{self: a, oldest: &c}, []action{{kind: actMakeLease}, become(stateYounger),
				{kind: actAskNext}}, nil, stateYounger, func(t *testing.T, d stateData) {
				assert.Equal(t, []membership.Member{c}, d.history.previous)
				assert.False(t, d.history.isRemoved("b"))
			}},
		}},
		{"BecomingOldest takes over when no previous oldest is known", after(stateStart, b), []stateStep{
			{"oldest while another leaves", &initialOldestState{self: a, oldest: &a}, []action{{kind: actMakeLease},
				become(stateBecomingOldest), schedule(handOverRetry{count: 1, gen: 1})}, nil, stateBecomingOldest, nil},
			{"retry", handOverRetry{count: 1, gen: 1}, []action{{kind: actTakeOver}}, nil, stateBecomingOldest, nil},
		}},
		{"Oldest hands over to the new oldest and ends", in(stateOldest), []stateStep{
			{"still oldest", oldestLeft{oldest: &a, singletonRunning: true}, []action{{kind: actAskNext}}, nil, stateOldest, nil},
			{"b is the oldest", oldestLeft{oldest: &b, singletonRunning: true}, []action{takeOverFromMe(b),
				become(stateWasOldest), schedule(takeOverRetry{count: 1, gen: 1})}, nil, stateWasOldest,
				func(t *testing.T, d stateData) { assert.Equal(t, &b, d.newOldest) }},
			{"retry", takeOverRetryDue{retry: takeOverRetry{count: 1, gen: 1}, singletonRunning: true},
				[]action{takeOverFromMe(b), schedule(takeOverRetry{count: 2, gen: 1})}, nil, stateWasOldest, nil},
			{"retry 3 stuck", takeOverRetryDue{retry: takeOverRetry{count: 3, gen: 1}, singletonRunning: true},
				[]action{{kind: actLogTakeOverStuck, member: &b, count: 3}, takeOverFromMe(b),
					schedule(takeOverRetry{count: 4, gen: 1})}, nil, stateWasOldest, nil},
			{"retry 4", takeOverRetryDue{retry: takeOverRetry{count: 4, gen: 1}, singletonRunning: true},
				[]action{takeOverFromMe(b), schedule(takeOverRetry{count: 5, gen: 1})}, nil, stateWasOldest, nil},
			{"another removed", memberGone{id: "c", singletonRunning: true}, nil, nil, stateWasOldest, nil},
			{"from a removed member", handOverAsked{from: "c", sender: pidC, singletonRunning: true}, nil, nil, stateWasOldest, nil},
			{"HandOverToMe", handOverAsked{sender: pidB, singletonRunning: true}, []action{{kind: actSend, pid: pidB, msg: inProgress},
				{kind: actTerminateSingleton}, become(stateHandingOver)}, nil, stateHandingOver,
				func(t *testing.T, d stateData) { assert.Equal(t, pidB, d.handOverTo) }},
			{"stale retry", takeOverRetryDue{retry: takeOverRetry{count: 5, gen: 1}}, nil, errInvalidTransition, stateHandingOver, nil},
			{"HandOverToMe again", handOverAsked{sender: pidB}, []action{reply(inProgress)}, nil, stateHandingOver, nil},
			{"HandOverToMe of another", handOverAsked{sender: pidC}, nil, nil, stateHandingOver, nil},
			{"terminated", singletonStopped{}, []action{{kind: actHandOverDone, pid: pidB}, {kind: actCloseHandOver}, become(stateEnd)},
				nil, stateEnd, func(t *testing.T, d stateData) { assert.Nil(t, d.newOldest) }},
			{"nothing to send yet", handOverDoneSent{}, nil, errIgnored, stateEnd, gen(1)},
			{"re-joined", &initialOldestState{self: mem("a2", 3), oldest: &b}, []action{{kind: actLogRejoined, from: "a2"},
				{kind: actMakeLease}, become(stateYounger), {kind: actAskNext}}, nil, stateYounger,
				func(t *testing.T, d stateData) { assert.Equal(t, "a2", d.self.ID) }},
		}},
		{"End sends HandOverDone until acknowledged", offered(), []stateStep{
			{"sent", handOverDoneSent{}, []action{{kind: actSend, pid: pidB, msg: done}, schedule(handOverDoneRetry{count: 1, gen: 1})},
				nil, stateEnd, gen(1)},
			{"HandOverToMe of the new oldest", handOverAsked{sender: pidB}, []action{reply(done)}, nil, stateEnd, nil},
			{"HandOverToMe of another", handOverAsked{sender: pidC}, nil, nil, stateEnd, nil},
			{"resend", handOverDoneRetry{count: 1, gen: 1}, []action{{kind: actSend, pid: pidB, msg: done},
				schedule(handOverDoneRetry{count: 2, gen: 1})}, nil, stateEnd, nil},
			{"stale resend", handOverDoneRetry{count: 1, gen: 0}, nil, errIgnored, stateEnd, nil},
			{"acknowledged", &messages.HandOverDoneAck{}, []action{{kind: actAnswerLeaveWaiters}}, nil, stateEnd,
				func(t *testing.T, d stateData) { assert.False(t, d.offer.pending()) }},
			{"acknowledged twice", &messages.HandOverDoneAck{}, nil, errIgnored, stateEnd, nil},
			{"resend after the ack", handOverDoneRetry{count: 2, gen: 1}, nil, errIgnored, stateEnd, nil},
			{"oldest changed", &oldestChanged{oldest: &b}, nil, nil, stateEnd, nil},
			{"same incarnation's initial state", &initialOldestState{self: a}, []action{{kind: actAskNext}}, nil, stateEnd, nil},
			{"a re-join", initial, rejoin, nil, stateYounger, nil},
		}},
		{"End gives up on an unacknowledged HandOverDone", offered(), []stateStep{
			{"sent", handOverDoneSent{}, []action{{kind: actSend, pid: pidB, msg: done}, schedule(handOverDoneRetry{count: 1, gen: 1})},
				nil, stateEnd, nil},
			{"out of retries", handOverDoneRetry{count: 3, gen: 1}, []action{{kind: actGiveUpHandOverDone, pid: pidB, envelopes: done.Buffered},
				{kind: actAnswerLeaveWaiters}}, nil, stateEnd, func(t *testing.T, d stateData) { assert.False(t, d.offer.pending()) }},
			{"HandOverToMe", handOverAsked{sender: pidB}, nil, nil, stateEnd, nil},
			{"drained", drained{gen: 1}, []action{{kind: actAnswerLeaveWaiters}}, nil, stateEnd, nil},
			{"an earlier quiet period", drained{gen: 0}, nil, errIgnored, stateEnd, nil},
		}},
		{"Younger confirms a hand-over it never had, unless leaving", in(stateYounger), []stateStep{
			{"HandOverToMe", handOverAsked{from: "b", sender: pidB}, []action{reply(&messages.HandOverDone{FromMemberId: "a"})},
				nil, stateYounger, nil},
			{"leaving", leaving{}, nil, nil, stateYounger, nil},
			{"HandOverToMe while leaving", handOverAsked{from: "b", sender: pidB}, []action{{kind: actLogIgnoredHandOverToMe, from: "b"}},
				nil, stateYounger, nil},
		}},
		{"a removed new oldest: hand over to nobody and stay", removedB(stateAcquiringLease), []stateStep{
			{"removed oldest", oldestLeft{oldest: &b, singletonRunning: true},
				[]action{{kind: actTerminateSingleton}, become(stateHandingOver)}, nil, stateHandingOver, nil},
			{"terminated", singletonStopped{}, []action{{kind: actHandOverDone}, {kind: actForgetPreviousOldest}, become(stateYounger),
				{kind: actAskNext}}, nil, stateYounger, nil},
		}},
		{"WasOldest: the new oldest removed", in(stateOldest), []stateStep{
			{"b is the oldest", oldestLeft{oldest: &b}, []action{takeOverFromMe(b),
				become(stateWasOldest), schedule(takeOverRetry{count: 1, gen: 1})}, nil, stateWasOldest, nil},
			{"b removed", memberGone{id: "b"}, []action{{kind: actHandOverDone}, {kind: actForgetPreviousOldest},
				become(stateYounger), {kind: actAskNext}}, nil, stateYounger, nil},
		}},
		{"a leaving oldest stops the singleton itself", in(stateOldest), []stateStep{
			{"leaving", leaving{}, nil, nil, stateOldest, func(t *testing.T, d stateData) { assert.True(t, d.selfExited) }},
			{"no oldest", oldestLeft{singletonRunning: true}, []action{become(stateWasOldest),
				schedule(takeOverRetry{count: 1, gen: 1})}, nil, stateWasOldest, nil},
			{"leaving ignores removals", memberGone{id: "b", singletonRunning: true}, nil, nil, stateWasOldest, nil},
			{"nobody to hand over to", takeOverRetryDue{retry: takeOverRetry{count: 1, gen: 1}, singletonRunning: true},
				[]action{{kind: actTerminateSingleton}, become(stateHandingOver)}, nil, stateHandingOver, nil},
			{"terminated", singletonStopped{}, []action{{kind: actHandOverDone}, {kind: actCloseHandOver}, become(stateEnd)},
				nil, stateEnd, nil},
		}},
		{"a leaving oldest with a stopped singleton ends at once", in(stateOldest), []stateStep{
			{"leaving", leaving{}, nil, nil, stateOldest, nil},
			{"b is the oldest", oldestLeft{oldest: &b}, []action{takeOverFromMe(b),
				become(stateWasOldest), schedule(takeOverRetry{count: 1, gen: 1})}, nil, stateWasOldest, nil},
			{"out of retries", takeOverRetryDue{retry: takeOverRetry{count: 3, gen: 1}},
				[]action{{kind: actHandOverDone}, {kind: actCloseHandOver}, become(stateEnd)}, nil, stateEnd, nil},
		}},
		{"removed while running: Stopping keeps the re-join", in(stateOldest), []stateStep{
			{"removed", selfRemoved{graceful: true, singletonRunning: true}, []action{{kind: actLogSelfRemoved, graceful: true},
				{kind: actStopSingleton}, become(stateStopping)}, nil, stateStopping, gen(1)},
			{"removed twice", selfRemoved{singletonRunning: true}, nil, errIgnored, stateStopping, nil},
			{"re-join", initial, nil, nil, stateStopping, func(t *testing.T, d stateData) { assert.Equal(t, initial, d.pendingInitial) }},
			{"terminated", singletonStopped{}, []action{{kind: actCloseHandOver}, become(stateEnd),
				{kind: actReplayInitial, initial: initial}}, nil, stateEnd, nil},
			{"replayed", initial, rejoin, nil, stateYounger, func(t *testing.T, d stateData) { assert.False(t, d.selfGone) }},
		}},
		{"removed while younger: End drains the buffer", in(stateYounger), []stateStep{
			{"removed", selfRemoved{}, []action{{kind: actLogSelfRemoved}, {kind: actCloseHandOver}, become(stateEnd),
				{kind: actAskNext}}, nil, stateEnd, nil},
			{"re-join as the oldest while another leaves", &initialOldestState{self: mem("a2", 3), oldest: ptr(mem("a2", 3))},
				[]action{{kind: actLogRejoined, from: "a2"}, {kind: actMakeLease}, become(stateBecomingOldest),
					schedule(handOverRetry{count: 1, gen: 2})}, nil, stateBecomingOldest, nil},
		}},
		{"inputs a state does not take", in(stateYounger), []stateStep{
			{"HandOverInProgress", handOverInProgress{}, nil, errInvalidTransition, stateYounger, nil},
			{"terminated", singletonStopped{}, nil, errInvalidTransition, stateYounger, nil},
			{"oldest changed", oldestLeft{oldest: &b}, nil, errInvalidTransition, stateYounger, nil},
			{"member removed", memberGone{id: "b"}, nil, errInvalidTransition, stateYounger, nil},
			{"HandOverDone resend", handOverDoneRetry{count: 1}, nil, errInvalidTransition, stateYounger, nil},
			{"retry", handOverRetry{count: 1}, nil, errInvalidTransition, stateYounger, nil},
			{"initial state", initial, nil, errInvalidTransition, stateYounger, nil},
			{"HandOverDone", &messages.HandOverDone{FromMemberId: "b"}, nil, errInvalidTransition, stateYounger, nil},
			{"TakeOverFromMe", takeOverOffered{from: "b", sender: pidB}, nil, errInvalidTransition, stateYounger, nil},
			{"removal counted", delayedMemberRemoved{member: b}, nil, errInvalidTransition, stateYounger, nil},
			{"HandOverDoneAck", &messages.HandOverDoneAck{}, nil, errInvalidTransition, stateYounger, nil},
			{"drained", drained{}, nil, errInvalidTransition, stateYounger, nil},
			{"unknown", "x", nil, errInvalidTransition, stateYounger, nil},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runStates(t, c.from, c.steps) })
	}
}
