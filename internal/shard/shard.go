package shard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/behavior"
	"github.com/protoshard/protoshard/internal/deadletters"
	"github.com/protoshard/protoshard/internal/guard"
	"github.com/protoshard/protoshard/internal/metrics"
	"github.com/protoshard/protoshard/internal/shardproto"
	"github.com/protoshard/protoshard/internal/staleness"
	"github.com/protoshard/protoshard/internal/ticker"
	"github.com/protoshard/protoshard/lease"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/shardactor"
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
// entity type typeName (the type name is only used in logs and in the
// lease's name). Entities are spawned from entityProps as children of the
// shard, named EntityName(id). Zero settings fields take their defaults
// (see Settings). routes, the region's routes of this shard, lets the
// region send to running entities directly; nil: every message goes
// through the shard.
func Props(typeName, shardID string, entityProps *actor.Props, settings shardactor.Settings, routes shardproto.EntityRoutes) *actor.Props {
	settings = WithDefaults(settings)
	entityProps, reportsStopped := entityMailboxes(entityProps, &entityShard{typeName: typeName, shardID: shardID})
	opts := []actor.PropsOption{guard.WithMailbox()}
	if settings.EntitySupervisorStrategy != nil {
		opts = append(opts, actor.WithSupervisor(settings.EntitySupervisorStrategy))
	}
	return actor.PropsFromProducer(func() actor.Actor {
		// An unknown policy is logged at Started, where the shard has a
		// logger.
		limit, policyErr := newActiveEntityLimit(settings.ReplacementPolicy, settings.ActiveEntityLimit)
		return &shard{
			typeName:    typeName,
			shardID:     shardID,
			entityProps: entityProps,
			settings:    settings,
			routes:      routes,
			entities:    newEntities(settings.RememberEntities && settings.RememberEntitiesStore != nil, maxBufferedMessages),
			waiting:     newWaitingMessages(maxBufferedMessages),
			automatic:   !settings.RememberEntities,
			limit:       limit,
			policyErr:   policyErr,
			unreported:  !reportsStopped,
		}
	}, opts...)
}

// unreportedOnce: the warning that entity mailboxes cannot be wrapped is
// the same for every shard of the process; it is logged once.
var unreportedOnce sync.Once

// shard is Akka's classic Shard: one receive method per state (see the
// state* names). It moves messages; what becomes of each entity is decided
// by its entities value, and what it passivates by its active-entity limit.
type shard struct {
	typeName    string
	shardID     string
	entityProps *actor.Props
	settings    shardactor.Settings
	routes      shardproto.EntityRoutes // nil: no direct sends

	states   behavior.States
	timers   *scheduler.TimerScheduler
	cancels  []scheduler.CancelFunc
	timerGen int

	entities *entities
	// waiting: what arrived before the shard was ready (acquiringLease,
	// recovering), handled in order once it is.
	waiting waitingMessages
	// stopReason: why the shard stops itself (lease lost, store failure);
	// what it still holds is dropped with it.
	stopReason string

	handOffReplyTo []*actor.PID // handingOff: who is answered ShardStopped
	handOffStarted time.Time    // handingOff: when HandOff arrived

	metrics *metrics.Type
	// reportedLive: the entities counted in metrics; over: the shard is
	// gone (stopped, or replaced by a fresh one at a restart), and so are
	// they.
	reportedLive int
	over         bool

	// unreported: the entities' mailboxes could not be wrapped (see
	// entityMailboxes); what reaches a stopped entity vanishes.
	unreported bool

	// Automatic passivation (see passivation.go). Entities are tracked from
	// their start to their termination or until chosen for passivation.
	automatic       bool                 // off with remember-entities, as in Akka
	limit           activeEntityLimit    // and its replacement policy
	policyErr       error                // unknown Settings.ReplacementPolicy, logged at Started
	cancelIdleCheck scheduler.CancelFunc // the repeating idleCheckTick, while active

	// Remember-entities (see remember.go).
	cancelResend  scheduler.CancelFunc // the StartEntity resend timer
	loadFailures  int                  // reads failed in a row
	writeFailures int                  // writes failed in a row
	lastStoreErr  error                // of the last failed read or write, for dead-letter reasons

	// Lease (see shard_lease.go).
	lease          lease.Lease
	leaseGen       int             // number of the latest acquisition
	leaseMayHold   bool            // an acquisition was asked for and not released since
	leaseOpsTail   chan struct{}   // closed when the last queued lease operation is over
	leaseCtx       context.Context // canceled once the shard no longer wants answers
	cancelLeaseCtx context.CancelFunc
}

// Receive handles the message, then counts the entities started or
// stopped meanwhile.
func (s *shard) Receive(ctx actor.Context) {
	s.receive(ctx)
	live := s.entities.liveCount()
	if s.over {
		live = 0
	}
	if live != s.reportedLive {
		s.metrics.AddEntities(live - s.reportedLive)
		s.reportedLive = live
	}
}

// receive handles what every state handles alike, then the current state.
func (s *shard) receive(ctx actor.Context) {
	// The hot path first: a message for an entity while active, without
	// the behavior's indirection.
	if d, ok := ctx.Message().(*shardproto.Deliver); ok && s.states.Name() == stateActive {
		s.deliverTo(ctx, d, ctx.Sender())
		return
	}
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		s.onStarted(ctx)
		return
	case *actor.Stopping:
		s.closeAllRoutes()
		s.cancelTimers()
		s.dropEverything(ctx, cmp.Or(s.stopReason, "the shard stopped"))
		return
	case *actor.Restarting:
		// A failure of the shard itself: proto.actor stops the children and
		// makes a fresh shard, so what is held here is lost; say so. The
		// fresh shard acquires its own lease.
		s.closeAllRoutes()
		s.cancelTimers()
		s.dropEverything(ctx, "the shard failed and restarts; its entities were stopped")
		s.releaseLease(ctx, "the shard restarts")
		s.over = true
		return
	case *actor.Stopped:
		// Every entity has stopped by now: a hand-off cut short (the lease
		// was lost) is over all the same, and the lease is free to go.
		s.answerHandOff(ctx)
		s.releaseLease(ctx, "the shard stopped")
		s.over = true
		return
	case leaseLost:
		s.onLeaseLost(ctx, msg)
		return
	case shardproto.GetShardStats, *shardproto.GetShardStats:
		s.reply(ctx, &shardproto.ShardStats{ShardID: s.shardID, EntityCount: s.entities.liveCount()})
		return
	case shardproto.GetCurrentShardState, *shardproto.GetCurrentShardState:
		s.reply(ctx, &shardproto.CurrentShardState{ShardID: s.shardID, EntityIDs: s.entities.liveIDs()})
		return
	case shardproto.GetPassivationState, *shardproto.GetPassivationState:
		s.reply(ctx, s.passivationState())
		return
	}
	s.states.Receive(ctx)
}

func (s *shard) onStarted(ctx actor.Context) {
	s.timers = scheduler.NewTimerScheduler(ctx)
	s.metrics = metrics.For(ctx.ActorSystem()).Type(s.typeName)
	s.leaseCtx, s.cancelLeaseCtx = context.WithCancel(context.Background())
	if s.unreported {
		unreportedOnce.Do(func() {
			ctx.Logger().Warn("shard: cannot find the mailbox in the entity props (proto.actor's Props changed); " +
				"messages that reach a stopped entity are discarded without a dead-letter event")
		})
	}
	if s.settings.RememberEntities && s.settings.RememberEntitiesStore == nil {
		ctx.Logger().Error("shard: remember-entities is on but there is no RememberEntitiesStore; entities are not remembered", s.attrs()...)
	}
	if s.settings.UseLease != nil {
		s.become(ctx, stateAcquiringLease, s.acquiringLease)
		s.tryAcquireLease(ctx)
		return
	}
	s.ready(ctx)
}

// ready: the shard holds its lease, if it needs one; it reads its
// remembered entities, if it remembers them, or becomes active.
func (s *shard) ready(ctx actor.Context) {
	if s.remembering() {
		s.startRecovery(ctx)
		return
	}
	s.becomeActive(ctx)
}

// becomeActive starts passivation and handles what waited, in order.
func (s *shard) becomeActive(ctx actor.Context) {
	s.become(ctx, stateActive, s.active)
	s.startPassivation(ctx)
	for _, m := range s.waiting.take() {
		s.receiveActive(ctx, m.message, m.sender)
	}
}

// wait keeps the current message until the shard is ready.
func (s *shard) wait(ctx actor.Context) {
	m := bufferedMessage{message: ctx.Message(), sender: ctx.Sender(), since: time.Now()}
	if err := s.waiting.add(m); err != nil {
		s.dropError(ctx, m.message, m.sender, fmt.Errorf("%w (%d, state %s)", err, maxBufferedMessages, s.states.Name()))
	}
}

// stopNow stops the shard and its entities at once; what it holds is
// dropped with reason when it stops.
func (s *shard) stopNow(ctx actor.Context, reason string) {
	s.closeAllRoutes()
	s.stopReason = reason
	s.cancelTimers()
	s.become(ctx, stateStopped, s.stopped)
	ctx.Stop(ctx.Self())
}

// --- states ---

func (s *shard) active(ctx actor.Context) {
	s.receiveActive(ctx, ctx.Message(), ctx.Sender())
}

// receiveActive is the active state's receive, with the message and its
// sender given, so that messages that waited are handled alike.
func (s *shard) receiveActive(ctx actor.Context, message any, sender *actor.PID) {
	switch msg := message.(type) {
	case *shardproto.Deliver:
		s.deliverTo(ctx, msg, sender)
	case shardproto.Deliver:
		s.deliverTo(ctx, &msg, sender)
	case *messages.StartEntity:
		s.onStartEntity(ctx, msg.GetEntityId(), msg, sender)
	case *messages.StartEntityAck:
		s.onStartEntityAck(ctx, msg)
	case *rememberUpdateDone:
		s.onUpdateDone(ctx, msg)
	case rememberRetryWrite:
		s.onRetryWrite(ctx)
	case *rememberRecoverBatch:
		s.recoverBatch(ctx, msg.ids)
	case rememberResendStarts:
		s.onResendStarts(ctx)
	case *restartEntity:
		s.onRestartEntity(ctx, msg)
	case *rememberedLoaded, rememberRetryLoad, leaseAcquireResult, leaseRetry:
		// a late answer of a read or an acquisition that is over
	case *messages.Passivate:
		s.onPassivate(ctx, msg, sender)
	case *actor.Terminated:
		s.onEntityTerminated(ctx, msg)
	case *messages.HandOff:
		s.onHandOff(ctx, msg, sender)
	case *shardproto.SetActiveEntityLimit:
		s.onSetActiveEntityLimit(ctx, msg, sender)
	case shardproto.SetActiveEntityLimit:
		s.onSetActiveEntityLimit(ctx, &msg, sender)
	case idleCheckTick:
		s.onIdleCheck(ctx)
	case handOffWarning, handOffForceStop:
		// stale timer of a hand-off that is over
	default:
		s.drop(ctx, msg, sender, fmt.Sprintf("unexpected message %T in state %s", msg, s.states.Name()))
	}
}

func (s *shard) handingOff(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Terminated:
		if _, _, _, err := s.entities.terminated(msg.Who); err == nil && s.entities.liveCount() == 0 {
			s.finishHandOff(ctx)
		}
	case *messages.HandOff:
		if msg.GetShard() != s.shardID {
			s.drop(ctx, msg, ctx.Sender(), fmt.Sprintf("HandOff for shard %q sent to shard %q", msg.GetShard(), s.shardID))
			return
		}
		// Akka ignores a second HandOff; answering it as well costs nothing
		// and spares a retrying RebalanceWorker a time-out.
		ctx.Logger().Debug("shard: HandOff received during an existing hand-off; it will be answered too", s.attrs()...)
		s.handOffReplyTo = appendPID(s.handOffReplyTo, ctx.Sender())
	case handOffWarning:
		if msg.gen == s.timerGen && s.entities.liveCount() > 0 {
			ctx.Logger().Warn(fmt.Sprintf("shard: %d entities not stopped after %s; maybe the hand-off stop message %s is not handled? They are stopped by force after %s",
				s.entities.liveCount(), handOffWarningAfter, s.stopMessageName(), entityHandOffTimeout(s.settings)),
				append(s.attrs(), slog.String("entities", describeIDs(s.entities.liveIDs())))...)
		}
	case handOffForceStop:
		if msg.gen != s.timerGen || s.entities.liveCount() == 0 {
			return
		}
		ctx.Logger().Warn(fmt.Sprintf("shard: hand-off stop message %s not handled by %d entities after %s; stopping them",
			s.stopMessageName(), s.entities.liveCount(), entityHandOffTimeout(s.settings)),
			append(s.attrs(), slog.String("entities", describeIDs(s.entities.liveIDs())))...)
		for _, pid := range s.entities.livePIDs() {
			ctx.Stop(pid)
		}
	case *messages.Passivate:
		// The hand-off stops every entity anyway.
		ctx.Logger().Debug("shard: Passivate during hand-off; the entity is being stopped already", s.attrs()...)
	case idleCheckTick:
		// sent before the timer was cancelled at HandOff
	case *rememberUpdateDone, rememberRetryWrite, *rememberRecoverBatch, rememberResendStarts, *restartEntity,
		*rememberedLoaded, rememberRetryLoad, *messages.StartEntityAck, leaseAcquireResult, leaseRetry:
		// Remember-entities and lease bookkeeping: the entities stay
		// remembered and start again at the shard's next home.
	case *shardproto.SetActiveEntityLimit, shardproto.SetActiveEntityLimit:
		// The region sends limits to all its shards; this one is stopping
		// every entity anyway, so there is nothing to apply and nothing lost.
		ctx.Logger().Debug("shard: SetActiveEntityLimit during hand-off; ignored", s.attrs()...)
	default:
		s.drop(ctx, msg, ctx.Sender(), fmt.Sprintf("shard %s is handing off", s.shardID))
	}
}

func (s *shard) stopped(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Terminated, handOffWarning, handOffForceStop, idleCheckTick, *shardproto.SetActiveEntityLimit, shardproto.SetActiveEntityLimit,
		*rememberUpdateDone, rememberRetryWrite, *rememberRecoverBatch, rememberResendStarts, *restartEntity,
		*rememberedLoaded, rememberRetryLoad, *messages.StartEntityAck, leaseAcquireResult, leaseRetry:
		// Bookkeeping for entities that are gone: nothing to apply, and
		// nothing meant for an entity is lost.
	default:
		s.drop(ctx, msg, ctx.Sender(), cmp.Or(s.stopReason, fmt.Sprintf("shard %s has stopped", s.shardID)))
	}
}

// --- active ---

// deliverTo hands d to its entity as if from sender, starting the entity
// if needed. It is the hot path; what is rare is in deliver and
// dropBadDeliver.
func (s *shard) deliverTo(ctx actor.Context, d *shardproto.Deliver, sender *actor.PID) {
	if d == nil || d.EntityID == "" || d.Message == nil {
		s.dropBadDeliver(ctx, d, sender)
		return
	}
	if s.memberStale(ctx, d, sender) {
		return
	}
	if start, ok := d.Message.(*messages.StartEntity); ok {
		// As Akka: StartEntity works both as is and inside an envelope.
		s.onStartEntity(ctx, start.GetEntityId(), d, sender)
		return
	}
	if s.automatic && countsAsActivity(d.Message) {
		// May choose entities to passivate, even (a policy may, if ours
		// never do) this one: then the message waits for its next
		// incarnation like any message for a passivating entity.
		s.touch(ctx, d.EntityID)
	}
	if pid, ok := s.entities.activePID(d.EntityID); ok {
		shardproto.Tell(ctx, pid, d.Message, sender, d.Header)
		d.Pending.Release()
		s.openRoute(d.EntityID, pid)
		return
	}
	s.deliver(ctx, d.EntityID, bufferedMessage{message: d.Message, sender: sender, pending: d.Pending, header: d.Header}, d)
}

// errMemberStale is why a shard drops what it would deliver while this
// node's membership is stale; a deadletter.ErrMemberRemoved, as the
// region's drops for the same reason.
var errMemberStale = fmt.Errorf("this node has not confirmed its membership within the failure detection timeout "+
	"(it was paused or cut off): the others may have removed it and started this shard elsewhere: %w", deadletter.ErrMemberRemoved)

// memberStale drops msg, and reports true, while this node may have been
// removed without knowing it yet (Settings.MemberStale): a message that
// waited in the shard's mailbox through a pause must neither start an
// entity nor reach one, since the shard may run elsewhere by now.
func (s *shard) memberStale(ctx actor.Context, msg any, sender *actor.PID) bool {
	if s.settings.MemberStale == nil || !s.settings.MemberStale() {
		return false
	}
	s.dropError(ctx, msg, sender, errMemberStale)
	return true
}

// deliver does what the entities decide with m for entity id: send it,
// start the entity first, or hold it. original is what is reported if it
// must be dropped.
func (s *shard) deliver(ctx actor.Context, id string, m bufferedMessage, original any) {
	if m.since.IsZero() {
		m.since = time.Now() // a message held again keeps its first wait's start
	}
	decision, pid, err := s.entities.deliver(id, m)
	switch {
	case errors.Is(err, errHeldFull):
		s.dropError(ctx, original, m.sender, fmt.Errorf("buffer for entities that cannot take messages yet is full (%d); entity %q (%s): %w",
			maxBufferedMessages, id, s.entities.state(id), err))
	case err != nil:
		s.drop(ctx, original, m.sender, fmt.Sprintf("cannot deliver to entity %q: %v", id, err))
	case decision == sendNow && m.start:
		s.ackStart(ctx, id, m.sender)
	case decision == sendNow:
		shardproto.Tell(ctx, pid, m.message, m.sender, m.header)
		m.pending.Release()
	case decision == startNow:
		s.startEntity(ctx, id, []bufferedMessage{m})
	case decision == held:
		s.flushWrites(ctx)
	}
}

// startEntity spawns entity id, records it as active, tracks it for
// passivation whatever its first message (or an entity started by a
// protocol message would never be passivated), and delivers, in order,
// what the entities held for it and then msgs. It reports whether the
// entity runs; if not, every message is dropped with the reason.
func (s *shard) startEntity(ctx actor.Context, id string, msgs []bufferedMessage) bool {
	pid, err := s.spawnEntity(ctx, id)
	if err != nil {
		held, restartAgain, failedErr := s.entities.startFailed(id, err)
		if failedErr != nil {
			ctx.Logger().Error("shard: failed start refused", append(s.attrs(), slog.String("entity", id), slog.Any("error", failedErr))...)
		}
		for _, m := range append(held, msgs...) {
			s.dropError(ctx, m.original(id), m.sender, fmt.Errorf("cannot start entity %q: %w", id, err))
		}
		if restartAgain {
			s.restartEntityLater(ctx, id)
		}
		return false
	}
	waited, err := s.entities.started(id, pid)
	if err != nil {
		// The entities refused: a bug. No child runs untracked.
		ctx.Logger().Error("shard: started entity refused; stopping it", append(s.attrs(), slog.String("entity", id), slog.Any("error", err))...)
		ctx.Stop(pid)
		for _, m := range msgs {
			s.drop(ctx, m.original(id), m.sender, fmt.Sprintf("cannot start entity %q: %v", id, err))
		}
		return false
	}
	ctx.Logger().Debug("shard: started entity", append(s.attrs(), slog.String("entity", id))...)
	s.touch(ctx, id)
	for _, m := range append(waited, msgs...) {
		s.deliver(ctx, id, m, m.original(id))
	}
	return true
}

func (s *shard) dropBadDeliver(ctx actor.Context, d *shardproto.Deliver, sender *actor.PID) {
	switch {
	case d == nil:
		s.drop(ctx, d, sender, "nil Deliver")
	case d.EntityID == "":
		s.drop(ctx, d, sender, fmt.Sprintf("empty entity ID (message %T)", d.Message))
	default:
		s.drop(ctx, d, sender, fmt.Sprintf("nil message for entity %q", d.EntityID))
	}
}

// onStartEntity starts the entity if needed and acknowledges to sender;
// original is what is reported if it must be dropped.
func (s *shard) onStartEntity(ctx actor.Context, id string, original any, sender *actor.PID) {
	if id == "" {
		s.drop(ctx, original, sender, "StartEntity with an empty entity ID")
		return
	}
	if s.memberStale(ctx, original, sender) {
		return
	}
	// As in Akka, StartEntity of a running entity is a use of it.
	s.touch(ctx, id)
	s.deliver(ctx, id, bufferedMessage{sender: sender, start: true}, original)
}

func (s *shard) onPassivate(ctx actor.Context, p *messages.Passivate, sender *actor.PID) {
	id, ok := s.entities.entityOf(sender)
	if !ok {
		s.drop(ctx, p, sender, fmt.Sprintf("Passivate from %v, which is not an entity of shard %s (an entity must send it to its parent with ctx.Request)",
			sender, s.shardID))
		return
	}
	stop, decodeErr := decodeStopMessage(p)
	pid, err := s.entities.passivate(id)
	switch {
	case errors.Is(err, errAlreadyPassivate):
		ctx.Logger().Debug("shard: passivation already in progress; stop message not sent again",
			append(s.attrs(), slog.String("entity", id))...)
		return
	case err != nil:
		ctx.Logger().Error("shard: Passivate refused", append(s.attrs(), slog.String("entity", id), slog.Any("error", err))...)
		return
	}
	if decodeErr != nil {
		ctx.Logger().Warn("shard: cannot decode the Passivate stop message; poisoning the entity instead",
			append(s.attrs(), slog.String("entity", id), slog.Any("error", decodeErr))...)
		stop = nil
	}
	ctx.Logger().Debug("shard: passivating entity", append(s.attrs(), slog.String("entity", id))...)
	s.closeRoute(id)
	stopMessageOrPoison(ctx, pid, stop)
}

func (s *shard) onEntityTerminated(ctx actor.Context, t *actor.Terminated) {
	id, next, waited, err := s.entities.terminated(t.Who)
	if err != nil {
		ctx.Logger().Debug("shard: Terminated of an unknown actor", append(s.attrs(), slog.Any("who", t.Who))...)
		return
	}
	s.closeRoute(id) // it may have stopped by itself
	s.limit.remove(id)
	switch next {
	case entityGone:
		ctx.Logger().Debug("shard: entity stopped", append(s.attrs(), slog.String("entity", id))...)
	case writeStop:
		ctx.Logger().Debug("shard: entity passivated; forgetting it", append(s.attrs(), slog.String("entity", id))...)
		s.flushWrites(ctx)
	case restartAfterBackoff:
		ctx.Logger().Debug("shard: remembered entity stopped unexpectedly; starting it again after the back-off",
			append(s.attrs(), slog.String("entity", id), slog.Duration("backoff", s.settings.EntityRestartBackoff))...)
		s.restartEntityLater(ctx, id)
	case restartHeld:
		// Messages arrived between Passivate and the termination: they go
		// to a new incarnation, in their order, as in Akka.
		ctx.Logger().Debug("shard: entity passivated; starting it again for its buffered messages",
			append(s.attrs(), slog.String("entity", id), slog.Int("messages", len(waited)))...)
		s.startEntity(ctx, id, waited)
	}
}

// restartEntityLater starts the remembered entity id again after the
// entity-restart back-off (onRestartEntity).
func (s *shard) restartEntityLater(ctx actor.Context, id string) {
	s.cancels = append(s.cancels, s.timers.SendOnce(s.settings.EntityRestartBackoff, ctx.Self(), &restartEntity{id: id}))
}

func (s *shard) onHandOff(ctx actor.Context, h *messages.HandOff, sender *actor.PID) {
	if h.GetShard() != s.shardID {
		s.drop(ctx, h, sender, fmt.Sprintf("HandOff for shard %q sent to shard %q", h.GetShard(), s.shardID))
		return
	}
	s.handOffReplyTo = appendPID(nil, sender)
	s.handOffStarted = time.Now()
	// No automatic passivation, no remembering once the shard hands off:
	// every entity is stopped with the hand-off stop message, and stays
	// remembered for the shard's next home.
	s.cancelTimers()
	s.closeAllRoutes()
	pids, held := s.entities.handOff()
	// What is held for an entity has no next incarnation here: it goes
	// back to the region, which forwards it to the shard's new home.
	s.returnToRegion(ctx, held, s.waiting.take())
	if len(pids) == 0 {
		ctx.Logger().Debug("shard: HandOff with no entities", s.attrs()...)
		s.finishHandOff(ctx)
		return
	}
	ctx.Logger().Debug("shard: HandOff; stopping entities", append(s.attrs(), slog.Int("entities", len(pids)))...)
	for _, pid := range pids {
		stopMessageOrPoison(ctx, pid, s.settings.HandOffStopMessage)
	}
	s.become(ctx, stateHandingOff, s.handingOff)
	force := entityHandOffTimeout(s.settings)
	// The warning is only useful before the force-stop (Akka always sends it
	// after 5 s, which with a short handoff-timeout comes after the
	// force-stop).
	if force > handOffWarningAfter {
		s.cancels = append(s.cancels, s.timers.SendOnce(handOffWarningAfter, ctx.Self(), handOffWarning{gen: s.timerGen}))
	}
	s.cancels = append(s.cancels, s.timers.SendOnce(force, ctx.Self(), handOffForceStop{gen: s.timerGen}))
}

// returnToRegion hands held (messages for entities) and waited (messages
// that reached the shard before it was ready) back to the region, in that
// order, as shardproto.HandOffReturned. What is no entity's message is dropped.
func (s *shard) returnToRegion(ctx actor.Context, held []heldMessage, waited []bufferedMessage) {
	out := &shardproto.HandOffReturned{Shard: s.shardID}
	for _, h := range held {
		msg := h.m.message
		if h.m.start {
			msg = &messages.StartEntity{EntityId: h.id}
		}
		out.Messages = append(out.Messages, shardproto.ReturnedMessage{EntityID: h.id, Message: msg, Sender: h.m.sender, Pending: h.m.pending, Header: h.m.header})
	}
	for _, m := range waited {
		switch msg := m.message.(type) {
		case *shardproto.Deliver:
			if msg != nil && msg.EntityID != "" && msg.Message != nil {
				out.Messages = append(out.Messages, shardproto.ReturnedMessage{EntityID: msg.EntityID, Message: msg.Message, Sender: m.sender, Pending: msg.Pending, Header: msg.Header})
				continue
			}
		case *messages.StartEntity:
			if msg.GetEntityId() != "" {
				out.Messages = append(out.Messages, shardproto.ReturnedMessage{EntityID: msg.GetEntityId(), Message: msg, Sender: m.sender})
				continue
			}
		}
		s.drop(ctx, m.message, m.sender, fmt.Sprintf("shard %s is handing off before it was ready (state %s)", s.shardID, s.states.Name()))
	}
	if len(out.Messages) == 0 {
		return
	}
	if ctx.Parent() == nil {
		for _, r := range out.Messages {
			s.drop(ctx, r.Message, r.Sender, fmt.Sprintf("shard %s is handing off and has no region to return the message for entity %q to", s.shardID, r.EntityID))
		}
		return
	}
	ctx.Request(ctx.Parent(), out) // the region checks that it comes from its shard
}

// finishHandOff answers ShardStopped to the hand-off senders and stops the
// shard.
func (s *shard) finishHandOff(ctx actor.Context) {
	ctx.Logger().Debug("shard: hand-off done; all entities stopped", s.attrs()...)
	s.metrics.HandOff(time.Since(s.handOffStarted))
	if len(s.handOffReplyTo) == 0 {
		deadletters.Publish(ctx.ActorSystem(), nil, &messages.ShardStopped{Shard: s.shardID}, ctx.Self(), s.reason("HandOff had no sender to answer ShardStopped to"))
	}
	s.answerHandOff(ctx)
	s.stopNow(ctx, "")
}

// answerHandOff sends ShardStopped to whoever sent HandOff, once.
func (s *shard) answerHandOff(ctx actor.Context) {
	for _, to := range s.handOffReplyTo {
		ctx.Send(to, &messages.ShardStopped{Shard: s.shardID})
	}
	s.handOffReplyTo = nil
}

// --- automatic passivation ---

// startPassivation starts the idle check, in stateActive.
func (s *shard) startPassivation(ctx actor.Context) {
	if s.policyErr != nil {
		ctx.Logger().Error("shard: unknown replacement policy; using "+shardactor.LeastRecentlyUsedPolicy,
			append(s.attrs(), slog.Any("error", s.policyErr))...)
	}
	if !s.automatic {
		ctx.Logger().Debug("shard: entities are not passivated automatically because remember-entities is on", s.attrs()...)
		return
	}
	if !idlePassivation(s.settings) {
		return
	}
	// A repeating timer, not proto.actor's ReceiveTimeout: that one fires
	// once, and any message (queries included) resets it.
	interval := idleCheckInterval(s.settings.PassivationIdleTimeout)
	s.cancelIdleCheck = ticker.SendRepeatedly(ctx, interval, interval, ctx.Self(), idleCheckTick{})
}

func (s *shard) stopIdleCheck() {
	if s.cancelIdleCheck != nil {
		s.cancelIdleCheck()
		s.cancelIdleCheck = nil
	}
}

// touch records a use of entity id, if it is active, and passivates the
// entities the replacement policy chooses beyond the limit. It runs on
// every user message, so it reads no clock: onIdleCheck does.
func (s *shard) touch(ctx actor.Context, id string) {
	if !s.automatic || !s.entities.markUsed(id) {
		return
	}
	for _, chosen := range s.limit.touch(id) {
		s.passivateAutomatically(ctx, chosen, passivateLimit)
	}
}

func (s *shard) onIdleCheck(ctx actor.Context) {
	if !s.automatic || !idlePassivation(s.settings) {
		return // a tick of a timer that was never meant to run
	}
	s.foldDirectUse()
	for _, id := range s.entities.idle(time.Now(), s.settings.PassivationIdleTimeout) {
		s.passivateAutomatically(ctx, id, passivateIdle)
	}
}

func (s *shard) onSetActiveEntityLimit(ctx actor.Context, m *shardproto.SetActiveEntityLimit, sender *actor.PID) {
	switch {
	case m == nil:
		s.drop(ctx, m, sender, "nil SetActiveEntityLimit")
		return
	case m.Limit < 0:
		s.drop(ctx, m, sender, fmt.Sprintf("negative active-entity limit %d", m.Limit))
		return
	case !s.automatic:
		ctx.Logger().Debug("shard: SetActiveEntityLimit ignored: remember-entities is on",
			append(s.attrs(), slog.Int("limit", m.Limit))...)
		return
	}
	if m.Limit > 0 {
		s.closeAllRoutes() // the policy orders entities by each use: see shardproto.EntityRoutes
	}
	chosen := s.limit.setLimit(m.Limit, s.entities.activeUses)
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
	s.limit.remove(id)
	pid, err := s.entities.passivate(id)
	switch {
	case errors.Is(err, errAlreadyPassivate):
		ctx.Logger().Debug("shard: entity already passivating; not passivated again",
			append(s.attrs(), slog.String("entity", id), slog.String("reason", reason))...)
		return
	case err != nil:
		// Tracking and entities are kept together, so this is a bug; say so
		// rather than passivate nothing silently.
		ctx.Logger().Error("shard: automatic passivation of an entity that is not running",
			append(s.attrs(), slog.String("entity", id), slog.String("reason", reason), slog.Any("error", err))...)
		return
	}
	ctx.Logger().Debug("shard: passivating entity automatically",
		append(s.attrs(), slog.String("entity", id), slog.String("reason", reason))...)
	s.closeRoute(id)
	stopMessageOrPoison(ctx, pid, s.settings.HandOffStopMessage)
}

func (s *shard) passivationState() *shardproto.PassivationState {
	st := &shardproto.PassivationState{ShardID: s.shardID, Active: []string{}}
	if !s.automatic {
		return st
	}
	st.Limit = s.limit.limit()
	if idlePassivation(s.settings) {
		st.IdleTimeout = s.settings.PassivationIdleTimeout
	}
	st.Active = s.limit.order(s.entities.activeUses)
	return st
}

// --- entities ---

// spawnEntity spawns the entity child id, unless this node's membership is
// stale (Settings.MemberStale): every path to an entity's start (a
// message, StartEntity, a remembered entity's write, recovery or restart
// back-off, a restart for messages held while it passivated) comes here.
func (s *shard) spawnEntity(ctx actor.Context, id string) (*actor.PID, error) {
	if s.entityProps == nil {
		return nil, errors.New("the shard has no entity props")
	}
	// No ctx.Watch: proto.actor tells the parent of every child's
	// termination already. A watch would add a second Terminated for the
	// same PID, and PIDs carry no incarnation, so that duplicate would look
	// like the termination of the entity's next incarnation.
	pid, err := spawn(ctx, s.settings.MemberStale, s.entityProps, EntityName(id))
	switch {
	case errors.Is(err, staleness.ErrStale):
		// Expected, for every entity due to start, until this node hears
		// of its removal or confirms its membership again; the messages
		// are dead letters with the reason.
		ctx.Logger().Debug("shard: not starting entity", append(s.attrs(), slog.String("entity", id), slog.Any("error", err))...)
		return nil, err
	case err != nil:
		ctx.Logger().Error("shard: cannot start entity", append(s.attrs(), slog.String("entity", id), slog.Any("error", err))...)
		return nil, err
	}
	return pid, nil
}

// spawn is staleness.SpawnNamed that turns a panic of the entity producer
// (user code, called synchronously by proto.actor) into an error.
func spawn(ctx actor.Context, stale func() bool, props *actor.Props, name string) (pid *actor.PID, err error) {
	defer func() {
		if r := recover(); r != nil {
			pid, err = nil, fmt.Errorf("spawning the entity panicked: %v", r)
		}
	}()
	pid, err = staleness.SpawnNamed(ctx, stale, props, name)
	if err != nil {
		return nil, err // with ErrNameExists, pid is the other actor
	}
	return pid, nil
}

// dropEverything drops what the shard holds and what waits for it: it
// stops, hands off or restarts.
func (s *shard) dropEverything(ctx actor.Context, reason string) {
	for _, h := range s.entities.takeAllHeld() {
		s.drop(ctx, h.m.original(h.id), h.m.sender, fmt.Sprintf("%s (message for entity %q, %s)", reason, h.id, s.entities.state(h.id)))
	}
	for _, m := range s.waiting.take() {
		s.drop(ctx, m.message, m.sender, fmt.Sprintf("%s (before the shard was ready)", reason))
	}
}

func (s *shard) ackStart(ctx actor.Context, id string, to *actor.PID) {
	if to == nil {
		return // nobody asked for the ack (Akka's StartEntityAck is dead-letter suppressed too)
	}
	ctx.Send(to, &messages.StartEntityAck{EntityId: id, ShardId: s.shardID})
}

// --- helpers ---

func (s *shard) become(ctx actor.Context, name string, receive actor.ReceiveFunc) {
	s.states.Become(ctx, "shard", name, receive, slog.String("type", s.typeName), slog.String("shard", s.shardID))
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
	s.dropError(ctx, msg, sender, errors.New(reason))
}

// dropError is drop with a typed reason (see deadletter's reason classes).
func (s *shard) dropError(ctx actor.Context, msg any, sender *actor.PID, reason error) {
	if d, ok := msg.(*shardproto.Deliver); ok && d != nil {
		d.Pending.Release()
	}
	deadletters.PublishError(ctx.ActorSystem(), ctx.Self(), msg, sender, fmt.Errorf("shard %s/%s: %w", s.typeName, s.shardID, reason))
}

func (s *shard) reason(reason string) string {
	return fmt.Sprintf("shard %s/%s: %s", s.typeName, s.shardID, reason)
}

func (s *shard) attrs() []any {
	return []any{slog.String("type", s.typeName), slog.String("shard", s.shardID), slog.String("state", s.states.Name())}
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
