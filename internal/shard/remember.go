package shard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/ticker"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/shardactor"
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
//   - A store error is retried after a back-off, and a message that waits
//     for the store longer than 3 × UpdatingStateTimeout is dropped with a
//     dead-letter event. An error that wraps ErrPermanent is not retried:
//     the messages of the entities concerned are dropped with it as reason
//     and the shard stops (Akka's shard stops when its store fails); its
//     region starts it again after ShardFailureBackoff.
//
// The entities value (entities.go) keeps each entity's state and decides;
// this file does the reads and writes and moves the messages.

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

// rememberBackoff is the pause before the first retry of a failed store
// read or write; it doubles with every failure in a row.
const rememberBackoff = time.Second

// rememberRetryDelay is the pause before retry number attempt (from 1) of
// a failed store read or write: rememberBackoff doubling, at most ceiling
// (the operation's own timeout, so that a message's wait for the store,
// bounded by a few timeouts, sees a few retries).
func rememberRetryDelay(attempt int, ceiling time.Duration) time.Duration {
	d := rememberBackoff << min(max(attempt-1, 0), 16)
	if ceiling > 0 && d > ceiling {
		return ceiling
	}
	return d
}

// recoveryBatches splits remembered IDs into the batches the recovery
// strategy starts, one batch per tick: all at once (EntityRecoveryAll), or
// n at a time (EntityRecoveryConstant).
func recoveryBatches(ids []string, strategy string, n int) [][]string {
	if len(ids) == 0 {
		return nil
	}
	if strategy != shardactor.EntityRecoveryConstant || n <= 0 || n >= len(ids) {
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

// startRecovery reads the remembered IDs (stateRecovering).
func (s *shard) startRecovery(ctx actor.Context) {
	s.become(ctx, stateRecovering, s.recovering)
	s.loadRemembered(ctx)
}

// loadRemembered reads the remembered IDs off the actor's goroutine.
func (s *shard) loadRemembered(ctx actor.Context) {
	store, shardID, timeout := s.settings.RememberEntitiesStore, s.shardID, s.settings.WaitingForStateTimeout
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go func() {
		rctx, cancel := context.WithTimeout(context.Background(), timeout)
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
		s.onRememberedLoaded(ctx, msg)
	case rememberRetryLoad:
		s.expireWaiting(ctx)
		s.loadRemembered(ctx)
	case *messages.HandOff:
		// Nothing runs yet: the hand-off is done at once.
		s.onHandOff(ctx, msg, ctx.Sender())
	default:
		s.wait(ctx)
	}
}

func (s *shard) onRememberedLoaded(ctx actor.Context, msg *rememberedLoaded) {
	if msg.err != nil {
		s.lastStoreErr = msg.err
		if errors.Is(msg.err, shardactor.ErrPermanent) {
			s.failForGood(ctx, "cannot read the remembered entities", msg.err)
			return
		}
		s.loadFailures++
		delay := rememberRetryDelay(s.loadFailures, s.settings.WaitingForStateTimeout)
		ctx.Logger().Warn("shard: cannot read the remembered entities; retrying",
			append(s.attrs(), slog.Any("error", msg.err), slog.Duration("retryIn", delay))...)
		s.cancels = append(s.cancels, s.timers.SendOnce(delay, ctx.Self(), rememberRetryLoad{}))
		return
	}
	s.loadFailures = 0
	if err := s.entities.recovered(msg.ids); err != nil {
		// Nothing is known before the read: a bug.
		ctx.Logger().Error("shard: remembered entities refused", append(s.attrs(), slog.Any("error", err))...)
	}
	ctx.Logger().Debug("shard: remembered entities read", append(s.attrs(), slog.Int("entities", len(msg.ids)))...)
	s.becomeActive(ctx)
	if s.states.Name() != stateActive {
		return // what waited stopped the shard
	}
	for i, batch := range recoveryBatches(msg.ids, s.settings.EntityRecoveryStrategy, s.settings.EntityRecoveryConstantNumberOfEntities) {
		if i == 0 {
			s.recoverBatch(ctx, batch)
			continue
		}
		s.cancels = append(s.cancels, s.timers.SendOnce(time.Duration(i)*s.settings.EntityRecoveryConstantFrequency,
			ctx.Self(), &rememberRecoverBatch{ids: batch}))
	}
}

// expireWaiting drops what has waited for the store longer than its bound.
func (s *shard) expireWaiting(ctx actor.Context) {
	bound := storeWaitBound(s.settings)
	for _, m := range s.waiting.expire(time.Now(), bound) {
		s.drop(ctx, m.message, m.sender, fmt.Sprintf("waited longer than %s for the remembered entities to be read (%v)", bound, s.lastStoreErr))
	}
}

// failForGood stops the shard after the store refused a read or write for
// good, as Akka's shard stops on a store failure: its region starts it
// again after ShardFailureBackoff, and it reads its entities anew.
func (s *shard) failForGood(ctx actor.Context, what string, err error) {
	ctx.Logger().Error("shard: "+what+"; the store will not accept it. Stopping the shard; its region starts it again after the shard-failure back-off",
		append(s.attrs(), slog.Any("error", err), slog.Duration("backoff", s.settings.ShardFailureBackoff))...)
	s.stopNow(ctx, fmt.Sprintf("%s: %v; the shard stopped", what, err))
}

// recoverBatch starts remembered entities through the region (the parent),
// so that each starts on the shard the current extractor names.
func (s *shard) recoverBatch(ctx actor.Context, ids []string) {
	s.entities.startRequested(ids)
	for _, id := range ids {
		ctx.Request(ctx.Parent(), &messages.StartEntity{EntityId: id})
	}
	if s.cancelResend == nil && len(ids) > 0 {
		s.cancelResend = ticker.SendRepeatedly(ctx, s.settings.RetryInterval, s.settings.RetryInterval, ctx.Self(), rememberResendStarts{})
	}
}

func (s *shard) onResendStarts(ctx actor.Context) {
	ids := s.entities.unackedIDs()
	if len(ids) == 0 {
		if s.cancelResend != nil {
			s.cancelResend()
			s.cancelResend = nil
		}
		return
	}
	ctx.Logger().Debug("shard: resending StartEntity of remembered entities", append(s.attrs(), slog.Int("entities", len(ids)))...)
	for _, id := range ids {
		ctx.Request(ctx.Parent(), &messages.StartEntity{EntityId: id})
	}
}

// onStartEntityAck: a remembered entity started; if on another shard (the
// extractor changed), this shard forgets it.
func (s *shard) onStartEntityAck(ctx actor.Context, ack *messages.StartEntityAck) {
	if _, moved := s.entities.acked(ack.GetEntityId(), ack.GetShardId(), s.shardID); moved {
		ctx.Logger().Debug("shard: remembered entity now belongs to another shard; forgetting it here",
			append(s.attrs(), slog.String("entity", ack.GetEntityId()), slog.String("now", ack.GetShardId()))...)
		s.flushWrites(ctx)
	}
}

// flushWrites writes what the entities queued, unless a write is in flight
// or backing off: what is queued meanwhile goes into the next write, so a
// burst of new entities costs few writes.
func (s *shard) flushWrites(ctx actor.Context) {
	if !s.remembering() {
		return
	}
	started, stopped, ok := s.entities.nextWrite()
	if !ok {
		return
	}
	store, shardID, timeout := s.settings.RememberEntitiesStore, s.shardID, s.settings.UpdatingStateTimeout
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go func() {
		wctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		err := store.Update(wctx, shardID, started, stopped)
		root.Send(self, &rememberUpdateDone{started: started, stopped: stopped, err: err})
	}()
}

// onUpdateDone starts the entities whose IDs are now remembered, with the
// messages they waited with, in order. A failed write is tried again after
// a back-off; one the store refuses for good stops the shard.
func (s *shard) onUpdateDone(ctx actor.Context, d *rememberUpdateDone) {
	if d.err != nil {
		s.lastStoreErr = d.err
		if errors.Is(d.err, shardactor.ErrPermanent) {
			for _, h := range s.entities.writeFailedForGood() {
				s.drop(ctx, h.m.original(h.id), h.m.sender, fmt.Sprintf("the remember-entities store cannot remember entity %q: %v", h.id, d.err))
			}
			s.failForGood(ctx, "cannot write the remembered entities", d.err)
			return
		}
		if err := s.entities.writeFailed(); err != nil {
			ctx.Logger().Error("shard: write failure refused", append(s.attrs(), slog.Any("error", err))...)
			return
		}
		s.writeFailures++
		delay := rememberRetryDelay(s.writeFailures, s.settings.UpdatingStateTimeout)
		ctx.Logger().Warn("shard: cannot write the remembered entities; retrying",
			append(s.attrs(), slog.Any("error", d.err), slog.Int("started", len(d.started)), slog.Int("stopped", len(d.stopped)),
				slog.Duration("retryIn", delay))...)
		s.cancels = append(s.cancels, s.timers.SendOnce(delay, ctx.Self(), rememberRetryWrite{}))
		return
	}
	s.writeFailures = 0
	toStart, err := s.entities.written()
	if err != nil {
		ctx.Logger().Error("shard: write done refused", append(s.attrs(), slog.Any("error", err))...)
		return
	}
	for _, id := range toStart {
		s.startEntity(ctx, id, nil)
	}
	s.flushWrites(ctx)
}

// onRetryWrite ends a failed write's back-off: what has waited for the
// store longer than its bound is dropped, the rest written again.
func (s *shard) onRetryWrite(ctx actor.Context) {
	bound := storeWaitBound(s.settings)
	for _, h := range s.entities.expire(time.Now(), bound) {
		s.drop(ctx, h.m.original(h.id), h.m.sender, fmt.Sprintf("waited longer than %s for entity %q to be remembered (%v)", bound, h.id, s.lastStoreErr))
	}
	s.entities.retryWrites()
	s.flushWrites(ctx)
}

// onRestartEntity: the back-off of a remembered entity that stopped
// unexpectedly is over.
func (s *shard) onRestartEntity(ctx actor.Context, r *restartEntity) {
	if !s.entities.restartDue(r.id) {
		return // started by a message meanwhile
	}
	s.startEntity(ctx, r.id, nil)
}
