package shard

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/leaselog"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/shardactor"
)

// The shard's lease (Settings.UseLease, Akka's sharding use-lease): a shard
// starts no entity before it holds the lease of its shard, and stops with
// all its entities as soon as it loses it, so that a node that membership
// wrongly believes alive (paused, cut off) cannot run the shard's entities
// next to their new home.

// stateAcquiringLease: the shard waits for its lease (Pekko's
// awaitingLease); messages wait, queries are answered.
const stateAcquiringLease = "acquiringLease"

// Internal messages of the lease; gen is the number of the acquisition
// they belong to.
type (
	leaseAcquireResult struct {
		gen      int
		acquired bool
		err      error
	}
	leaseLost struct {
		gen    int
		reason error
	}
	leaseRetry struct{}
)

// leaseReleaseTimeout bounds a release on top of the lease's own operation
// timeout; nothing waits for it.
const leaseReleaseTimeout = 30 * time.Second

// acquiringLease: until the lease is held, messages for entities wait (in
// order) and queries are answered (in Receive).
func (s *shard) acquiringLease(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case leaseAcquireResult:
		s.onLeaseAcquireResult(ctx, msg)
	case leaseRetry:
		s.tryAcquireLease(ctx)
	case *messages.HandOff:
		// Nothing runs yet: the hand-off is done at once.
		s.onHandOff(ctx, msg, ctx.Sender())
	default:
		s.wait(ctx)
	}
}

// tryAcquireLease asks the lease for a holding off the actor; the answer
// comes back as a leaseAcquireResult, a later loss as a leaseLost.
func (s *shard) tryAcquireLease(ctx actor.Context) {
	if s.lease == nil {
		owner := ctx.ActorSystem().Address() + "/" + ctx.ActorSystem().ID
		l, err := leaselog.NewLease(s.settings.UseLease, shardactor.LeaseName(s.typeName, s.shardID), owner, ctx.Logger())
		if err != nil {
			ctx.Logger().Error(fmt.Sprintf("shard: Failed to get lease for shard id [%s]. Retry in %s", s.shardID, s.settings.LeaseRetryInterval),
				append(s.attrs(), slog.Any("error", err))...)
			s.cancels = append(s.cancels, s.timers.SendOnce(s.settings.LeaseRetryInterval, ctx.Self(), leaseRetry{}))
			return
		}
		s.lease = l
	}
	s.leaseGen++
	gen, l := s.leaseGen, s.lease
	self, root, stopped := ctx.Self(), ctx.ActorSystem().Root, s.leaseCtx
	lost := func(reason error) {
		if stopped.Err() == nil {
			root.Send(self, leaseLost{gen: gen, reason: reason})
		}
	}
	s.leaseMayHold = true
	ctx.Logger().Debug("shard: acquiring lease", append(s.attrs(), slog.String("lease", shardactor.LeaseName(s.typeName, s.shardID)))...)
	s.runLeaseOp(ctx, func() any {
		_, acquired, err := l.Acquire(stopped, lost)
		return leaseAcquireResult{gen: gen, acquired: acquired, err: err}
	})
}

func (s *shard) onLeaseAcquireResult(ctx actor.Context, r leaseAcquireResult) {
	if r.gen != s.leaseGen {
		return
	}
	// A loss that came before this answer was ignored (acquiringLease
	// starts nothing); CheckLease sees it.
	if r.acquired && s.lease.CheckLease() {
		ctx.Logger().Debug("shard: lease acquired", s.attrs()...)
		s.ready(ctx)
		return
	}
	msg := fmt.Sprintf("shard: Failed to get lease for shard id [%s]. Retry in %s", s.shardID, s.settings.LeaseRetryInterval)
	switch {
	case r.err != nil:
		ctx.Logger().Error(msg, append(s.attrs(), slog.Any("error", r.err))...)
	case r.acquired:
		ctx.Logger().Warn(msg+" (lost before it could be used)", s.attrs()...)
	default:
		ctx.Logger().Debug(msg+" (held by another owner)", s.attrs()...)
	}
	s.cancels = append(s.cancels, s.timers.SendOnce(s.settings.LeaseRetryInterval, ctx.Self(), leaseRetry{}))
}

// onLeaseLost stops the shard and with it every entity at once (stopped,
// not sent the hand-off stop message: that would wait behind their
// mailboxes, and another node may hold the lease soon). What the shard
// holds is dropped when it stops. Its region starts it again when a
// message comes, or, with remember-entities, after ShardFailureBackoff.
func (s *shard) onLeaseLost(ctx actor.Context, l leaseLost) {
	if l.gen != s.leaseGen || s.states.Name() == stateAcquiringLease || s.states.Name() == stateStopped {
		return // an earlier holding, or nothing runs under it yet
	}
	ctx.Logger().Error(fmt.Sprintf("shard: Shard id [%s] lease lost, stopping shard and killing [%d] entities", s.shardID, s.entities.liveCount()),
		append(s.attrs(), slog.Any("reason", l.reason))...)
	s.stopNow(ctx, fmt.Sprintf("the shard's lease was lost (%v); the shard stopped with its entities", l.reason))
}

// releaseLease gives the lease back if an acquisition may hold it. The
// shard calls it once its entities have stopped (at Stopped), or when it
// restarts after a failure (its entities are being stopped; its next
// incarnation acquires anew).
func (s *shard) releaseLease(ctx actor.Context, why string) {
	if s.cancelLeaseCtx != nil {
		// No answer is wanted any more, and an acquisition in flight ends.
		s.cancelLeaseCtx()
	}
	if s.lease == nil || !s.leaseMayHold {
		return
	}
	s.leaseMayHold = false
	l, log, attrs := s.lease, ctx.Logger(), s.attrs()
	s.runLeaseOp(ctx, func() any {
		rctx, cancel := context.WithTimeout(context.Background(), leaseReleaseTimeout)
		defer cancel()
		released, err := l.Release(rctx)
		switch {
		case err != nil:
			log.Error("shard: failed to release the lease; the next holder waits for it to time out",
				append(attrs, slog.String("why", why), slog.Any("error", err))...)
		case released:
			log.Debug("shard: lease released", append(attrs, slog.String("why", why))...)
		}
		return nil
	})
}

// runLeaseOp runs op off the actor after every operation queued before it
// (an acquisition and a release of one lease must not overtake each
// other), and sends its answer, if any, to the shard while it lives.
func (s *shard) runLeaseOp(ctx actor.Context, op func() any) {
	prev := s.leaseOpsTail
	done := make(chan struct{})
	s.leaseOpsTail = done
	self, root, stopped := ctx.Self(), ctx.ActorSystem().Root, s.leaseCtx
	go func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		if answer := op(); answer != nil && stopped.Err() == nil {
			root.Send(self, answer)
		}
	}()
}
