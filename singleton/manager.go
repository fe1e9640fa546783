package singleton

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
)

// State names of the ClusterSingletonManager, as in Akka; they appear in logs.
const (
	StateStart          = "Start"
	StateOldest         = "Oldest"
	StateYounger        = "Younger"
	StateBecomingOldest = "BecomingOldest"
	StateWasOldest      = "WasOldest"
	StateHandingOver    = "HandingOver"
	StateStopping       = "Stopping"
	StateEnd            = "End"
)

// GetState asks a manager for its current state name; the answer is a
// *CurrentState. Local only (for tests and diagnostics).
type GetState struct{}

// CurrentState answers GetState.
type CurrentState struct {
	State     string     // the manager's state name (Start, Oldest, Younger, ...)
	MemberID  string     // the member incarnation the manager runs on
	Singleton *actor.PID // nil unless running
}

// StartManager spawns a ClusterSingletonManager named name on system. It must
// be started with the same name and settings on every member (of the role).
// The singleton is created from props, as the child SingletonName, on the
// oldest member only. The manager registers a leave hook on cluster, so a
// graceful Leave waits for the hand-over.
func StartManager(system *actor.ActorSystem, cluster *membership.Cluster, props *actor.Props, name string, settings Settings) (*actor.PID, error) {
	if props == nil {
		return nil, errors.New("singleton: props is nil")
	}
	if name == "" {
		return nil, errors.New("singleton: manager name is empty")
	}
	settings = settings.withDefaults()
	settings.RemovalMargin = effectiveRemovalMargin(settings.RemovalMargin, cluster.DownRemovalMargin())
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return newManager(cluster, props, settings)
	}), name)
	if err != nil {
		return nil, fmt.Errorf("singleton: spawn manager %q: %w", name, err)
	}
	cluster.RegisterLeaveHook("singleton "+name, func(ctx context.Context) error {
		timeout := 60 * time.Second
		if d, ok := ctx.Deadline(); ok {
			timeout = time.Until(d)
		}
		if timeout <= 0 {
			return ctx.Err()
		}
		if _, err := system.Root.RequestFuture(pid, leaving{}, timeout).Result(); err != nil {
			return fmt.Errorf("singleton %s hand-over before leaving: %w", name, err)
		}
		return nil
	})
	return pid, nil
}

// manager is Akka's ClusterSingletonManager: an FSM with one receive method
// per state (see the State* names).
type manager struct {
	cluster  *membership.Cluster
	props    *actor.Props
	settings Settings

	behavior actor.Behavior
	state    string
	timers   *scheduler.TimerScheduler
	timerGen int

	self       membership.Member
	buffer     *actor.PID
	singleton  *actor.PID // the running (or stopping) singleton; nil when none
	removed    map[string]bool
	selfExited bool
	selfGone   bool // this incarnation was removed

	previousOldest []membership.Member // Younger, BecomingOldest: most recent first
	newOldest      *membership.Member  // WasOldest
	handOverTo     *actor.PID          // HandingOver: the new oldest's manager
	pendingInitial *initialOldestState // a re-join seen while the singleton still stops
	leaveWaiters   []*actor.PID
	envelopes      []*messages.SingletonEnvelope // proxied messages waiting for a singleton
	handedOverTo   *actor.PID                    // where the singleton went (End)
	doneSent       *messages.HandOverDone        // End: HandOverDone not yet acknowledged
	drainGen       int                           // End: re-armed by each proxied message
	quiet          bool                          // End: no proxied message for an interval
}

// maxEnvelopeHops bounds manager-to-manager forwards of a proxied message.
const maxEnvelopeHops = 3

func newManager(cluster *membership.Cluster, props *actor.Props, settings Settings) *manager {
	return &manager{
		cluster:  cluster,
		props:    props,
		settings: settings,
		behavior: actor.NewBehavior(),
		removed:  map[string]bool{},
	}
}

func (m *manager) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		m.timers = scheduler.NewTimerScheduler(ctx)
		m.buffer = ctx.Spawn(actor.PropsFromProducer(newOldestChangedBuffer(m.cluster, m.settings.Role)))
		m.cluster.Subscribe(ctx.Self())
		m.become(ctx, StateStart, m.start)
		ctx.Send(m.buffer, getNext{})
		return
	case *actor.Stopping:
		m.cluster.Unsubscribe(ctx.Self())
		return
	case GetState:
		ctx.Respond(&CurrentState{State: m.state, MemberID: m.self.ID, Singleton: m.runningSingleton()})
		return
	case *messages.SingletonIdentify:
		ctx.Respond(&messages.SingletonIdentity{Ref: m.identifiedSingleton(), MemberId: m.self.ID})
		return
	case *messages.SingletonEnvelope:
		m.onEnvelope(ctx, msg)
		return
	case membership.MemberRemoved:
		if msg.Member.ID == m.self.ID && m.self.ID != "" {
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
		m.onInitial(ctx, msg)
	default:
		m.unhandled(ctx)
	}
}

func (m *manager) onInitial(ctx actor.Context, msg *initialOldestState) {
	m.self = msg.self
	m.selfGone = false
	m.selfExited = false
	m.removed = map[string]bool{}
	switch decideStart(msg.self, msg.oldest, msg.safeToBeOldest) {
	case startAsOldest:
		m.gotoOldest(ctx)
	case startBecomingOldest:
		m.previousOldest = nil
		m.gotoBecomingOldest(ctx)
	default:
		m.previousOldest = nil
		if msg.oldest != nil {
			m.previousOldest = []membership.Member{*msg.oldest}
		}
		m.gotoYounger(ctx)
	}
}

func (m *manager) younger(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *oldestChanged:
		m.logChange(ctx, msg.oldest)
		switch decideYounger(m.self, msg.oldest, m.previousOldest, m.removed) {
		case becomeOldestNow:
			m.gotoOldest(ctx)
		case askHandOver:
			m.gotoBecomingOldest(ctx)
		default:
			if msg.oldest != nil && !containsMember(m.previousOldest, msg.oldest.ID) {
				m.previousOldest = append([]membership.Member{*msg.oldest}, m.previousOldest...)
			}
			ctx.Send(m.buffer, getNext{})
		}
	case *messages.HandOverToMe:
		if m.selfExited {
			ctx.Logger().Info("singleton: ignoring HandOverToMe in Younger: self is leaving", slog.String("from", msg.FromMemberId))
			return
		}
		// This member never ran the singleton in this incarnation (it may
		// be a quick restart on the same host:port): confirm that.
		m.reply(ctx, &messages.HandOverDone{FromMemberId: m.self.ID})
	default:
		m.unhandled(ctx)
	}
}

func (m *manager) becomingOldest(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *messages.HandOverInProgress:
		ctx.Logger().Info("singleton: hand-over in progress", slog.String("at", msg.FromMemberId))
		m.timerGen++ // Akka cancels the retry timer
	case *messages.HandOverDone:
		prev, ok := firstLive(m.previousOldest, m.removed)
		if ok && prev.ID == msg.FromMemberId {
			m.reply(ctx, &messages.HandOverDoneAck{FromMemberId: m.self.ID})
			m.gotoOldest(ctx)
			for _, env := range msg.Buffered {
				m.onEnvelope(ctx, env)
			}
			return
		}
		ctx.Logger().Info("singleton: ignoring HandOverDone from unexpected member",
			slog.String("from", msg.FromMemberId), slog.String("expected", prev.ID))
	case *messages.TakeOverFromMe:
		if m.removed[msg.FromMemberId] {
			return
		}
		prev, ok := firstLive(m.previousOldest, m.removed)
		switch {
		case ok && prev.ID == msg.FromMemberId:
			m.reply(ctx, &messages.HandOverToMe{FromMemberId: m.self.ID})
		case !ok && ctx.Sender() != nil:
			m.previousOldest = append([]membership.Member{{ID: msg.FromMemberId, Address: ctx.Sender().Address}}, m.previousOldest...)
			m.reply(ctx, &messages.HandOverToMe{FromMemberId: m.self.ID})
		default:
			ctx.Logger().Info("singleton: ignoring TakeOverFromMe from unexpected member",
				slog.String("from", msg.FromMemberId), slog.String("expected", prev.ID))
		}
	case handOverRetry:
		if msg.gen != m.timerGen {
			return
		}
		prev, ok := firstLive(m.previousOldest, m.removed)
		if !ok {
			ctx.Logger().Info("singleton: previous oldest removed and no TakeOver request; taking over")
			m.gotoOldest(ctx)
			return
		}
		if msg.count > maxHandOverRetries(m.settings) && msg.count%maxHandOverRetries(m.settings) == 1 {
			// Akka throws ClusterSingletonManagerIsStuck here. We keep
			// asking instead: starting without a hand-over could run two.
			ctx.Logger().Error("singleton: ClusterSingletonManagerIsStuck: previous oldest is unresponsive; still waiting for it to hand over or be removed",
				slog.String("previousOldest", prev.ID), slog.Int("retry", msg.count))
		}
		m.send(ctx, m.peer(ctx, prev.Address), &messages.HandOverToMe{FromMemberId: m.self.ID})
		m.timers.SendOnce(m.settings.HandOverRetryInterval, ctx.Self(), handOverRetry{count: msg.count + 1, gen: m.timerGen})
	case delayedMemberRemoved:
		m.removed[msg.member.ID] = true
		if containsMember(m.previousOldest, msg.member.ID) {
			if _, live := firstLive(m.previousOldest, m.removed); !live {
				ctx.Logger().Info("singleton: previous oldest removed; taking over", slog.String("member", msg.member.ID))
				m.gotoOldest(ctx)
			}
		}
	default:
		m.unhandled(ctx)
	}
}

func (m *manager) oldest(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *oldestChanged:
		m.logChange(ctx, msg.oldest)
		m.handleOldestChanged(ctx, msg.oldest)
	case *messages.HandOverToMe:
		if m.removed[msg.FromMemberId] {
			return
		}
		m.gotoHandingOver(ctx, ctx.Sender())
	case *messages.TakeOverFromMe:
		// already oldest: confirm and continue like that
		m.reply(ctx, &messages.HandOverToMe{FromMemberId: m.self.ID})
	case *messages.HandOverDone:
		// A resend whose ack was lost: the hand-over (and its buffered
		// messages) was taken already.
		m.reply(ctx, &messages.HandOverDoneAck{FromMemberId: m.self.ID})
	case *actor.Terminated:
		if m.isSingleton(msg.Who) {
			ctx.Logger().Warn("singleton: singleton actor terminated while oldest; it is not restarted (as in Akka)")
			m.singleton = nil
		}
	default:
		m.unhandled(ctx)
	}
}

func (m *manager) handleOldestChanged(ctx actor.Context, newOldest *membership.Member) {
	switch decideOldestChanged(m.self, newOldest, m.removed, m.selfExited) {
	case stayOldest:
		ctx.Send(m.buffer, getNext{})
	case handOverToNobody:
		m.gotoHandingOver(ctx, nil)
	default:
		m.newOldest = newOldest
		if newOldest != nil {
			m.send(ctx, m.peer(ctx, newOldest.Address), &messages.TakeOverFromMe{FromMemberId: m.self.ID})
		}
		m.become(ctx, StateWasOldest, m.wasOldest)
		m.timerGen++
		m.timers.SendOnce(m.settings.HandOverRetryInterval, ctx.Self(), takeOverRetry{count: 1, gen: m.timerGen})
	}
}

func (m *manager) wasOldest(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case takeOverRetry:
		if msg.gen != m.timerGen {
			return
		}
		switch decideTakeOverRetry(msg.count, m.settings, m.selfExited, m.newOldest != nil) {
		case stopSingleton:
			m.gotoHandingOver(ctx, nil)
			return
		case stuck:
			if msg.count%maxTakeOverRetries(m.settings) == 1 {
				ctx.Logger().Error("singleton: ClusterSingletonManagerIsStuck: expected hand-over never occurred; still offering it",
					slog.Any("newOldest", m.newOldest), slog.Int("retry", msg.count))
			}
		}
		if m.newOldest != nil {
			m.send(ctx, m.peer(ctx, m.newOldest.Address), &messages.TakeOverFromMe{FromMemberId: m.self.ID})
		}
		m.timers.SendOnce(m.settings.HandOverRetryInterval, ctx.Self(), takeOverRetry{count: msg.count + 1, gen: m.timerGen})
	case *messages.HandOverToMe:
		if m.removed[msg.FromMemberId] {
			return
		}
		m.gotoHandingOver(ctx, ctx.Sender())
	case membership.MemberRemoved:
		m.removed[msg.Member.ID] = true
		if !m.selfExited && m.newOldest != nil && msg.Member.ID == m.newOldest.ID {
			m.gotoHandingOver(ctx, nil)
		}
	case *actor.Terminated:
		if m.isSingleton(msg.Who) {
			m.singleton = nil
		}
	default:
		m.unhandled(ctx)
	}
}

func (m *manager) handingOver(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Terminated:
		if m.isSingleton(msg.Who) {
			m.singleton = nil
			m.handOverDone(ctx)
		}
	case *messages.HandOverToMe:
		if m.handOverTo != nil && ctx.Sender() != nil && m.handOverTo.Equal(ctx.Sender()) {
			m.reply(ctx, &messages.HandOverInProgress{FromMemberId: m.self.ID})
		}
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
			m.gotoEnd(ctx)
		}
	case *initialOldestState:
		m.pendingInitial = msg
	default:
		m.unhandled(ctx)
	}
}

func (m *manager) end(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *initialOldestState:
		if msg.self.ID != m.self.ID {
			ctx.Logger().Info("singleton: re-joined as a new member; starting over", slog.String("member", msg.self.ID))
			m.onInitial(ctx, msg)
			return
		}
		ctx.Send(m.buffer, getNext{})
	case *oldestChanged:
		// Not interested any more; keep draining so a re-join's initial
		// state gets through.
		if m.selfGone {
			ctx.Send(m.buffer, getNext{})
		}
	case *messages.HandOverToMe:
		// Nothing runs here any more.
		switch {
		case m.doneSent != nil && m.handedOverTo != nil && ctx.Sender() != nil && m.handedOverTo.Equal(ctx.Sender()):
			m.reply(ctx, m.doneSent)
		case m.selfGone:
			m.reply(ctx, &messages.HandOverDone{FromMemberId: m.self.ID})
		}
	case *messages.HandOverDoneAck:
		if m.doneSent != nil {
			m.doneSent = nil
			m.answerLeaveWaitersIfIdle(ctx)
		}
	case drained:
		if msg.gen == m.drainGen {
			m.quiet = true
			m.answerLeaveWaitersIfIdle(ctx)
		}
	case handOverDoneRetry:
		if msg.gen != m.timerGen || m.doneSent == nil || m.handedOverTo == nil {
			return
		}
		if msg.count > maxTakeOverRetries(m.settings) {
			ctx.Logger().Warn("singleton: HandOverDone never acknowledged; giving up", slog.Any("to", m.handedOverTo))
			for _, env := range m.doneSent.Buffered {
				m.drop(ctx, env, "the new oldest never acknowledged the hand-over that carried this message")
			}
			m.doneSent = nil
			m.answerLeaveWaitersIfIdle(ctx)
			return
		}
		m.send(ctx, m.handedOverTo, m.doneSent)
		m.timers.SendOnce(m.settings.HandOverRetryInterval, ctx.Self(), handOverDoneRetry{count: msg.count + 1, gen: m.timerGen})
	default:
		m.unhandled(ctx)
	}
}

// unhandled is Akka's whenUnhandled: what every state does alike.
func (m *manager) unhandled(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case leaving:
		m.selfExited = true
		ctx.Send(m.buffer, selfExiting{})
		if ctx.Sender() != nil {
			m.leaveWaiters = append(m.leaveWaiters, ctx.Sender())
		}
		m.answerLeaveWaitersIfIdle(ctx)
	case membership.MemberRemoved:
		if containsMember(m.previousOldest, msg.Member.ID) {
			if d := removalDelay(m.settings, msg.Graceful); d > 0 {
				m.timers.SendOnce(d, ctx.Self(), delayedMemberRemoved{member: msg.Member})
				return
			}
			ctx.Send(ctx.Self(), delayedMemberRemoved{member: msg.Member})
			return
		}
		m.removed[msg.Member.ID] = true
	case delayedMemberRemoved:
		m.removed[msg.member.ID] = true
		m.previousOldest = withoutMember(m.previousOldest, msg.member.ID)
	case *messages.TakeOverFromMe:
		ctx.Logger().Debug("singleton: ignoring TakeOverFromMe", slog.String("state", m.state), slog.String("from", msg.FromMemberId))
	case *initialOldestState:
		ctx.Logger().Debug("singleton: ignoring initial state", slog.String("state", m.state))
	case *oldestChanged:
		// Not asked for in this state; the buffer only sends on getNext.
		ctx.Logger().Warn("singleton: unexpected OldestChanged", slog.String("state", m.state))
	case handOverRetry, takeOverRetry, handOverDoneRetry, drained:
		// stale timer
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
		ctx.Logger().Info("singleton manager state change", slog.String("from", m.state), slog.String("to", name),
			slog.String("member", m.self.ID), slog.String("manager", ctx.Self().Id))
	}
	m.state = name
	m.behavior.Become(receive)
	m.answerLeaveWaitersIfIdle(ctx)
}

func (m *manager) gotoOldest(ctx actor.Context) {
	pid, err := ctx.SpawnNamed(m.props, m.settings.SingletonName)
	if err != nil {
		// Only possible if the previous instance is still registered,
		// which the states rule out; never run a second one.
		ctx.Logger().Error("singleton: could not start the singleton actor", slog.Any("error", err))
		return
	}
	m.singleton = pid
	m.previousOldest = nil
	ctx.Logger().Info("singleton manager starting singleton actor", slog.String("pid", pid.String()))
	m.become(ctx, StateOldest, m.oldest)
	ctx.Send(m.buffer, getNext{})
	held := m.envelopes
	m.envelopes = nil
	for _, env := range held {
		m.onEnvelope(ctx, env)
	}
}

func (m *manager) gotoYounger(ctx actor.Context) {
	m.become(ctx, StateYounger, m.younger)
	ctx.Send(m.buffer, getNext{})
}

func (m *manager) gotoBecomingOldest(ctx actor.Context) {
	if prev, ok := firstLive(m.previousOldest, m.removed); ok {
		m.send(ctx, m.peer(ctx, prev.Address), &messages.HandOverToMe{FromMemberId: m.self.ID})
	}
	m.become(ctx, StateBecomingOldest, m.becomingOldest)
	m.timerGen++
	m.timers.SendOnce(m.settings.HandOverRetryInterval, ctx.Self(), handOverRetry{count: 1, gen: m.timerGen})
}

func (m *manager) gotoHandingOver(ctx actor.Context, handOverTo *actor.PID) {
	m.handOverTo = handOverTo
	if m.singleton == nil {
		m.handOverDone(ctx)
		return
	}
	if handOverTo != nil {
		m.send(ctx, handOverTo, &messages.HandOverInProgress{FromMemberId: m.self.ID})
	}
	ctx.Logger().Info("singleton manager stopping singleton actor", slog.String("pid", m.singleton.String()))
	m.terminateSingleton(ctx)
	m.become(ctx, StateHandingOver, m.handingOver)
}

func (m *manager) handOverDone(ctx actor.Context) {
	ctx.Logger().Info("singleton terminated, hand-over done", slog.Any("to", m.handOverTo))
	to := m.handOverTo
	m.handOverTo = nil
	m.newOldest = nil
	m.handedOverTo = to
	held := m.envelopes
	m.envelopes = nil
	if to != nil {
		// The held messages travel with the hand-over, so the new oldest
		// hands them to its singleton before anything sent later.
		m.doneSent = &messages.HandOverDone{FromMemberId: m.self.ID, Buffered: held}
		m.send(ctx, to, m.doneSent)
		m.timerGen++
		m.timers.SendOnce(m.settings.HandOverRetryInterval, ctx.Self(), handOverDoneRetry{count: 1, gen: m.timerGen})
	} else {
		for _, env := range held {
			m.drop(ctx, env, "hand-over to nobody: no member took the singleton over")
		}
	}
	if to == nil && !m.selfExited {
		m.previousOldest = nil
		m.gotoYounger(ctx)
		return
	}
	m.gotoEnd(ctx)
}

// armDrain starts (again) the quiet period a leaving member waits in End
// before it lets the leave go on: proxies stop sending here once they see it
// leaving, and what was in flight is passed on and flushed meanwhile
// (protoactor-go's Remote.Shutdown does not flush queued messages).
func (m *manager) armDrain(ctx actor.Context) {
	m.quiet = false
	m.drainGen++
	m.timers.SendOnce(m.settings.HandOverRetryInterval, ctx.Self(), drained{gen: m.drainGen})
}

func (m *manager) gotoEnd(ctx actor.Context) {
	m.armDrain(ctx)
	m.become(ctx, StateEnd, m.end)
	if m.pendingInitial != nil {
		p := m.pendingInitial
		m.pendingInitial = nil
		ctx.Send(ctx.Self(), p)
		return
	}
	if m.selfGone {
		ctx.Send(m.buffer, getNext{})
	}
}

// onSelfRemoved: this incarnation is out of the cluster for good. The
// singleton stops at once, without waiting for a hand-over: the others
// already treat this member as gone.
func (m *manager) onSelfRemoved(ctx actor.Context, graceful bool) {
	if m.selfGone {
		return
	}
	m.selfGone = true
	m.timerGen++
	ctx.Logger().Info("singleton: self removed", slog.Bool("graceful", graceful), slog.String("state", m.state))
	if m.singleton != nil {
		ctx.Stop(m.singleton)
		m.become(ctx, StateStopping, m.stopping)
		return
	}
	m.gotoEnd(ctx)
}

// --- helpers ---

// onEnvelope handles a message from a proxy: to the singleton if it runs
// here, held while one is about to run here, passed on to where it went.
func (m *manager) onEnvelope(ctx actor.Context, env *messages.SingletonEnvelope) {
	switch m.state {
	case StateOldest, StateWasOldest:
		// In WasOldest the singleton has not been told to stop yet; the
		// termination message will come after this one, from this actor.
		if m.singleton == nil {
			m.drop(ctx, env, "the singleton actor has terminated and is not restarted")
			return
		}
		msg, err := env.GetMessage().UnmarshalNew()
		if err != nil {
			m.drop(ctx, env, fmt.Sprintf("cannot decode proxied message %q: %v", env.GetMessage().GetTypeUrl(), err))
			return
		}
		if env.Sender != nil {
			ctx.RequestWithCustomSender(m.singleton, msg, env.Sender)
			return
		}
		ctx.Send(m.singleton, msg)
	case StateStart, StateBecomingOldest, StateHandingOver:
		if len(m.envelopes) >= m.settings.BufferSize {
			dropped := m.envelopes[0]
			m.envelopes = m.envelopes[1:]
			m.drop(ctx, dropped, fmt.Sprintf("singleton manager buffer is full (%d), dropping the oldest message", m.settings.BufferSize))
		}
		m.envelopes = append(m.envelopes, env)
	case StateYounger:
		var to *actor.PID
		if len(m.previousOldest) > 0 {
			to = m.peer(ctx, m.previousOldest[0].Address)
		}
		m.passOn(ctx, to, env, "this member does not run the singleton and knows no oldest")
	case StateEnd:
		m.passOn(ctx, m.handedOverTo, env, "this member no longer runs the singleton")
		m.armDrain(ctx)
	default:
		m.drop(ctx, env, "this member was removed from the cluster")
	}
}

func (m *manager) passOn(ctx actor.Context, to *actor.PID, env *messages.SingletonEnvelope, reason string) {
	if to == nil || to.Equal(ctx.Self()) {
		m.drop(ctx, env, reason)
		return
	}
	if env.Hops >= maxEnvelopeHops {
		m.drop(ctx, env, fmt.Sprintf("forwarded %d times between managers without reaching the singleton", env.Hops))
		return
	}
	env.Hops++
	ctx.Send(to, env)
}

func (m *manager) drop(ctx actor.Context, env *messages.SingletonEnvelope, reason string) {
	deadletter.Publish(ctx.ActorSystem(), ctx.Self(), env, env.GetSender(), "singleton manager: "+reason)
}

func (m *manager) terminateSingleton(ctx actor.Context) {
	if m.settings.TerminationMessage == nil {
		ctx.Poison(m.singleton)
		return
	}
	ctx.Send(m.singleton, m.settings.TerminationMessage)
}

func (m *manager) answerLeaveWaitersIfIdle(ctx actor.Context) {
	if !m.selfExited || len(m.leaveWaiters) == 0 {
		return
	}
	if m.doneSent != nil {
		return // the hand-over is still in flight
	}
	if m.state == StateEnd && !m.quiet {
		return // proxied messages may still be arriving
	}
	switch m.state {
	case StateStart, StateYounger, StateEnd:
		for _, w := range m.leaveWaiters {
			ctx.Send(w, leavingDone{})
		}
		m.leaveWaiters = nil
	}
}

func (m *manager) runningSingleton() *actor.PID {
	if m.state == StateOldest || m.state == StateWasOldest || m.state == StateHandingOver || m.state == StateStopping {
		return m.singleton
	}
	return nil
}

// identifiedSingleton is what proxies are told: only a singleton that is
// not about to be handed over.
func (m *manager) identifiedSingleton() *actor.PID {
	if m.state == StateOldest && !m.selfExited {
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
	ctx.Logger().Info("singleton: observed OldestChanged", slog.String("state", m.state), slog.String("newOldest", to),
		slog.String("self", m.self.ID))
}

func containsMember(ms []membership.Member, id string) bool {
	for _, x := range ms {
		if x.ID == id {
			return true
		}
	}
	return false
}

func withoutMember(ms []membership.Member, id string) []membership.Member {
	out := ms[:0:0]
	for _, x := range ms {
		if x.ID != id {
			out = append(out, x)
		}
	}
	return out
}
