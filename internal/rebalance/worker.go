// Package rebalance is Akka's RebalanceWorker: the short-lived child of
// the ShardCoordinator that moves one shard. It tells every region and proxy
// to forget the shard's home (BeginHandOff), waits for all of them to
// acknowledge, tells the owner to stop the shard (HandOff), waits for
// ShardStopped, and reports RebalanceDone to the coordinator, with ok=false
// if the whole took longer than the hand-off timeout.
package rebalance

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/protoshard/protoshard/internal/behavior"
	"github.com/protoshard/protoshard/internal/deadletters"
	"github.com/protoshard/protoshard/internal/guard"
	"github.com/protoshard/protoshard/internal/handoff"
	"github.com/protoshard/protoshard/internal/pidkey"
	"github.com/protoshard/protoshard/internal/ticker"
	"github.com/protoshard/protoshard/messages"
)

// State names of the RebalanceWorker, as in Akka; they appear in logs.
const (
	// stateWaitingForAcks: BeginHandOff was sent to every region; waiting
	// for their BeginHandOffAck.
	stateWaitingForAcks = "waitingForAcks"
	// stateStoppingShard: HandOff was sent to the owner; waiting for
	// ShardStopped.
	stateStoppingShard = "stoppingShard"
	// stateDone: RebalanceDone was sent; the worker is stopping.
	stateDone = "done"
)

// RegionTerminated is sent by the coordinator (the parent) when a region or
// proxy is known gone (its member was removed). It counts as the region's
// acknowledgement, and if the region is the shard's owner while the shard is
// stopping, the shard counts as stopped: its entities are gone with it.
type RegionTerminated struct {
	// Region is the region or proxy that is gone.
	Region *actor.PID
}

// Notice marks RegionTerminated as a notice (internal/guard.Notice): the
// coordinator tells every worker it knows of, one that has just finished
// included.
func (*RegionTerminated) Notice() {}

// handOffTimedOut is the worker's time-out.
type handOffTimedOut struct{}

// resendBeginHandOff is the worker's resend timer, while acks are missing.
type resendBeginHandOff struct{}

// beginHandOffResendInterval is how often BeginHandOff is resent to the
// regions that have not acknowledged it: a region obeys a coordinator's
// worker only once it has registered with that coordinator, which, right
// after the coordinator moved, may come a little after the first
// BeginHandOff. A twentieth of the hand-off timeout, between 100ms and 1s.
func beginHandOffResendInterval(handOffTimeout time.Duration) time.Duration {
	return min(max(handOffTimeout/20, 100*time.Millisecond), time.Second)
}

// Props returns the props of a RebalanceWorker that moves shard away from
// region from. regions are all regions and proxies to tell (from included;
// duplicates and nils are ignored). handOffTimeout bounds the whole process
// (zero or negative: Akka's 60 s). isRebalance only changes the log wording:
// true for a rebalance, false for a shard stopped because its region shuts
// down. epoch is the coordinator's: BeginHandOff and HandOff carry it, and
// regions obey them only from a worker of the coordinator they registered
// with at that epoch.
//
// The worker must be spawned as a child of the coordinator, which gets the
// *messages.RebalanceDone. proto.actor delivers the worker's Terminated (a
// system message) ahead of user messages, so the coordinator may see it
// before the RebalanceDone the worker sent just before stopping: the
// coordinator should act on RebalanceDone only.
//
// A region must answer BeginHandOff with ctx.Request(ctx.Sender(),
// &messages.BeginHandOffAck{...}), not ctx.Respond: proto.actor's Respond
// carries no sender, and the ack is matched to the region by its sender (by
// address and id). ShardStopped may come from anyone (the shard answers it).
func Props(shard string, from *actor.PID, handOffTimeout time.Duration, regions []*actor.PID, isRebalance bool, epoch uint64) *actor.Props {
	if handOffTimeout <= 0 {
		handOffTimeout = handoff.Timeout // given none
	}
	regions = slices.Clone(regions) // the caller may reuse its slice
	return actor.PropsFromProducer(func() actor.Actor {
		return &worker{
			shard:          shard,
			from:           from,
			handOffTimeout: handOffTimeout,
			regions:        regions,
			isRebalance:    isRebalance,
			epoch:          epoch,
		}
	}, guard.WithMailbox())
}

// worker is Akka's RebalanceWorker: one receive method per state (see the
// state* names).
type worker struct {
	shard          string
	from           *actor.PID
	handOffTimeout time.Duration
	regions        []*actor.PID
	isRebalance    bool
	epoch          uint64

	states        behavior.States
	cancelTimeout scheduler.CancelFunc
	cancelResend  func()

	asked    map[string]bool       // pidkey.Of of every region told BeginHandOff
	pending  map[string]*actor.PID // regions whose ack is still missing
	watched  []*actor.PID
	fromGone bool // the owner is known stopped or removed: its entities are gone
}

// Receive handles the lifecycle, then the current state.
func (w *worker) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		w.start(ctx)
		return
	case *actor.Stopping:
		if w.cancelTimeout != nil {
			w.cancelTimeout()
		}
		if w.cancelResend != nil {
			w.cancelResend()
		}
		// The worker is gone; the regions need not tell it when they stop.
		for _, pid := range w.watched {
			ctx.Unwatch(pid)
		}
		return
	case *actor.Stopped, *actor.Restarting:
		return
	}
	w.states.Receive(ctx)
}

func (w *worker) start(ctx actor.Context) {
	w.asked = map[string]bool{}
	w.pending = map[string]*actor.PID{}
	w.become(ctx, stateWaitingForAcks, w.waitingForAcks)
	if w.from == nil {
		ctx.Logger().Error("rebalance worker: no owner region to hand the shard off from", w.attrs()...)
		w.done(ctx, false)
		return
	}
	if w.isRebalance {
		ctx.Logger().Debug("rebalance worker: rebalancing shard", append(w.attrs(), slog.Any("from", w.from), slog.Int("regions", len(w.regions)))...)
	} else {
		ctx.Logger().Debug("rebalance worker: shutting down shard; asking the regions to hand it off",
			append(w.attrs(), slog.Any("from", w.from), slog.Int("regions", len(w.regions)))...)
	}
	for _, r := range w.regions {
		if r == nil {
			ctx.Logger().Warn("rebalance worker: nil region in the list; ignored", w.attrs()...)
			continue
		}
		k := pidkey.Of(r)
		if w.asked[k] {
			continue
		}
		w.asked[k] = true
		w.pending[k] = r
		// A region that stops (or never existed: proto.actor answers a watch
		// of an unknown PID with Terminated) counts as acknowledged; Akka
		// relies on the coordinator's ShardRegionTerminated alone.
		w.watch(ctx, r)
		ctx.Request(r, &messages.BeginHandOff{Shard: w.shard, Epoch: w.epoch})
	}
	w.watch(ctx, w.from)
	timers := scheduler.NewTimerScheduler(ctx)
	w.cancelTimeout = timers.SendOnce(w.handOffTimeout, ctx.Self(), handOffTimedOut{})
	resend := beginHandOffResendInterval(w.handOffTimeout)
	w.cancelResend = ticker.SendRepeatedly(ctx, resend, resend, ctx.Self(), resendBeginHandOff{})
	if len(w.pending) == 0 {
		w.allAcked(ctx)
	}
}

// --- states ---

func (w *worker) waitingForAcks(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *messages.BeginHandOffAck:
		w.onAck(ctx, msg)
	case *actor.Terminated:
		w.unwatched(msg.Who)
		w.regionGone(ctx, msg.Who, msg.Why != actor.TerminatedReason_AddressTerminated, "terminated ("+msg.Why.String()+")")
		w.checkAllAcked(ctx)
	case *actor.DeadLetterResponse:
		// BeginHandOff reached no actor: the region does not exist (any
		// more) on its node, which is as good as its ack.
		w.regionGone(ctx, msg.Target, true, "not found")
		w.checkAllAcked(ctx)
	case *RegionTerminated:
		w.regionGone(ctx, msg.Region, true, "removed")
		w.checkAllAcked(ctx)
	case RegionTerminated:
		w.regionGone(ctx, msg.Region, true, "removed")
		w.checkAllAcked(ctx)
	case handOffTimedOut:
		w.timedOut(ctx)
	case resendBeginHandOff:
		for _, r := range w.pending {
			ctx.Request(r, &messages.BeginHandOff{Shard: w.shard, Epoch: w.epoch})
		}
	default:
		w.drop(ctx, msg, fmt.Sprintf("unexpected message %T in state %s", msg, w.states.Name()))
	}
}

func (w *worker) stoppingShard(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *messages.ShardStopped:
		if msg.GetShard() != w.shard {
			w.drop(ctx, msg, fmt.Sprintf("ShardStopped for shard %q sent to the worker of shard %q", msg.GetShard(), w.shard))
			return
		}
		ctx.Logger().Debug("rebalance worker: shard stopped", w.attrs()...)
		w.done(ctx, true)
	case *actor.Terminated:
		w.unwatched(msg.Who)
		w.ownerGoneWhileStopping(ctx, msg.Who, msg.Why != actor.TerminatedReason_AddressTerminated, "terminated ("+msg.Why.String()+")")
	case *actor.DeadLetterResponse:
		// HandOff (or a late BeginHandOff) reached no actor: no region, no
		// shard, no entities there.
		w.ownerGoneWhileStopping(ctx, msg.Target, true, "not found")
	case *RegionTerminated:
		w.ownerGoneWhileStopping(ctx, msg.Region, true, "removed")
	case RegionTerminated:
		w.ownerGoneWhileStopping(ctx, msg.Region, true, "removed")
	case *messages.BeginHandOffAck:
		// An ack after the region was counted as gone; nothing waits for it.
		ctx.Logger().Debug("rebalance worker: late BeginHandOffAck", append(w.attrs(), slog.Any("region", ctx.Sender()))...)
	case handOffTimedOut:
		w.timedOut(ctx)
	case resendBeginHandOff:
	default:
		w.drop(ctx, msg, fmt.Sprintf("unexpected message %T in state %s", msg, w.states.Name()))
	}
}

func (w *worker) doneState(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Terminated, *actor.DeadLetterResponse, *RegionTerminated, RegionTerminated, handOffTimedOut, resendBeginHandOff,
		*messages.BeginHandOffAck, *messages.ShardStopped:
		ctx.Logger().Debug("rebalance worker: message after completion", append(w.attrs(), slog.String("message", fmt.Sprintf("%T", msg)))...)
	default:
		w.drop(ctx, msg, "the rebalance worker has finished")
	}
}

// --- transitions ---

func (w *worker) onAck(ctx actor.Context, ack *messages.BeginHandOffAck) {
	if ack.GetShard() != w.shard {
		w.drop(ctx, ack, fmt.Sprintf("BeginHandOffAck for shard %q sent to the worker of shard %q", ack.GetShard(), w.shard))
		return
	}
	// A region that forwarded the shard's messages to its old home sends
	// its ack through that home, which relays it: the ack names the region.
	from := ack.GetRegion()
	if from == nil || from.GetId() == "" {
		from = ctx.Sender()
	}
	if from == nil {
		w.drop(ctx, ack, "BeginHandOffAck without a sender: cannot tell which region acknowledges")
		return
	}
	k := pidkey.Of(from)
	switch {
	case w.pending[k] != nil:
		delete(w.pending, k)
		ctx.Logger().Debug("rebalance worker: BeginHandOffAck", append(w.attrs(), slog.Any("region", from), slog.Int("remaining", len(w.pending)))...)
		w.checkAllAcked(ctx)
	case w.asked[k]:
		ctx.Logger().Debug("rebalance worker: BeginHandOffAck from a region already counted", append(w.attrs(), slog.Any("region", from))...)
	default:
		w.drop(ctx, ack, fmt.Sprintf("BeginHandOffAck from %v, which was not asked", from))
	}
}

// regionGone counts a stopped or removed region as acknowledged. definitive
// is false for a Terminated that only says the connection to the region's
// node was lost (AddressTerminated): enough to stop waiting for its ack, not
// to conclude that its entities are gone.
func (w *worker) regionGone(ctx actor.Context, region *actor.PID, definitive bool, how string) {
	if region == nil {
		return
	}
	k := pidkey.Of(region)
	if definitive && k == pidkey.Of(w.from) {
		w.fromGone = true
		// The acks relayed through the owner are gone with it, and so is
		// whatever they were to follow: nothing waits for them any more.
		if len(w.pending) > 0 {
			ctx.Logger().Debug("rebalance worker: owner region "+how+" while waiting for BeginHandOffAck; counting every region as acknowledged",
				append(w.attrs(), slog.Int("remaining", len(w.pending)))...)
		}
		clear(w.pending)
	}
	if w.pending[k] != nil {
		delete(w.pending, k)
		ctx.Logger().Debug("rebalance worker: region "+how+" while waiting for BeginHandOffAck; counted as acknowledged",
			append(w.attrs(), slog.Any("region", region), slog.Int("remaining", len(w.pending)))...)
	}
}

func (w *worker) checkAllAcked(ctx actor.Context) {
	if w.states.Name() == stateWaitingForAcks && len(w.pending) == 0 {
		w.allAcked(ctx)
	}
}

func (w *worker) allAcked(ctx actor.Context) {
	if w.fromGone {
		// Akka sends HandOff anyway and then waits for a ShardStopped that
		// cannot come, until the time-out (ok=false).
		ctx.Logger().Debug("rebalance worker: all regions acknowledged; the owner region is gone already, and its entities with it", w.attrs()...)
		w.done(ctx, true)
		return
	}
	w.cancelResend()
	ctx.Logger().Debug("rebalance worker: all regions acknowledged; handing off", append(w.attrs(), slog.Any("from", w.from))...)
	ctx.Request(w.from, &messages.HandOff{Shard: w.shard, Epoch: w.epoch})
	w.become(ctx, stateStoppingShard, w.stoppingShard)
}

func (w *worker) ownerGoneWhileStopping(ctx actor.Context, region *actor.PID, definitive bool, how string) {
	if region == nil || pidkey.Of(region) != pidkey.Of(w.from) {
		return // another region: its ack is no longer needed
	}
	if !definitive {
		// proto.actor reports AddressTerminated when the connection to the
		// node is lost, which may be a partition: the node and the entities
		// may still run. Declaring the shard stopped would let the
		// coordinator start it elsewhere next to them. Wait for ShardStopped,
		// the coordinator's RegionTerminated, or the time-out.
		ctx.Logger().Warn("rebalance worker: lost the connection to the owner region while it stops the shard; waiting for ShardStopped or its removal",
			append(w.attrs(), slog.Any("from", w.from))...)
		return
	}
	ctx.Logger().Debug("rebalance worker: owner region "+how+" while stopping the shard; its entities are gone with it",
		append(w.attrs(), slog.Any("from", w.from))...)
	w.done(ctx, true)
}

func (w *worker) timedOut(ctx actor.Context) {
	if w.isRebalance {
		ctx.Logger().Warn("rebalance worker: rebalance of shard timed out",
			append(w.attrs(), slog.Any("from", w.from), slog.Duration("timeout", w.handOffTimeout), slog.Int("unacknowledged", len(w.pending)))...)
	} else {
		ctx.Logger().Warn("rebalance worker: shutting down shard timed out",
			append(w.attrs(), slog.Any("from", w.from), slog.Duration("timeout", w.handOffTimeout), slog.Int("unacknowledged", len(w.pending)))...)
	}
	w.done(ctx, false)
}

// done reports to the coordinator and stops the worker.
func (w *worker) done(ctx actor.Context, ok bool) {
	if w.states.Name() == stateDone {
		return
	}
	if w.cancelTimeout != nil {
		w.cancelTimeout()
	}
	w.become(ctx, stateDone, w.doneState)
	result := &messages.RebalanceDone{Shard: w.shard, Ok: ok}
	if parent := ctx.Parent(); parent != nil {
		// With the worker as sender: the coordinator takes RebalanceDone
		// only from the shard's worker.
		ctx.Request(parent, result)
	} else {
		deadletters.Publish(ctx.ActorSystem(), nil, result, ctx.Self(), w.reason("the worker has no parent (coordinator) to report to"))
	}
	ctx.Stop(ctx.Self())
}

// --- helpers ---

func (w *worker) become(ctx actor.Context, name string, receive actor.ReceiveFunc) {
	w.states.Become(ctx, "rebalance worker", name, receive, slog.String("shard", w.shard))
}

func (w *worker) watch(ctx actor.Context, pid *actor.PID) {
	if slices.ContainsFunc(w.watched, func(p *actor.PID) bool { return pidkey.Of(p) == pidkey.Of(pid) }) {
		return
	}
	w.watched = append(w.watched, pid)
	ctx.Watch(pid)
}

// unwatched forgets a watch that ended with a Terminated, so that stopping
// the worker does not unwatch a dead PID.
func (w *worker) unwatched(pid *actor.PID) {
	if pid == nil {
		return
	}
	w.watched = slices.DeleteFunc(w.watched, func(p *actor.PID) bool { return pidkey.Of(p) == pidkey.Of(pid) })
}

func (w *worker) drop(ctx actor.Context, msg any, reason string) {
	deadletters.Publish(ctx.ActorSystem(), ctx.Self(), msg, ctx.Sender(), w.reason(reason))
}

func (w *worker) reason(reason string) string {
	return fmt.Sprintf("rebalance worker of shard %s: %s", w.shard, reason)
}

func (w *worker) attrs() []any {
	return []any{slog.String("shard", w.shard), slog.String("state", w.states.Name()), slog.Bool("rebalance", w.isRebalance)}
}
