package singleton

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/guard"
	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/internal/metrics"
	"github.com/protoshard/protoshard/internal/msgbuffer"
	"github.com/protoshard/protoshard/internal/staleness"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
)

// manager is Akka's ClusterSingletonManager: an FSM with one receive method
// per state (see the State* names).
type manager struct {
	cluster  *membership.Cluster
	props    *actor.Props // with the fence's middleware
	name     string
	settings settings
	// fence keeps the singleton from working while this node's
	// membership is stale; nil in tests that build a manager alone.
	fence *staleFence

	behavior actor.Behavior
	stateData
	timers *scheduler.TimerScheduler

	metrics  *metrics.Singleton
	handOver handOverClock // from becoming the oldest until the singleton runs here

	buffer    *actor.PID
	singleton *actor.PID // the running (or stopping) singleton; nil when none
	restarts  singletonRestarts
	// managerStopping: the manager itself stops; so does its singleton.
	managerStopping bool

	leaveWaiters []*actor.PID
	envelopes    msgbuffer.Buffer[struct{}, *messages.SingletonEnvelope] // proxied messages waiting for a singleton here, the oldest making way
	awaitingNext bool                                                    // a getNext is out: the buffer owes one change
	// identifyWaiters: proxies told that no singleton runs here, to be
	// told when it starts.
	identifyWaiters identifyWaiters

	// The lease (WithLease): what to ask of it, and the asking.
	holding leaseHolding
	leases  leaseRunner
}

func newManager(cluster *membership.Cluster, props *actor.Props, name string, settings settings) *manager {
	return &manager{
		cluster:   cluster,
		props:     props,
		name:      name,
		settings:  settings,
		behavior:  actor.NewBehavior(),
		stateData: stateData{settings: settings, history: newOldestHistory()},
		restarts:  newSingletonRestarts(settings),
		leases:    newLeaseRunner(),
		envelopes: msgbuffer.New[struct{}, *messages.SingletonEnvelope](settings.BufferSize),
	}
}

func (m *manager) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		m.timers = scheduler.NewTimerScheduler(ctx)
		m.metrics = metrics.For(ctx.ActorSystem()).Singleton(m.name)
		m.buffer = ctx.Spawn(actor.PropsFromProducer(newOldestChangedBuffer(m.cluster, m.settings.Role), guard.WithMailbox()))
		m.cluster.Subscribe(ctx.Self())
		m.become(ctx, stateStart, m.start)
		m.askNext(ctx)
		return
	case *actor.Stopping:
		m.managerStopping = true // the singleton stops with it, for good
		m.cluster.Unsubscribe(ctx.Self())
		return
	case *actor.Stopped:
		// Every child, the singleton too, has stopped by now.
		m.singleton = nil
		m.clearFencingToken(ctx)
		m.releaseLease(ctx, "the manager stopped", false)
		m.leases.stop() // an acquisition still running gives up; no answers any more
		m.metrics.State("")
		return
	case *initialOldestState, *oldestChanged:
		m.awaitingNext = false // handled by the state below
	case *actor.Terminated:
		if m.isSingleton(msg.Who) {
			m.clearFencingToken(ctx)
			m.singletonTerminated(ctx)
		}
	case releaseLeaseResult:
		m.logReleaseResult(ctx, msg)
		if msg.afterHandOver {
			m.sendHandOverDone(ctx)
		}
		return
	case getState:
		ctx.Respond(&currentState{State: m.state, MemberID: m.self.ID, Singleton: m.runningSingleton()})
		return
	case *messages.SingletonIdentify:
		ref := m.identifiedSingleton()
		ctx.Respond(&messages.SingletonIdentity{Ref: ref, MemberId: m.self.ID})
		if ref == nil && decideIdentifyWaiters(m.state, false) == keepWaiters {
			m.identifyWaiters.add(ctx.Sender())
		}
		return
	case *messages.SingletonEnvelope:
		m.onEnvelope(ctx, msg)
		return
	case membership.MemberRemoved:
		if isSelfRemoval(m.self.ID, msg.Member.ID) {
			m.onSelfRemoved(ctx, msg.Graceful)
			return
		}
	case *membership.CurrentClusterState, membership.MemberUp, membership.MemberLeft:
		return // the OldestChangedBuffer follows these
	}
	m.behavior.Receive(ctx)
}

// --- states ---

func (m *manager) start(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *initialOldestState:
		m.ask(ctx, msg)
	default:
		m.unhandled(ctx)
	}
}

func (m *manager) younger(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *oldestChanged:
		m.logChange(ctx, msg.oldest)
		m.ask(ctx, msg)
	case *messages.HandOverToMe:
		m.askHandOver(ctx, msg)
	default:
		m.unhandled(ctx)
	}
}

func (m *manager) becomingOldest(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *messages.HandOverInProgress:
		ctx.Logger().Debug("singleton: hand-over in progress", slog.String("at", msg.FromMemberId))
		m.ask(ctx, handOverInProgress{})
	case *messages.HandOverDone:
		m.ask(ctx, msg)
	case *messages.TakeOverFromMe:
		m.ask(ctx, takeOverOffered{from: msg.FromMemberId, sender: ctx.Sender()})
	case handOverRetry:
		m.ask(ctx, msg)
	case delayedMemberRemoved:
		m.ask(ctx, msg)
	default:
		m.unhandled(ctx)
	}
}

func (m *manager) oldest(ctx actor.Context) {
	if m.asOldest(ctx) {
		return
	}
	switch msg := ctx.Message().(type) {
	case *actor.Terminated:
		if m.isSingleton(msg.Who) {
			m.singleton = nil // singletonTerminated has planned what follows
		}
	case restartSingleton:
		m.onRestartDue(ctx, msg)
	case leaseLost:
		m.onLeaseLost(ctx, msg)
	default:
		m.unhandled(ctx)
	}
}

// acquiringLease is Akka's AcquiringLease: this member may run the
// singleton, but first it must hold the lease. It is also where an Oldest
// goes when its lease was lost, until the old singleton has terminated and
// the lease is acquired again.
func (m *manager) acquiringLease(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case acquireLeaseResult:
		m.onAcquireResult(ctx, msg)
	case leaseRetry:
		switch m.holding.retryDue(msg.gen, m.singleton != nil) {
		case acquireLeaseNow:
			m.tryAcquireLease(ctx)
		case waitForSingletonToStop:
			ctx.Logger().Debug("singleton: lease retry waits for the previous singleton to terminate")
		}
	case *actor.Terminated:
		if m.isSingleton(msg.Who) {
			m.singleton = nil
			ctx.Logger().Debug("singleton: singleton actor terminated; trying to acquire the lease again before re-creating it")
			m.tryAcquireLease(ctx)
		}
	case leaseLost:
		m.onLeaseLost(ctx, msg)
	default:
		if !m.asOldest(ctx) {
			m.unhandled(ctx)
		}
	}
}

// asOldest handles what Oldest and AcquiringLease (an oldest without its
// lease yet) answer alike: the oldest's changes and its peers' hand-over
// messages. It reports whether the message was one of them.
func (m *manager) asOldest(ctx actor.Context) bool {
	switch msg := ctx.Message().(type) {
	case *oldestChanged:
		m.logChange(ctx, msg.oldest)
		m.handleOldestChanged(ctx, msg.oldest)
	case *messages.HandOverToMe:
		m.askHandOver(ctx, msg)
	case *messages.TakeOverFromMe:
		// already (about to be) oldest: confirm and continue like that
		m.reply(ctx, &messages.HandOverToMe{FromMemberId: m.self.ID})
	case *messages.HandOverDone:
		// A resend whose ack was lost: the hand-over (and its buffered
		// messages) was taken already.
		m.reply(ctx, &messages.HandOverDoneAck{FromMemberId: m.self.ID})
	default:
		return false
	}
	return true
}

func (m *manager) handleOldestChanged(ctx actor.Context, newOldest *membership.Member) {
	m.ask(ctx, oldestLeft{oldest: newOldest, singletonRunning: m.singleton != nil})
}

// askHandOver takes a HandOverToMe.
func (m *manager) askHandOver(ctx actor.Context, msg *messages.HandOverToMe) {
	m.ask(ctx, handOverAsked{from: msg.FromMemberId, sender: ctx.Sender(), singletonRunning: m.singleton != nil})
}

func (m *manager) wasOldest(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case takeOverRetry:
		m.ask(ctx, takeOverRetryDue{retry: msg, singletonRunning: m.singleton != nil})
	case *messages.HandOverToMe:
		m.askHandOver(ctx, msg)
	case membership.MemberRemoved:
		m.ask(ctx, memberGone{id: msg.Member.ID, singletonRunning: m.singleton != nil})
	case *actor.Terminated:
		if m.isSingleton(msg.Who) {
			m.singleton = nil
		}
	case leaseLost:
		m.onLeaseLost(ctx, msg)
	default:
		m.unhandled(ctx)
	}
}

func (m *manager) handingOver(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Terminated:
		if m.isSingleton(msg.Who) {
			m.singleton = nil
			m.ask(ctx, singletonStopped{})
		}
	case *messages.HandOverToMe:
		m.askHandOver(ctx, msg)
	case leaseLost:
		m.onLeaseLost(ctx, msg)
	default:
		m.unhandled(ctx)
	}
}

// stopping is entered when this member was removed while running the
// singleton: the singleton is stopped at once, and nothing else happens
// until it has terminated.
func (m *manager) stopping(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Terminated:
		if m.isSingleton(msg.Who) {
			m.singleton = nil
			m.ask(ctx, singletonStopped{})
		}
	case *initialOldestState:
		m.ask(ctx, msg)
	default:
		m.unhandled(ctx)
	}
}

func (m *manager) end(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *initialOldestState, *oldestChanged, handOverDoneRetry, drained, *messages.HandOverDoneAck:
		m.ask(ctx, msg)
	case *messages.HandOverToMe:
		m.askHandOver(ctx, msg)
	default:
		m.unhandled(ctx)
	}
}

// unhandled is Akka's whenUnhandled: what every state does alike.
func (m *manager) unhandled(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case leaving:
		m.ask(ctx, msg)
		m.cancelRestart(ctx, "this member is leaving")
		ctx.Send(m.buffer, selfExiting{})
		if ctx.Sender() != nil {
			m.leaveWaiters = append(m.leaveWaiters, ctx.Sender())
		}
		m.answerLeaveWaitersIfIdle(ctx)
	case membership.MemberRemoved:
		if !m.history.memberRemoved(msg.Member.ID) {
			return
		}
		if d := removalDelay(m.settings, msg.Graceful); d > 0 {
			m.timers.SendOnce(d, ctx.Self(), delayedMemberRemoved{member: msg.Member})
			return
		}
		ctx.Send(ctx.Self(), delayedMemberRemoved{member: msg.Member})
	case delayedMemberRemoved:
		m.history.removalCounted(msg.member.ID)
	case *messages.TakeOverFromMe:
		ctx.Logger().Debug("singleton: ignoring TakeOverFromMe", slog.String("state", m.state), slog.String("from", msg.FromMemberId))
	case *initialOldestState:
		ctx.Logger().Debug("singleton: ignoring initial state", slog.String("state", m.state))
	case *oldestChanged:
		// Not asked for in this state; the buffer only sends on getNext.
		ctx.Logger().Warn("singleton: unexpected OldestChanged", slog.String("state", m.state))
	case handOverRetry, takeOverRetry, handOverDoneRetry, drained, leaseRetry, restartSingleton:
		// stale timer
	case acquireLeaseResult:
		// An acquisition answered after the manager left AcquiringLease.
		m.onAcquireResult(ctx, msg)
	case leaseLost:
		// A holding given up already, or one nothing runs under.
		ctx.Logger().Debug("singleton: lease lost while nothing runs under it", slog.String("state", m.state),
			slog.Any("reason", msg.reason))
	case *messages.HandOverDoneAck:
		// late ack of a hand-over already given up on
	case *actor.Terminated:
		if m.isSingleton(msg.Who) {
			m.singleton = nil
		}
	}
}

// --- transitions ---

func (m *manager) become(ctx actor.Context, name string, receive actor.ReceiveFunc) {
	if m.state != name {
		ctx.Logger().Debug("singleton manager state change", slog.String("from", m.state), slog.String("to", name),
			slog.String("member", m.self.ID), slog.String("manager", ctx.Self().Id))
	}
	if name != stateOldest {
		m.cancelRestart(ctx, "left "+stateOldest+" for "+name)
	}
	m.state = name
	m.behavior.Become(receive)
	m.record(name)
	m.answerLeaveWaitersIfIdle(ctx)
	m.settleIdentifyWaiters(ctx)
}

// settleIdentifyWaiters tells the proxies waiting for the singleton that
// it runs, or forgets them when it will not run here.
func (m *manager) settleIdentifyWaiters(ctx actor.Context) {
	if m.identifyWaiters.len() == 0 {
		return
	}
	ref := m.identifiedSingleton()
	switch decideIdentifyWaiters(m.state, ref != nil) {
	case announceToWaiters:
		for _, pid := range m.identifyWaiters.take() {
			ctx.Send(pid, &messages.SingletonIdentity{Ref: ref, MemberId: m.self.ID})
		}
	case forgetWaiters:
		m.identifyWaiters.take()
	}
}

// record reports the state in metrics, and the hand-over time once the
// singleton runs here after this member became the oldest.
func (m *manager) record(state string) {
	m.metrics.State(state)
	var took time.Duration
	var measured bool
	if m.handOver, took, measured = m.handOver.entered(state, m.singleton != nil, time.Now()); measured {
		m.metrics.HandOver(took)
	}
}

// tryGotoOldest is Akka's tryGotoOldest: start the singleton, after
// acquiring the lease when one is used.
func (m *manager) tryGotoOldest(ctx actor.Context) {
	if decideBecomeOldest(m.settings.UseLease != nil) == startSingletonNow {
		m.gotoOldest(ctx, 0, false)
		return
	}
	ctx.Logger().Debug("singleton: trying to acquire lease before starting singleton", slog.String("lease", leaseName(m.name)))
	m.history.forget()
	m.become(ctx, stateAcquiringLease, m.acquiringLease)
	m.askNext(ctx)
	m.tryAcquireLease(ctx)
}

// gotoOldest starts the singleton; leased: under a lease holding whose
// fencing token is token.
func (m *manager) gotoOldest(ctx actor.Context, token uint64, leased bool) {
	if err := m.restarts.started(time.Now()); err != nil {
		ctx.Logger().Error("singleton: not starting the singleton actor", slog.String("state", m.state), slog.Any("error", err))
		return
	}
	if leased {
		m.holding = m.holding.startedUnder(token)
		m.setFencingToken(ctx, token)
	}
	pid, err := staleness.SpawnNamed(ctx, membershiphook.Of(m.cluster).Stale, m.props, m.settings.SingletonName)
	if err != nil {
		m.clearFencingToken(ctx)
		plan, _ := m.restarts.notStarted(time.Now(), err) // started above: cannot fail
		if !plan.restart {
			// Only possible if the previous instance is still registered,
			// which the states rule out; never run a second one.
			ctx.Logger().Error("singleton: could not start the singleton actor", slog.Any("error", err))
			return
		}
		m.startRefused(ctx, plan, err)
		return
	}
	m.singleton = pid
	m.history.forget()
	if leased {
		ctx.Logger().Debug("singleton manager starting singleton actor", slog.String("pid", pid.String()),
			slog.Uint64("fencingToken", token))
	} else {
		ctx.Logger().Debug("singleton manager starting singleton actor", slog.String("pid", pid.String()))
	}
	m.become(ctx, stateOldest, m.oldest)
	m.askNext(ctx)
	held := m.envelopes.Take(struct{}{})
	for _, env := range held {
		m.onEnvelope(ctx, env)
	}
}

// handOverDone carries out the hand-over to to (nil: nobody) once the
// singleton has terminated.
func (m *manager) handOverDone(ctx actor.Context, to *actor.PID) {
	ctx.Logger().Debug("singleton terminated, hand-over done", slog.Any("to", to))
	held := m.envelopes.Take(struct{}{})
	// The held messages travel with the hand-over, so the new oldest
	// hands them to its singleton before anything sent later.
	m.offer = m.offer.handedOver(to, &messages.HandOverDone{FromMemberId: m.self.ID, Buffered: held})
	if to != nil {
		// The lease is given back before the new oldest hears that it may
		// start, so that its first acquisition finds the lease free rather
		// than waiting a lease-retry-interval.
		if !m.releaseLease(ctx, "hand-over done", true) {
			m.sendHandOverDone(ctx)
		}
		return
	}
	for _, env := range held {
		m.drop(ctx, env, "hand-over to nobody: no member took the singleton over")
	}
	m.releaseLease(ctx, "the singleton has terminated", false)
}

// armDrain starts (again) the quiet period a leaving member waits in End
// before it lets the leave go on: proxies stop sending here once they see it
// leaving, and what was in flight is passed on and flushed meanwhile
// (protoactor-go's Remote.Shutdown does not flush queued messages).
func (m *manager) armDrain(ctx actor.Context) {
	var gen int
	m.offer, gen = m.offer.armDrain()
	m.timers.SendOnce(m.settings.HandOverRetryInterval, ctx.Self(), drained{gen: gen})
}

// sendHandOverDone sends the hand-over's HandOverDone (again until it is
// acknowledged).
func (m *manager) sendHandOverDone(ctx actor.Context) {
	m.ask(ctx, handOverDoneSent{})
}

// closeHandOver is End's entry: held messages that no hand-over carried
// are dropped (this member was removed before a singleton ran here again),
// the lease is given back, and the quiet period starts.
func (m *manager) closeHandOver(ctx actor.Context) {
	held := m.envelopes.Take(struct{}{})
	for _, env := range held {
		m.dropError(ctx, env, fmt.Errorf("this member was removed from the cluster before the singleton ran here: %w", deadletter.ErrMemberRemoved))
	}
	m.releaseLease(ctx, "the singleton has terminated", false)
	m.armDrain(ctx)
}

// onSelfRemoved: this incarnation is out of the cluster for good. The
// singleton stops at once, without waiting for a hand-over: the others
// already treat this member as gone.
func (m *manager) onSelfRemoved(ctx actor.Context, graceful bool) {
	m.ask(ctx, selfRemoved{graceful: graceful, singletonRunning: m.singleton != nil})
}

// --- helpers ---

func (m *manager) terminateSingleton(ctx actor.Context) {
	if m.settings.TerminationMessage == nil {
		ctx.Poison(m.singleton)
		return
	}
	ctx.Send(m.singleton, m.settings.TerminationMessage)
}

func (m *manager) answerLeaveWaitersIfIdle(ctx actor.Context) {
	if len(m.leaveWaiters) == 0 || !leaveMayGoOn(m.state, m.selfExited, m.offer) {
		return
	}
	for _, w := range m.leaveWaiters {
		ctx.Send(w, leavingDone{})
	}
	m.leaveWaiters = nil
}

func (m *manager) runningSingleton() *actor.PID {
	if singletonShownIn(m.state) {
		return m.singleton
	}
	return nil
}

// identifiedSingleton is what proxies are told (singletonIdentifiedIn).
func (m *manager) identifiedSingleton() *actor.PID {
	if singletonIdentifiedIn(m.state, m.selfExited) {
		return m.singleton
	}
	return nil
}

func (m *manager) isSingleton(pid *actor.PID) bool {
	return m.singleton != nil && pid != nil && m.singleton.Equal(pid)
}

// peer is the manager with the same name on another member.
func (m *manager) peer(ctx actor.Context, address string) *actor.PID {
	return actor.NewPID(address, ctx.Self().Id)
}

func (m *manager) send(ctx actor.Context, to *actor.PID, msg any) {
	ctx.Request(to, msg) // the sender lets the peer answer
}

func (m *manager) reply(ctx actor.Context, msg any) {
	if ctx.Sender() == nil {
		return
	}
	m.send(ctx, ctx.Sender(), msg)
}

func (m *manager) logChange(ctx actor.Context, newOldest *membership.Member) {
	to := "<none>"
	if newOldest != nil {
		to = newOldest.ID
	}
	ctx.Logger().Debug("singleton: observed OldestChanged", slog.String("state", m.state), slog.String("newOldest", to),
		slog.String("self", m.self.ID))
}

// askNext asks the OldestChangedBuffer for the next change, unless a request
// is out already: a second one would make the buffer deliver a change in a
// state that does not ask for it (Akka's oldestChangedReceived).
func (m *manager) askNext(ctx actor.Context) {
	if m.awaitingNext {
		return
	}
	m.awaitingNext = true
	ctx.Send(m.buffer, getNext{})
}
