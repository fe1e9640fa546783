package actorsharding

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/shardproto"
	"github.com/protoshard/protoshard/messages"
)

func (r *region) onBeginHandOff(ctx actor.Context, shard string) {
	var oldHome *actor.PID
	if home, ok := r.table.home(shard); ok {
		ctx.Logger().Debug("shard region: BeginHandOff", slog.String("type", r.typeName), slog.String("shard", shard))
		r.table.forgetHome(shard)
		if _, live := r.members[home.Address]; live && !r.table.isSelf(home) {
			oldHome = home
		}
	}
	// No message goes to the old home directly from now on, and none is
	// under way when the ack (relayed through it) leaves.
	r.updateRoute(shard)
	worker := ctx.Sender()
	if worker == nil {
		return
	}
	ack := &messages.BeginHandOffAck{Shard: shard, Region: ctx.Self()}
	if via := r.handOffs.beginHandOff(shard, worker, oldHome, time.Now()); via != nil {
		// Through the old home, behind what this region forwarded there.
		ack.ReplyTo = worker
		ctx.Request(via, ack)
		return
	}
	// Request, not Respond: the worker matches the ack by its sender.
	ctx.Request(worker, ack)
}

// relayBeginHandOffAck passes on, as the shard's old home, the ack of a
// region that forwarded to it: everything it forwarded has arrived here
// first. Only acks for this region's coordinator's workers are relayed.
func (r *region) relayBeginHandOffAck(ctx actor.Context, ack *messages.BeginHandOffAck) {
	if why := relayRejection(ack.GetReplyTo(), r.link.coordinator); why != "" {
		r.drop(ctx, ack, why)
		return
	}
	ctx.Request(ack.GetReplyTo(), &messages.BeginHandOffAck{Shard: ack.GetShard(), Region: ack.GetRegion()})
}

// relayHandOffForwarded passes on, as a shard's new home, the old home's
// report to the coordinator: it arrives here behind the messages the old
// home forwarded, which are in the shard's mailbox or buffer now. Without
// a coordinator it is dropped; the old home repeats it.
func (r *region) relayHandOffForwarded(ctx actor.Context, msg *messages.HandOffForwarded) {
	if msg.GetOldHome() == nil || msg.GetOldHome().Equal(ctx.Self()) {
		r.drop(ctx, msg, "HandOffForwarded without an old home, or naming this region as the old home")
		return
	}
	// What the old home forwarded is here: what this region's senders
	// buffered meanwhile may follow it, coordinator or not.
	if r.handOffs.forwardArrived(msg.GetShard(), msg.GetOldHome(), time.Now()) {
		r.deliverBufferedMessages(ctx, msg.GetShard())
		r.updateRoute(msg.GetShard())
	}
	if !r.link.registered() {
		ctx.Logger().Debug("shard region: HandOffForwarded while without a coordinator; the old home repeats it",
			slog.String("type", r.typeName), slog.String("shard", msg.GetShard()))
		return
	}
	ctx.Request(r.link.coordinator, msg)
}

// reportHandOffForwarded: as the old home of shard, this region has
// forwarded what it held to the new home (via, nil if it is the new home
// itself or nothing was forwarded): it reports so, through via so that
// the report follows those messages.
func (r *region) reportHandOffForwarded(ctx actor.Context, shard string, via *actor.PID) {
	if !r.handOffs.report(shard, via, r.link.registered()) {
		return // nothing to report, or reported on a later tick, once registered
	}
	r.sendHandOffForwarded(ctx, shard, via)
}

// sendHandOffForwarded reports to the coordinator that this region, the
// old home of shard, forwarded what it held: through via, the new home,
// behind those messages, or (nil) directly.
func (r *region) sendHandOffForwarded(ctx actor.Context, shard string, via *actor.PID) {
	if via == nil {
		via = r.link.coordinator
	}
	ctx.Request(via, &messages.HandOffForwarded{Shard: shard, OldHome: ctx.Self()})
}

// afterHandOff: shard's hand-off away from this region is complete here
// (its child has stopped). With nothing held for it, there is nothing to
// forward: the report goes to the coordinator now. Otherwise its new home
// is asked for, and the report follows the forwarded messages.
func (r *region) afterHandOff(ctx actor.Context, shard string) {
	if owes, reported := r.handOffs.owes(shard); !owes || reported {
		return
	}
	if r.buffers.has(shard) {
		r.askHome(ctx, shard)
		return
	}
	r.reportHandOffForwarded(ctx, shard, nil)
}

// onHandOffReturned: a shard child that hands off gave back what it held
// for its entities. It is older than what this region buffered for the
// shard since BeginHandOff, so it goes first, and on to the new home.
func (r *region) onHandOffReturned(ctx actor.Context, msg *shardproto.HandOffReturned) {
	if ctx.Sender() == nil || ctx.Sender().Address != ctx.Self().Address || !r.table.isChild(ctx.Sender().Id) {
		r.drop(ctx, msg, fmt.Sprintf("HandOffReturned from %v, which is not a shard of this region", ctx.Sender()))
		return
	}
	msgs := make([]bufferedMessage, 0, len(msg.Messages))
	for _, m := range msg.Messages {
		msgs = append(msgs, bufferedMessage{entityID: m.EntityID, message: m.Message, sender: m.Sender, pending: m.Pending, header: m.Header})
	}
	if reason := r.life.refusal(true); reason != nil {
		for _, m := range msgs {
			r.dropBuffered(ctx, msg.Shard, m, reason)
		}
		return
	}
	r.buffers.prepend(msg.Shard, msgs)
}

func (r *region) onHandOffForwardedAck(ctx actor.Context, msg *messages.HandOffForwardedAck) {
	if !r.link.registered() || !r.link.coordinator.Equal(ctx.Sender()) {
		r.drop(ctx, msg, fmt.Sprintf("HandOffForwardedAck from %v, not this region's coordinator (%v)", ctx.Sender(), r.link.coordinator))
		return
	}
	if r.handOffs.acked(msg.GetShard()) {
		ctx.Logger().Debug("shard region: hand-off forwarding acknowledged", slog.String("type", r.typeName), slog.String("shard", msg.GetShard()))
		r.tryCompleteGracefulShutdown(ctx)
	}
}

// retryHandOffForwarded repeats the reports the coordinator has not
// acknowledged, sends those that waited for a coordinator, and gives up
// the debts older than the hand-off timeout.
func (r *region) retryHandOffForwarded(ctx actor.Context) {
	live := func(address string) bool { _, ok := r.members[address]; return ok }
	for _, shard := range r.handOffs.expireAwaiting(time.Now(), r.settings.Coordinator.HandOffTimeout, live) {
		ctx.Logger().Warn("shard region: the shard's old home did not finish forwarding its messages in time, or is gone; delivering what waited",
			slog.String("type", r.typeName), slog.String("shard", shard))
		r.deliverBufferedMessages(ctx, shard)
		r.updateRoute(shard)
	}
	for _, shard := range r.handOffs.expire(time.Now(), r.settings.Coordinator.HandOffTimeout) {
		ctx.Logger().Warn("shard region: the coordinator never acknowledged that this old home forwarded the shard's messages; giving up",
			slog.String("type", r.typeName), slog.String("shard", shard))
	}
	for shard, via := range r.handOffs.resendsTo(live) {
		r.sendHandOffForwarded(ctx, shard, via)
	}
	for _, shard := range r.handOffs.unreported(r.table.alive) {
		r.afterHandOff(ctx, shard)
	}
	r.tryCompleteGracefulShutdown(ctx)
}

func (r *region) onHandOff(ctx actor.Context, msg *messages.HandOff) {
	shard := msg.GetShard()
	defer r.updateRoute(shard)
	ctx.Logger().Debug("shard region: HandOff", slog.String("type", r.typeName), slog.String("shard", shard))
	// Akka drops what it buffered for the shard between BeginHandOff and
	// now, as sending it on could reorder it behind what other regions
	// buffered. This region keeps it and forwards it to the new home,
	// which the coordinator tells the others only after that.
	r.handOffs.handedOff(shard, time.Now())
	r.table.takeAwaitedStarts(shard)
	step, pid, err := r.table.handOffChild(shard, ctx.Sender())
	if err != nil {
		ctx.Logger().Error("shard region: HandOff", slog.String("type", r.typeName), slog.Any("error", err))
		return
	}
	switch step {
	case handOffAnswer:
		ctx.Respond(&messages.ShardStopped{Shard: shard})
		r.afterHandOff(ctx, shard)
	case handOffForward:
		ctx.Forward(pid)
		r.shareEntityLimit(ctx)
	case handOffForwardAgain:
		ctx.Forward(pid)
	}
}
