package shardactor

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/messages"
)

// Remember-entities (Akka's remember-entities) in the Shard:
//
//   - A shard that starts reads its remembered IDs first (stateRecovering;
//     messages wait) and then starts them through its region with
//     StartEntity, resent until acknowledged. The region routes each by the
//     current extractor, so an entity whose shard changed (a new number of
//     shards) starts on its new shard, which remembers it; an ack from
//     another shard makes this one forget it (Akka's
//     EntitiesMovedToOtherShard).
//   - An entity that is not remembered yet starts only once its ID is
//     written (Akka's rule: what runs is remembered); its messages wait.
//     Writes are batched: what arrives while a write is in flight goes into
//     the next one, so a burst of new entities costs few writes.
//   - An entity stopped by Passivate is forgotten; one that stops otherwise
//     starts again after EntityRestartBackoff; a hand-off keeps them all.

// stateRecovering: reading the remembered entities; everything else waits.
const stateRecovering = "recovering"

// Internal messages of remember-entities.
type (
	rememberedLoaded struct {
		ids []string
		err error
	}
	rememberUpdateDone struct {
		started, stopped []string
		err              error
	}
	rememberRetryWrite   struct{}
	rememberRetryLoad    struct{}
	rememberRecoverBatch struct{ ids []string }
	rememberResendStarts struct{}
	restartEntity        struct{ id string }
)

// rememberBackoff is the pause before a failed store read or write is
// retried.
const rememberBackoff = time.Second

// RecoveryBatches splits remembered IDs into the batches the recovery
// strategy starts, one batch per tick: all at once (EntityRecoveryAll), or
// n at a time (EntityRecoveryConstant).
func RecoveryBatches(ids []string, strategy string, n int) [][]string {
	if len(ids) == 0 {
		return nil
	}
	if strategy != EntityRecoveryConstant || n <= 0 || n >= len(ids) {
		return [][]string{slices.Clone(ids)}
	}
	var out [][]string
	for start := 0; start < len(ids); start += n {
		out = append(out, slices.Clone(ids[start:min(start+n, len(ids))]))
	}
	return out
}

// remembering tells whether this shard remembers its entities.
func (s *shard) remembering() bool {
	return s.settings.RememberEntities && s.settings.RememberEntitiesStore != nil
}

// startRecovery reads the remembered IDs off the actor's goroutine.
func (s *shard) startRecovery(ctx actor.Context) {
	s.become(ctx, stateRecovering, s.recovering)
	store, shardID := s.settings.RememberEntitiesStore, s.shardID
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go func() {
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ids, err := store.GetEntities(rctx, shardID)
		root.Send(self, &rememberedLoaded{ids: ids, err: err})
	}()
}

// recovering: until the remembered IDs are read, messages for entities wait
// (in order) and queries are answered.
func (s *shard) recovering(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *rememberedLoaded:
		if msg.err != nil {
			ctx.Logger().Warn("shard: cannot read the remembered entities; retrying",
				append(s.attrs(), slog.Any("error", msg.err))...)
			s.cancels = append(s.cancels, s.timers.SendOnce(rememberBackoff, ctx.Self(), rememberRetryLoad{}))
			return
		}
		s.remembered = map[string]bool{}
		for _, id := range msg.ids {
			s.remembered[id] = true
		}
		ctx.Logger().Info("shard: remembered entities read", append(s.attrs(), slog.Int("entities", len(msg.ids)))...)
		s.become(ctx, stateActive, s.active)
		s.startPassivation(ctx)
		waiting := s.recoveryStash
		s.recoveryStash = nil
		for _, m := range waiting {
			ctx.RequestWithCustomSender(ctx.Self(), m.message, m.sender)
		}
		for i, batch := range RecoveryBatches(msg.ids, s.settings.EntityRecoveryStrategy, s.settings.EntityRecoveryConstantNumberOfEntities) {
			if i == 0 {
				s.recoverBatch(ctx, batch)
				continue
			}
			s.cancels = append(s.cancels, s.timers.SendOnce(time.Duration(i)*s.settings.EntityRecoveryConstantFrequency,
				ctx.Self(), &rememberRecoverBatch{ids: batch}))
		}
	case rememberRetryLoad:
		s.startRecovery(ctx)
	case *messages.HandOff:
		// Nothing runs yet: the hand-off is done at once.
		s.onHandOff(ctx, msg)
	default:
		if len(s.recoveryStash) >= maxBufferedMessages {
			s.drop(ctx, msg, ctx.Sender(), fmt.Sprintf("too many messages (%d) wait for the remembered entities to be read", maxBufferedMessages))
			return
		}
		s.recoveryStash = append(s.recoveryStash, bufferedMessage{message: msg, sender: ctx.Sender()})
	}
}

// recoverBatch starts remembered entities through the region (the parent),
// so that each starts on the shard the current extractor names.
func (s *shard) recoverBatch(ctx actor.Context, ids []string) {
	if s.unacked == nil {
		s.unacked = map[string]bool{}
	}
	for _, id := range ids {
		s.unacked[id] = true
		ctx.Request(ctx.Parent(), &messages.StartEntity{EntityId: id})
	}
	if s.cancelResend == nil && len(s.unacked) > 0 {
		s.cancelResend = s.timers.SendRepeatedly(s.settings.RetryInterval, s.settings.RetryInterval, ctx.Self(), rememberResendStarts{})
	}
}

func (s *shard) onResendStarts(ctx actor.Context) {
	if len(s.unacked) == 0 {
		if s.cancelResend != nil {
			s.cancelResend()
			s.cancelResend = nil
		}
		return
	}
	ids := make([]string, 0, len(s.unacked))
	for id := range s.unacked {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	ctx.Logger().Debug("shard: resending StartEntity of remembered entities", append(s.attrs(), slog.Int("entities", len(ids)))...)
	for _, id := range ids {
		ctx.Request(ctx.Parent(), &messages.StartEntity{EntityId: id})
	}
}

// onStartEntityAck: a remembered entity started; if on another shard (the
// extractor changed), this shard forgets it.
func (s *shard) onStartEntityAck(ctx actor.Context, ack *messages.StartEntityAck) {
	id := ack.GetEntityId()
	if !s.unacked[id] {
		return // a resent StartEntity's second ack
	}
	delete(s.unacked, id)
	if ack.GetShardId() != s.shardID {
		ctx.Logger().Info("shard: remembered entity now belongs to another shard; forgetting it here",
			append(s.attrs(), slog.String("entity", id), slog.String("now", ack.GetShardId()))...)
		s.queueWrite(ctx, id, false)
	}
}

// awaitStore holds m until entity id is remembered, then starts it.
func (s *shard) awaitStore(ctx actor.Context, id string, m bufferedMessage, original any) {
	if s.buffered >= maxBufferedMessages {
		s.drop(ctx, original, m.sender, fmt.Sprintf("buffer for entities waiting to be remembered is full (%d); entity %q", maxBufferedMessages, id))
		return
	}
	if s.awaiting == nil {
		s.awaiting = map[string][]bufferedMessage{}
	}
	_, queued := s.awaiting[id]
	s.awaiting[id] = append(s.awaiting[id], m)
	s.buffered++
	if !queued {
		s.queueWrite(ctx, id, true)
	}
}

// queueWrite adds id to the next batch (started or stopped) and writes it
// now unless a write is in flight.
func (s *shard) queueWrite(ctx actor.Context, id string, started bool) {
	if s.pendingStarted == nil {
		s.pendingStarted, s.pendingStopped = map[string]bool{}, map[string]bool{}
	}
	if started {
		delete(s.pendingStopped, id)
		s.pendingStarted[id] = true
	} else {
		delete(s.pendingStarted, id)
		s.pendingStopped[id] = true
	}
	s.flushWrites(ctx)
}

func (s *shard) flushWrites(ctx actor.Context) {
	if s.writeInFlight || (len(s.pendingStarted) == 0 && len(s.pendingStopped) == 0) {
		return
	}
	started, stopped := sortedKeys(s.pendingStarted), sortedKeys(s.pendingStopped)
	s.pendingStarted, s.pendingStopped = map[string]bool{}, map[string]bool{}
	s.writeInFlight = true
	store, shardID := s.settings.RememberEntitiesStore, s.shardID
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go func() {
		wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := store.Update(wctx, shardID, started, stopped)
		root.Send(self, &rememberUpdateDone{started: started, stopped: stopped, err: err})
	}()
}

// onUpdateDone starts the entities whose IDs are now remembered, with the
// messages they waited with, in order.
func (s *shard) onUpdateDone(ctx actor.Context, d *rememberUpdateDone) {
	s.writeInFlight = false
	if d.err != nil {
		ctx.Logger().Warn("shard: cannot write the remembered entities; retrying",
			append(s.attrs(), slog.Any("error", d.err), slog.Int("started", len(d.started)), slog.Int("stopped", len(d.stopped)))...)
		// Back into the next batch, unless a newer change replaced them.
		for _, id := range d.started {
			if !s.pendingStopped[id] {
				s.pendingStarted[id] = true
			}
		}
		for _, id := range d.stopped {
			if !s.pendingStarted[id] {
				s.pendingStopped[id] = true
			}
		}
		s.cancels = append(s.cancels, s.timers.SendOnce(rememberBackoff, ctx.Self(), rememberRetryWrite{}))
		return
	}
	for _, id := range d.stopped {
		delete(s.remembered, id)
	}
	for _, id := range d.started {
		s.remembered[id] = true
		waiting := s.awaiting[id]
		delete(s.awaiting, id)
		s.buffered -= len(waiting)
		for _, m := range waiting {
			if m.start {
				s.onStartEntity(ctx, id, &messages.StartEntity{EntityId: id}, m.sender)
				continue
			}
			s.deliverTo(ctx, &Deliver{EntityID: id, Message: m.message}, m.sender)
		}
	}
	s.flushWrites(ctx)
}

// onRememberedEntityStopped: a remembered entity stopped. Passivated: it is
// forgotten. Otherwise it starts again after the back-off.
func (s *shard) onRememberedEntityStopped(ctx actor.Context, e *entity) {
	if e.passivating {
		if len(e.buffer) == 0 {
			s.queueWrite(ctx, e.id, false)
		}
		return
	}
	ctx.Logger().Info("shard: remembered entity stopped unexpectedly; starting it again after the back-off",
		append(s.attrs(), slog.String("entity", e.id), slog.Duration("backoff", s.settings.EntityRestartBackoff))...)
	s.cancels = append(s.cancels, s.timers.SendOnce(s.settings.EntityRestartBackoff, ctx.Self(), &restartEntity{id: e.id}))
}

func (s *shard) onRestartEntity(ctx actor.Context, r *restartEntity) {
	if _, running := s.entities[r.id]; running || !s.remembered[r.id] {
		return // started by a message meanwhile, or forgotten
	}
	if _, err := s.startEntity(ctx, r.id); err != nil {
		ctx.Logger().Error("shard: cannot restart remembered entity", append(s.attrs(), slog.String("entity", r.id), slog.Any("error", err))...)
	}
}

// dropAwaiting reports the messages of entities still waiting to be
// remembered (the shard hands off or stops).
func (s *shard) dropAwaiting(ctx actor.Context, reason string) {
	for id, waiting := range s.awaiting {
		for _, m := range waiting {
			s.drop(ctx, m.original(id), m.sender, fmt.Sprintf("%s (entity %q was waiting to be remembered)", reason, id))
		}
		s.buffered -= len(waiting)
	}
	s.awaiting = nil
	for _, m := range s.recoveryStash {
		s.drop(ctx, m.message, m.sender, reason+" (the remembered entities were still being read)")
	}
	s.recoveryStash = nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
