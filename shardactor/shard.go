package shardactor

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// State names of the Shard; they appear in logs.
const (
	// stateActive: entities are started on demand and receive their messages.
	stateActive = "active"
	// stateHandingOff: the shard was told HandOff and waits for its entities
	// to stop (Akka's HandOffStopper, run inside the shard).
	stateHandingOff = "handingOff"
	// stateStopped: the shard has asked to stop itself; anything still
	// arriving is reported as dropped.
	stateStopped = "stopped"
)

// Timer messages of the hand-off; gen tells a stale timer from the current
// one.
type (
	handOffWarning   struct{ gen int }
	handOffForceStop struct{ gen int }
)

// idleCheckTick is the repeating timer message of idle passivation. No gen:
// the timer only runs in stateActive, and a tick that comes after it was
// cancelled (already in the mailbox) is ignored in the other states.
type idleCheckTick struct{}

// Reasons of automatic passivation, for logs.
const (
	passivateIdle  = "idle"
	passivateLimit = "limit"
)

// Props returns the props of the Shard actor that owns shard shardID of the
// entity type typeName (the type name is only used in logs). Entities are
// spawned from entityProps as children of the shard, named EntityName(id).
// Zero settings fields take their defaults (see Settings).
func Props(typeName, shardID string, entityProps *actor.Props, settings Settings) *actor.Props {
	settings = settings.withDefaults()
	var opts []actor.PropsOption
	if settings.EntitySupervisorStrategy != nil {
		opts = append(opts, actor.WithSupervisor(settings.EntitySupervisorStrategy))
	}
	return actor.PropsFromProducer(func() actor.Actor {
		policy, policyErr := NewReplacementPolicy(settings.ReplacementPolicy, settings.ActiveEntityLimit)
		if policyErr != nil {
			// Logged at Started, where the shard has a logger.
			policy = NewLeastRecentlyUsed(settings.ActiveEntityLimit)
		}
		return &shard{
			typeName:    typeName,
			shardID:     shardID,
			entityProps: entityProps,
			settings:    settings,
			behavior:    actor.NewBehavior(),
			entities:    map[string]*entity{},
			byPID:       map[string]string{},
			automatic:   !settings.RememberEntities,
			policy:      policy,
			policyErr:   policyErr,
		}
	}, opts...)
}

// shard is Akka's classic Shard (without remember-entities): one receive
// method per state (see the state* names).
type shard struct {
	typeName    string
	shardID     string
	entityProps *actor.Props
	settings    Settings

	behavior actor.Behavior
	state    string
	timers   *scheduler.TimerScheduler
	cancels  []scheduler.CancelFunc
	timerGen int

	entities map[string]*entity // live entity children by entity ID
	byPID    map[string]string  // pidKey(child) -> entity ID
	buffered int                // messages held for passivating entities, all together

	handOffReplyTo []*actor.PID // handingOff: who is answered ShardStopped

	// Automatic passivation (see passivation.go). Entities are tracked from
	// their start to their termination or until chosen for passivation.
	automatic       bool                 // off with remember-entities, as in Akka
	policy          ReplacementPolicy    // the active-entity limit
	policyErr       error                // unknown Settings.ReplacementPolicy, logged at Started
	cancelIdleCheck scheduler.CancelFunc // the repeating idleCheckTick, while active

	// Remember-entities (see remember.go).
	remembered     map[string]bool              // IDs in the store, as far as this shard knows
	recoveryStash  []bufferedMessage            // what arrived while the IDs were read
	unacked        map[string]bool              // remembered IDs whose StartEntity is not acknowledged
	cancelResend   scheduler.CancelFunc         // the StartEntity resend timer
	awaiting       map[string][]bufferedMessage // new entities waiting for their ID to be written
	pendingStarted map[string]bool              // the next write's started IDs
	pendingStopped map[string]bool              // the next write's stopped IDs
	writeInFlight  bool
}

// entity is one live entity child.
type entity struct {
	id          string
	pid         *actor.PID
	passivating bool              // the stop message was sent on its Passivate
	buffer      []bufferedMessage // what arrived for it while passivating, in order
	activity    Activity          // for idle passivation (see CheckIdle)
}

// bufferedMessage is a message (or a StartEntity) held for the next
// incarnation of a passivating entity.
type bufferedMessage struct {
	message any
	sender  *actor.PID
	start   bool // a StartEntity: ack it to sender once started again
}

// Receive handles what every state handles alike, then the current state.
func (s *shard) Receive(ctx actor.Context) {
	// The hot path first: a message for an entity while active, without
	// the behavior's indirection. (active sees no *Deliver.)
	if d, ok := ctx.Message().(*Deliver); ok && s.state == stateActive {
		s.deliverTo(ctx, d, ctx.Sender())
		return
	}
	switch ctx.Message().(type) {
	case *actor.Started:
		s.timers = scheduler.NewTimerScheduler(ctx)
		if s.settings.RememberEntities && s.settings.RememberEntitiesStore == nil {
			ctx.Logger().Error("shard: remember-entities is on but there is no RememberEntitiesStore; entities are not remembered", s.attrs()...)
		}
		if s.remembering() {
			s.startRecovery(ctx)
			return
		}
		s.become(ctx, stateActive, s.active)
		s.startPassivation(ctx)
		return
	case *actor.Stopping:
		s.cancelTimers()
		s.dropAllBuffers(ctx, "the shard stopped before the entity finished passivating")
		s.dropAwaiting(ctx, "the shard stopped")
		return
	case *actor.Restarting:
		// A failure of the shard itself: proto.actor stops the children and
		// makes a fresh shard, so what is held here is lost; say so.
		s.cancelTimers()
		s.dropAllBuffers(ctx, "the shard failed and restarts; its entities were stopped")
		return
	case *actor.Stopped:
		return
	case GetShardStats, *GetShardStats:
		s.reply(ctx, &ShardStats{ShardID: s.shardID, EntityCount: len(s.entities)})
		return
	case GetCurrentShardState, *GetCurrentShardState:
		s.reply(ctx, &CurrentShardState{ShardID: s.shardID, EntityIDs: s.entityIDs()})
		return
	case GetPassivationState, *GetPassivationState:
		s.reply(ctx, s.passivationState())
		return
	}
	s.behavior.Receive(ctx)
}

// --- states ---

func (s *shard) active(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case Deliver:
		s.deliverTo(ctx, &msg, ctx.Sender())
	case *messages.StartEntity:
		s.onStartEntity(ctx, msg.GetEntityId(), msg, ctx.Sender())
	case *messages.StartEntityAck:
		s.onStartEntityAck(ctx, msg)
	case *rememberUpdateDone:
		s.onUpdateDone(ctx, msg)
	case rememberRetryWrite:
		s.flushWrites(ctx)
	case *rememberRecoverBatch:
		s.recoverBatch(ctx, msg.ids)
	case rememberResendStarts:
		s.onResendStarts(ctx)
	case *restartEntity:
		s.onRestartEntity(ctx, msg)
	case *rememberedLoaded, rememberRetryLoad:
		// a late answer of a read that is over
	case *messages.Passivate:
		s.onPassivate(ctx, msg)
	case *actor.Terminated:
		s.onEntityTerminated(ctx, msg)
	case *messages.HandOff:
		s.onHandOff(ctx, msg)
	case *SetActiveEntityLimit:
		s.onSetActiveEntityLimit(ctx, msg)
	case SetActiveEntityLimit:
		s.onSetActiveEntityLimit(ctx, &msg)
	case idleCheckTick:
		s.onIdleCheck(ctx)
	case handOffWarning, handOffForceStop:
		// stale timer of a hand-off that is over
	default:
		s.drop(ctx, msg, ctx.Sender(), fmt.Sprintf("unexpected message %T in state %s", msg, s.state))
	}
}

func (s *shard) handingOff(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Terminated:
		if e, ok := s.entityOf(msg.Who); ok {
			s.forget(e)
			if len(s.entities) == 0 {
				s.finishHandOff(ctx)
			}
		}
	case *messages.HandOff:
		if msg.GetShard() != s.shardID {
			s.drop(ctx, msg, ctx.Sender(), fmt.Sprintf("HandOff for shard %q sent to shard %q", msg.GetShard(), s.shardID))
			return
		}
		// Akka ignores a second HandOff; answering it as well costs nothing
		// and spares a retrying RebalanceWorker a time-out.
		ctx.Logger().Info("shard: HandOff received during an existing hand-off; it will be answered too", s.attrs()...)
		s.handOffReplyTo = appendPID(s.handOffReplyTo, ctx.Sender())
	case handOffWarning:
		if msg.gen == s.timerGen && len(s.entities) > 0 {
			ctx.Logger().Warn(fmt.Sprintf("shard: %d entities not stopped after %s; maybe the hand-off stop message %s is not handled? They are stopped by force after %s",
				len(s.entities), handOffWarningAfter, s.stopMessageName(), s.settings.entityHandOffTimeout()),
				append(s.attrs(), slog.String("entities", describeIDs(s.entityIDs())))...)
		}
	case handOffForceStop:
		if msg.gen != s.timerGen || len(s.entities) == 0 {
			return
		}
		ctx.Logger().Warn(fmt.Sprintf("shard: hand-off stop message %s not handled by %d entities after %s; stopping them",
			s.stopMessageName(), len(s.entities), s.settings.entityHandOffTimeout()),
			append(s.attrs(), slog.String("entities", describeIDs(s.entityIDs())))...)
		for _, e := range s.entities {
			ctx.Stop(e.pid)
		}
	case *messages.Passivate:
		// The hand-off stops every entity anyway.
		ctx.Logger().Debug("shard: Passivate during hand-off; the entity is being stopped already", s.attrs()...)
	case idleCheckTick:
		// sent before the timer was cancelled at HandOff
	case *rememberUpdateDone, rememberRetryWrite, *rememberRecoverBatch, rememberResendStarts, *restartEntity,
		*rememberedLoaded, rememberRetryLoad, *messages.StartEntityAck:
		// Remember-entities bookkeeping: the entities stay remembered and
		// start again at the shard's next home.
	case *SetActiveEntityLimit, SetActiveEntityLimit:
		// The region sends limits to all its shards; this one is stopping
		// every entity anyway, so there is nothing to apply and nothing lost.
		ctx.Logger().Debug("shard: SetActiveEntityLimit during hand-off; ignored", s.attrs()...)
	default:
		s.drop(ctx, msg, ctx.Sender(), fmt.Sprintf("shard %s is handing off", s.shardID))
	}
}

func (s *shard) stopped(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Terminated, handOffWarning, handOffForceStop, idleCheckTick, *SetActiveEntityLimit, SetActiveEntityLimit,
		*rememberUpdateDone, rememberRetryWrite, *rememberRecoverBatch, rememberResendStarts, *restartEntity,
		*rememberedLoaded, rememberRetryLoad, *messages.StartEntityAck:
		// Bookkeeping for entities that are gone: nothing to apply, and
		// nothing meant for an entity is lost.
	default:
		s.drop(ctx, msg, ctx.Sender(), fmt.Sprintf("shard %s has stopped", s.shardID))
	}
}

// --- active ---

// deliverTo hands d to its entity as if from sender, starting the entity
// if needed. It is the hot path; what is rare is in deliverSlow and
// dropBadDeliver.
func (s *shard) deliverTo(ctx actor.Context, d *Deliver, sender *actor.PID) {
	if d == nil || d.EntityID == "" || d.Message == nil {
		s.dropBadDeliver(ctx, d, sender)
		return
	}
	e := s.entities[d.EntityID]
	if _, start := d.Message.(*messages.StartEntity); start || e == nil || e.passivating {
		s.deliverSlow(ctx, e, d, sender)
		return
	}
	if countsAsActivity(d.Message) {
		s.touch(ctx, e)
		// touch may have chosen this very entity (a policy may, even if
		// ours never choose the entity just touched): then it waits for
		// the next incarnation like any message for a passivating entity.
		if e.passivating {
			s.hold(ctx, e, bufferedMessage{message: d.Message, sender: sender}, d)
			return
		}
	}
	tell(ctx, e.pid, d.Message, sender)
}

// deliverSlow is deliverTo for a StartEntity, an entity that is not
// running (e is nil) or one that is passivating.
func (s *shard) deliverSlow(ctx actor.Context, e *entity, d *Deliver, sender *actor.PID) {
	if start, ok := d.Message.(*messages.StartEntity); ok {
		// As Akka: StartEntity works both as is and inside an envelope.
		s.onStartEntity(ctx, start.GetEntityId(), d, sender)
		return
	}
	if e != nil {
		// Not activity: the entity is going. The next incarnation is
		// touched when it starts.
		s.hold(ctx, e, bufferedMessage{message: d.Message, sender: sender}, d)
		return
	}
	if s.mustAwaitStore(d.EntityID) {
		s.awaitStore(ctx, d.EntityID, bufferedMessage{message: d.Message, sender: sender}, d)
		return
	}
	e, err := s.startEntity(ctx, d.EntityID)
	if err != nil {
		s.drop(ctx, d, sender, fmt.Sprintf("cannot start entity %q: %v", d.EntityID, err))
		return
	}
	// A started entity is tracked whatever its first message, or an
	// entity started by a protocol message would never be passivated.
	s.touch(ctx, e)
	if e.passivating {
		s.hold(ctx, e, bufferedMessage{message: d.Message, sender: sender}, d)
		return
	}
	tell(ctx, e.pid, d.Message, sender)
}

func (s *shard) dropBadDeliver(ctx actor.Context, d *Deliver, sender *actor.PID) {
	switch {
	case d == nil:
		s.drop(ctx, d, sender, "nil Deliver")
	case d.EntityID == "":
		s.drop(ctx, d, sender, fmt.Sprintf("empty entity ID (message %T)", d.Message))
	default:
		s.drop(ctx, d, sender, fmt.Sprintf("nil message for entity %q", d.EntityID))
	}
}

// mustAwaitStore: with remember-entities, an entity not remembered yet (or
// whose messages already wait) starts only once its ID is written.
func (s *shard) mustAwaitStore(id string) bool {
	if !s.remembering() {
		return false
	}
	if _, waiting := s.awaiting[id]; waiting {
		return true
	}
	return !s.remembered[id]
}

// onStartEntity starts the entity if needed and acknowledges to sender;
// original is what is reported if it must be dropped.
func (s *shard) onStartEntity(ctx actor.Context, id string, original any, sender *actor.PID) {
	if id == "" {
		s.drop(ctx, original, sender, "StartEntity with an empty entity ID")
		return
	}
	e := s.entities[id]
	if e == nil && s.mustAwaitStore(id) {
		s.awaitStore(ctx, id, bufferedMessage{sender: sender, start: true}, original)
		return
	}
	switch {
	case e == nil:
		started, err := s.startEntity(ctx, id)
		if err != nil {
			s.drop(ctx, original, sender, fmt.Sprintf("cannot start entity %q: %v", id, err))
			return
		}
		s.touch(ctx, started)
		s.ackStart(ctx, id, sender)
	case e.passivating:
		// Started again, and acknowledged, once the passivation completes.
		s.hold(ctx, e, bufferedMessage{sender: sender, start: true}, original)
	default:
		// As in Akka, StartEntity of a running entity is a use of it.
		s.touch(ctx, e)
		s.ackStart(ctx, id, sender)
	}
}

func (s *shard) onPassivate(ctx actor.Context, p *messages.Passivate) {
	e, ok := s.entityOf(ctx.Sender())
	if !ok {
		s.drop(ctx, p, ctx.Sender(), fmt.Sprintf("Passivate from %v, which is not an entity of shard %s (an entity must send it to its parent with ctx.Request)",
			ctx.Sender(), s.shardID))
		return
	}
	if e.passivating {
		ctx.Logger().Debug("shard: passivation already in progress; stop message not sent again",
			append(s.attrs(), slog.String("entity", e.id))...)
		return
	}
	stop, err := decodeStopMessage(p)
	if err != nil {
		ctx.Logger().Warn("shard: cannot decode the Passivate stop message; poisoning the entity instead",
			append(s.attrs(), slog.String("entity", e.id), slog.Any("error", err))...)
		stop = nil
	}
	e.passivating = true
	ctx.Logger().Debug("shard: passivating entity", append(s.attrs(), slog.String("entity", e.id))...)
	stopMessageOrPoison(ctx, e.pid, stop)
}

func (s *shard) onEntityTerminated(ctx actor.Context, t *actor.Terminated) {
	e, ok := s.entityOf(t.Who)
	if !ok {
		ctx.Logger().Debug("shard: Terminated of an unknown actor", append(s.attrs(), slog.Any("who", t.Who))...)
		return
	}
	s.forget(e)
	if s.remembering() {
		s.onRememberedEntityStopped(ctx, e)
	}
	if !e.passivating || len(e.buffer) == 0 {
		ctx.Logger().Debug("shard: entity stopped", append(s.attrs(), slog.String("entity", e.id), slog.Bool("passivated", e.passivating))...)
		return
	}
	// Messages arrived between Passivate and the termination: they go to a
	// new incarnation, in their order, as in Akka.
	s.buffered -= len(e.buffer)
	next, err := s.startEntity(ctx, e.id)
	if err != nil {
		for _, m := range e.buffer {
			s.drop(ctx, m.original(e.id), m.sender, fmt.Sprintf("cannot start entity %q again after passivation: %v", e.id, err))
		}
		return
	}
	ctx.Logger().Debug("shard: entity passivated; started again for its buffered messages",
		append(s.attrs(), slog.String("entity", e.id), slog.Int("messages", len(e.buffer)))...)
	// The buffered messages are the new incarnation's activity. Touching
	// before they are sent may choose other entities (never, with our
	// policies, this one: see onDeliver).
	s.touch(ctx, next)
	if next.passivating {
		// Chosen at once: the buffer waits for the incarnation after.
		next.buffer = e.buffer
		s.buffered += len(e.buffer)
		return
	}
	for _, m := range e.buffer {
		if m.start {
			s.ackStart(ctx, e.id, m.sender)
			continue
		}
		tell(ctx, next.pid, m.message, m.sender)
	}
}

func (s *shard) onHandOff(ctx actor.Context, h *messages.HandOff) {
	if h.GetShard() != s.shardID {
		s.drop(ctx, h, ctx.Sender(), fmt.Sprintf("HandOff for shard %q sent to shard %q", h.GetShard(), s.shardID))
		return
	}
	s.handOffReplyTo = appendPID(nil, ctx.Sender())
	// No automatic passivation once the shard hands off: every entity is
	// stopped with the hand-off stop message anyway.
	s.stopIdleCheck()
	s.dropAwaiting(ctx, fmt.Sprintf("shard %s is handing off", s.shardID))
	if len(s.entities) == 0 {
		ctx.Logger().Debug("shard: HandOff with no entities", s.attrs()...)
		s.finishHandOff(ctx)
		return
	}
	ctx.Logger().Info("shard: HandOff; stopping entities", append(s.attrs(), slog.Int("entities", len(s.entities)))...)
	// The entities are about to stop and the shard with them, so what is held
	// for a passivating entity has no next incarnation to go to. (The region
	// likewise drops what it buffered for the shard when it gets HandOff.)
	s.dropAllBuffers(ctx, fmt.Sprintf("shard %s is handing off while the entity was passivating", s.shardID))
	for _, e := range s.entities {
		stopMessageOrPoison(ctx, e.pid, s.settings.HandOffStopMessage)
	}
	s.become(ctx, stateHandingOff, s.handingOff)
	s.timerGen++
	force := s.settings.entityHandOffTimeout()
	// The warning is only useful before the force-stop (Akka always sends it
	// after 5 s, which with a short handoff-timeout comes after the
	// force-stop).
	if force > handOffWarningAfter {
		s.cancels = append(s.cancels, s.timers.SendOnce(handOffWarningAfter, ctx.Self(), handOffWarning{gen: s.timerGen}))
	}
	s.cancels = append(s.cancels, s.timers.SendOnce(force, ctx.Self(), handOffForceStop{gen: s.timerGen}))
}

// finishHandOff answers ShardStopped to the hand-off senders and stops the
// shard.
func (s *shard) finishHandOff(ctx actor.Context) {
	ctx.Logger().Info("shard: hand-off done; all entities stopped", s.attrs()...)
	stopped := &messages.ShardStopped{Shard: s.shardID}
	if len(s.handOffReplyTo) == 0 {
		deadletter.Publish(ctx.ActorSystem(), nil, stopped, ctx.Self(), s.reason("HandOff had no sender to answer ShardStopped to"))
	}
	for _, to := range s.handOffReplyTo {
		ctx.Send(to, stopped)
	}
	s.handOffReplyTo = nil
	s.cancelTimers()
	s.become(ctx, stateStopped, s.stopped)
	ctx.Stop(ctx.Self())
}

// --- automatic passivation ---

// startPassivation starts the idle check, in stateActive.
func (s *shard) startPassivation(ctx actor.Context) {
	if s.policyErr != nil {
		ctx.Logger().Error("shard: unknown replacement policy; using "+LeastRecentlyUsedPolicy,
			append(s.attrs(), slog.Any("error", s.policyErr))...)
	}
	if !s.automatic {
		ctx.Logger().Debug("shard: entities are not passivated automatically because remember-entities is on", s.attrs()...)
		return
	}
	if !s.settings.idlePassivation() {
		return
	}
	// A repeating timer, not proto.actor's ReceiveTimeout: that one fires
	// once, and any message (queries included) resets it.
	interval := idleCheckInterval(s.settings.PassivationIdleTimeout)
	s.cancelIdleCheck = s.timers.SendRepeatedly(interval, interval, ctx.Self(), idleCheckTick{})
}

func (s *shard) stopIdleCheck() {
	if s.cancelIdleCheck != nil {
		s.cancelIdleCheck()
		s.cancelIdleCheck = nil
	}
}

// touch records a use of the live entity e and passivates the entities the
// replacement policy chooses beyond the limit. It runs on every user
// message, so it reads no clock: onIdleCheck does.
func (s *shard) touch(ctx actor.Context, e *entity) {
	if !s.automatic {
		return
	}
	e.activity.Used = true
	for _, chosen := range s.policy.Touch(e.id) {
		s.passivateAutomatically(ctx, chosen, passivateLimit)
	}
}

func (s *shard) onIdleCheck(ctx actor.Context) {
	if !s.automatic || !s.settings.idlePassivation() {
		return // a tick of a timer that was never meant to run
	}
	now := time.Now()
	var idle []string
	for id, e := range s.entities {
		if e.passivating {
			continue // going already
		}
		var isIdle bool
		e.activity, isIdle = CheckIdle(now, e.activity, s.settings.PassivationIdleTimeout)
		if isIdle {
			idle = append(idle, id)
		}
	}
	slices.Sort(idle) // a stable order in the logs
	for _, id := range idle {
		s.passivateAutomatically(ctx, id, passivateIdle)
	}
}

func (s *shard) onSetActiveEntityLimit(ctx actor.Context, m *SetActiveEntityLimit) {
	switch {
	case m == nil:
		s.drop(ctx, m, ctx.Sender(), "nil SetActiveEntityLimit")
		return
	case m.Limit < 0:
		s.drop(ctx, m, ctx.Sender(), fmt.Sprintf("negative active-entity limit %d", m.Limit))
		return
	case !s.automatic:
		ctx.Logger().Debug("shard: SetActiveEntityLimit ignored: remember-entities is on",
			append(s.attrs(), slog.Int("limit", m.Limit))...)
		return
	}
	chosen := s.policy.SetLimit(m.Limit)
	ctx.Logger().Debug("shard: active-entity limit set",
		append(s.attrs(), slog.Int("limit", m.Limit), slog.Int("passivating", len(chosen)))...)
	for _, id := range chosen {
		s.passivateAutomatically(ctx, id, passivateLimit)
	}
}

// passivateAutomatically passivates entity id exactly as if it had sent
// Passivate with the hand-off stop message: what arrives for it meanwhile is
// held and starts its next incarnation. The entity is no longer tracked:
// it is going, and its next incarnation is tracked afresh.
func (s *shard) passivateAutomatically(ctx actor.Context, id, reason string) {
	s.policy.Remove(id)
	e := s.entities[id]
	if e == nil {
		// Tracking and entities are kept together (forget), so this is a
		// bug; say so rather than passivate nothing silently.
		ctx.Logger().Error("shard: automatic passivation of an entity that is not running",
			append(s.attrs(), slog.String("entity", id), slog.String("reason", reason))...)
		return
	}
	if e.passivating {
		ctx.Logger().Debug("shard: entity already passivating; not passivated again",
			append(s.attrs(), slog.String("entity", id), slog.String("reason", reason))...)
		return
	}
	e.passivating = true
	ctx.Logger().Debug("shard: passivating entity automatically",
		append(s.attrs(), slog.String("entity", id), slog.String("reason", reason))...)
	stopMessageOrPoison(ctx, e.pid, s.settings.HandOffStopMessage)
}

func (s *shard) passivationState() *PassivationState {
	st := &PassivationState{ShardID: s.shardID, Active: []string{}}
	if !s.automatic {
		return st
	}
	st.Limit = s.policy.Limit()
	if s.settings.idlePassivation() {
		st.IdleTimeout = s.settings.PassivationIdleTimeout
	}
	st.Active = s.policy.Active()
	return st
}

// --- entities ---

// startEntity spawns the entity child id and records it.
func (s *shard) startEntity(ctx actor.Context, id string) (*entity, error) {
	if s.entityProps == nil {
		return nil, errors.New("the shard has no entity props")
	}
	pid, err := spawn(ctx, s.entityProps, EntityName(id))
	if err != nil {
		ctx.Logger().Error("shard: cannot start entity", append(s.attrs(), slog.String("entity", id), slog.Any("error", err))...)
		return nil, err
	}
	// No ctx.Watch: proto.actor tells the parent of every child's
	// termination already. A watch would add a second Terminated for the
	// same PID, and PIDs carry no incarnation, so that duplicate would look
	// like the termination of the entity's next incarnation.
	e := &entity{id: id, pid: pid, activity: Activity{LastSeen: time.Now()}}
	s.entities[id] = e
	s.byPID[pidKey(pid)] = id
	ctx.Logger().Debug("shard: started entity", append(s.attrs(), slog.String("entity", id))...)
	return e, nil
}

// spawn is ctx.SpawnNamed that turns a panic of the entity producer (user
// code, called synchronously by proto.actor) into an error.
func spawn(ctx actor.Context, props *actor.Props, name string) (pid *actor.PID, err error) {
	defer func() {
		if r := recover(); r != nil {
			pid, err = nil, fmt.Errorf("spawning the entity panicked: %v", r)
		}
	}()
	pid, err = ctx.SpawnNamed(props, name)
	if err != nil {
		return nil, err // with ErrNameExists, pid is the other actor
	}
	return pid, nil
}

func (s *shard) forget(e *entity) {
	delete(s.entities, e.id)
	delete(s.byPID, pidKey(e.pid))
	s.policy.Remove(e.id)
}

func (s *shard) entityOf(pid *actor.PID) (*entity, bool) {
	if pid == nil {
		return nil, false
	}
	id, ok := s.byPID[pidKey(pid)]
	if !ok {
		return nil, false
	}
	return s.entities[id], true
}

func (s *shard) entityIDs() []string {
	ids := make([]string, 0, len(s.entities))
	for id := range s.entities {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// hold keeps m for the next incarnation of the passivating entity e, within
// maxBufferedMessages.
func (s *shard) hold(ctx actor.Context, e *entity, m bufferedMessage, original any) {
	if s.buffered >= maxBufferedMessages {
		s.drop(ctx, original, m.sender, fmt.Sprintf("buffer for passivating entities is full (%d); entity %q", maxBufferedMessages, e.id))
		return
	}
	e.buffer = append(e.buffer, m)
	s.buffered++
}

func (s *shard) dropAllBuffers(ctx actor.Context, reason string) {
	for _, e := range s.entities {
		for _, m := range e.buffer {
			s.drop(ctx, m.original(e.id), m.sender, fmt.Sprintf("%s (entity %q)", reason, e.id))
		}
		e.buffer = nil
	}
	s.buffered = 0
}

// original is the message as the shard received it, for dead-letter events.
func (m bufferedMessage) original(id string) any {
	if m.start {
		return &messages.StartEntity{EntityId: id}
	}
	return &Deliver{EntityID: id, Message: m.message}
}

func (s *shard) ackStart(ctx actor.Context, id string, to *actor.PID) {
	if to == nil {
		return // nobody asked for the ack (Akka's StartEntityAck is dead-letter suppressed too)
	}
	ctx.Send(to, &messages.StartEntityAck{EntityId: id, ShardId: s.shardID})
}

// --- helpers ---

func (s *shard) become(ctx actor.Context, name string, receive actor.ReceiveFunc) {
	if s.state != name {
		ctx.Logger().Debug("shard state change", slog.String("from", s.state), slog.String("to", name),
			slog.String("type", s.typeName), slog.String("shard", s.shardID))
	}
	s.state = name
	s.behavior.Become(receive)
}

func (s *shard) cancelTimers() {
	s.stopIdleCheck()
	if s.cancelResend != nil {
		s.cancelResend()
		s.cancelResend = nil
	}
	for _, cancel := range s.cancels {
		cancel()
	}
	s.cancels = nil
	s.timerGen++
}

// reply answers a query; without a sender the answer has nowhere to go.
func (s *shard) reply(ctx actor.Context, answer any) {
	if ctx.Sender() == nil {
		s.drop(ctx, answer, nil, fmt.Sprintf("%T has no sender to answer", ctx.Message()))
		return
	}
	ctx.Respond(answer)
}

func (s *shard) drop(ctx actor.Context, msg any, sender *actor.PID, reason string) {
	deadletter.Publish(ctx.ActorSystem(), ctx.Self(), msg, sender, s.reason(reason))
}

func (s *shard) reason(reason string) string {
	return fmt.Sprintf("shard %s/%s: %s", s.typeName, s.shardID, reason)
}

func (s *shard) attrs() []any {
	return []any{slog.String("type", s.typeName), slog.String("shard", s.shardID), slog.String("state", s.state)}
}

func (s *shard) stopMessageName() string {
	if s.settings.HandOffStopMessage == nil {
		return "PoisonPill"
	}
	return fmt.Sprintf("%T", s.settings.HandOffStopMessage)
}

// stopMessageOrPoison is what stops an entity: msg if set, else poison.
func stopMessageOrPoison(ctx actor.Context, pid *actor.PID, msg any) {
	if msg == nil {
		ctx.Poison(pid)
		return
	}
	ctx.Send(pid, msg)
}

// tell sends msg to pid as if from sender, so the entity can answer it.
func tell(ctx actor.Context, pid *actor.PID, msg any, sender *actor.PID) {
	if sender == nil {
		ctx.Send(pid, msg)
		return
	}
	ctx.RequestWithCustomSender(pid, msg, sender)
}

// decodeStopMessage unpacks Passivate.StopMessage; nil means "poison".
func decodeStopMessage(p *messages.Passivate) (any, error) {
	a := p.GetStopMessage()
	if a == nil || (a.GetTypeUrl() == "" && len(a.GetValue()) == 0) {
		return nil, nil
	}
	m, err := anypb.UnmarshalNew(a, proto.UnmarshalOptions{})
	if err != nil {
		return nil, fmt.Errorf("stop message %q: %w", a.GetTypeUrl(), err)
	}
	return m, nil
}

// pidKey identifies a PID by address and id, never by pointer.
func pidKey(pid *actor.PID) string {
	return pid.GetAddress() + "\x00" + pid.GetId()
}

func appendPID(to []*actor.PID, pid *actor.PID) []*actor.PID {
	if pid == nil || slices.ContainsFunc(to, pid.Equal) {
		return to
	}
	return append(to, pid)
}

// describeIDs lists entity IDs for a log line, at most 20 of them.
func describeIDs(ids []string) string {
	const most = 20
	if len(ids) <= most {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:most], ", "), len(ids)-most)
}
