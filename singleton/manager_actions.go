package singleton

import (
	"errors"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
)

// The manager carrying out what stateData.step decided.

// ask takes in through stateData.step and carries out the actions; the
// state name moves with the become among them.
func (m *manager) ask(ctx actor.Context, in any) {
	next, acts, err := m.stateData.step(in)
	switch {
	case errors.Is(err, errIgnored):
		return
	case err != nil:
		ctx.Logger().Error("singleton: input not taken", slog.String("state", m.state), slog.Any("error", err))
		return
	}
	next.state = m.state
	m.stateData = next
	for _, a := range acts {
		m.carryOut(ctx, a)
	}
}

func (m *manager) carryOut(ctx actor.Context, a action) {
	switch a.kind {
	case actBecome:
		m.become(ctx, a.state, m.receiveOf(a.state))
	case actSendToPeer:
		m.send(ctx, m.peer(ctx, a.member.Address), a.msg)
	case actSend:
		m.send(ctx, a.pid, a.msg)
	case actReply:
		m.reply(ctx, a.msg)
	case actSchedule:
		m.timers.SendOnce(m.settings.HandOverRetryInterval, ctx.Self(), a.timer)
	case actLogHandOverStuck:
		ctx.Logger().Error("singleton: ClusterSingletonManagerIsStuck: previous oldest is unresponsive; still waiting for it to hand over or be removed",
			slog.String("previousOldest", a.member.ID), slog.Int("retry", a.count))
	case actLogTakeOverStuck:
		ctx.Logger().Error("singleton: ClusterSingletonManagerIsStuck: expected hand-over never occurred; still offering it",
			slog.Any("newOldest", a.member), slog.Int("retry", a.count))
	case actLogSelfRemoved:
		ctx.Logger().Debug("singleton: self removed", slog.Bool("graceful", a.graceful), slog.String("state", m.state))
	case actTakeOver:
		ctx.Logger().Info("singleton: previous oldest removed and no TakeOver request; taking over")
		m.tryGotoOldest(ctx)
	case actTerminateSingleton:
		ctx.Logger().Debug("singleton manager stopping singleton actor", slog.String("pid", m.singleton.String()))
		m.terminateSingleton(ctx)
	case actStopSingleton:
		ctx.Stop(m.singleton)
	case actHandOverDone:
		m.handOverDone(ctx, a.pid)
	case actForgetPreviousOldest:
		m.history.forget()
	case actAskNext:
		m.askNext(ctx)
	case actCloseHandOver:
		m.closeHandOver(ctx)
	case actReplayInitial:
		ctx.Send(ctx.Self(), a.initial)
	case actLogRejoined:
		ctx.Logger().Debug("singleton: re-joined as a new member; starting over", slog.String("member", a.from))
	case actMakeLease:
		m.makeLease(ctx)
	case actLogIgnoredHandOverToMe:
		ctx.Logger().Debug("singleton: ignoring HandOverToMe in Younger: self is leaving", slog.String("from", a.from))
	case actGiveUpHandOverDone:
		ctx.Logger().Warn("singleton: HandOverDone never acknowledged; giving up", slog.Any("to", a.pid))
		for _, env := range a.envelopes {
			m.drop(ctx, env, "the new oldest never acknowledged the hand-over that carried this message")
		}
	case actAnswerLeaveWaiters:
		m.answerLeaveWaitersIfIdle(ctx)
	case actTryGotoOldest:
		m.tryGotoOldest(ctx)
	case actDeliver:
		for _, env := range a.envelopes {
			m.onEnvelope(ctx, env)
		}
	case actForgetIdentifyWaiters:
		m.identifyWaiters.take()
	case actLogUnexpected:
		ctx.Logger().Debug("singleton: ignoring "+a.text+" from unexpected member", slog.String("from", a.from), slog.String("expected", a.member.ID))
	case actLogPreviousRemoved:
		ctx.Logger().Info("singleton: previous oldest removed; taking over", slog.String("member", a.from))
	}
}

// receiveOf is the receive method of state.
func (m *manager) receiveOf(state string) actor.ReceiveFunc {
	switch state {
	case stateYounger:
		return m.younger
	case stateBecomingOldest:
		return m.becomingOldest
	case stateOldest:
		return m.oldest
	case stateAcquiringLease:
		return m.acquiringLease
	case stateWasOldest:
		return m.wasOldest
	case stateHandingOver:
		return m.handingOver
	case stateStopping:
		return m.stopping
	case stateEnd:
		return m.end
	}
	return m.start
}
