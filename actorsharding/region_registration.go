package actorsharding

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/coordinator"
	"github.com/protoshard/protoshard/internal/deadletters"
	"github.com/protoshard/protoshard/internal/shardingadmin"
	"github.com/protoshard/protoshard/internal/shardingconfig"
	"github.com/protoshard/protoshard/internal/throttle"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/proto"
)

// startRegistration registers now and schedules the next attempts (see
// registrationSchedule), when the region has no coordinator: it started,
// joined, lost its coordinator, or the oldest member changed.
func (r *region) startRegistration(ctx actor.Context) {
	if r.link.registered() || r.life.removed || r.cluster.Self().ID == "" {
		return // registered; or removed, or not joined yet: started again once (re-)joined
	}
	r.register(ctx)
	if retry, delay, ok := r.link.schedule.start(); ok {
		r.timers.SendOnce(delay, ctx.Self(), retry)
	}
}

func (r *region) onRegisterRetry(ctx actor.Context, retry registerRetry) {
	due, next, delay, ok := r.link.retry(retry)
	if !due {
		return
	}
	r.register(ctx)
	if ok {
		r.timers.SendOnce(delay, ctx.Self(), next)
	}
}

func (r *region) register(ctx actor.Context) {
	self := r.cluster.Self()
	if self.ID == "" || r.life.removed {
		return // not joined yet, or removed: retried once (re-)joined
	}
	ctx.Request(r.coordinatorProxy, r.registration(ctx, self.ID))
}

// registration is the Register (RegisterProxy for a proxy) of this region
// on member memberID.
func (r *region) registration(ctx actor.Context, memberID string) proto.Message {
	name, shards := r.identity.Name, uint32(r.identity.NumberOfShards)
	if r.proxyOnly() {
		return &messages.RegisterProxy{ShardRegionProxy: ctx.Self(), MemberId: memberID, Extractor: name, NumberOfShards: shards}
	}
	// The shards it hosts: a coordinator that lost its state adopts them
	// rather than start them a second time elsewhere.
	return &messages.Register{ShardRegion: ctx.Self(), MemberId: memberID, Shards: r.table.hosted(), Extractor: name, NumberOfShards: shards}
}

// onRegisterRefused: the coordinator refused this region, whose extractor
// differs from the registered regions'. It stays unregistered, so it hosts
// nothing (it obeys no coordinator) and its messages wait in its buffer;
// it registers again at its retry interval, since the regions it disagrees
// with may leave. Each refusal is a dead-letter event of its Register
// (ErrIncompatibleExtractor, counted by the dropped-messages metric); the
// log is rate-limited.
func (r *region) onRegisterRefused(ctx actor.Context, msg *messages.RegisterRefused) {
	if r.link.registered() || r.life.removed {
		ctx.Logger().Debug("shard region: a refusal of an earlier registration; ignored", slog.String("type", r.typeName),
			slog.Any("coordinator", msg.GetCoordinator()), slog.Bool("registered", r.link.registered()))
		return
	}
	// No sender: proto.actor would answer the event with a
	// DeadLetterResponse to it.
	deadletters.PublishError(ctx.ActorSystem(), msg.GetCoordinator(), r.registration(ctx, r.cluster.Self().ID), nil,
		fmt.Errorf("shard region %s: the coordinator at %s refused the registration, %s: %w",
			r.typeName, msg.GetCoordinator().GetAddress(), msg.GetReason(), deadletter.ErrIncompatibleExtractor))
	if r.refusals == nil {
		r.refusals = throttle.New(refusalLogInterval)
	}
	if d := r.refusals.Allow("", time.Now()); d.Log {
		ctx.Logger().Error("shard region: the coordinator refused the registration: this node's message extractor differs from the registered regions'; "+
			"it hosts no shards and registers again", slog.String("type", r.typeName), slog.String("extractor", r.identity.String()),
			slog.String("reason", msg.GetReason()), slog.Any("coordinator", msg.GetCoordinator()),
			slog.Duration("retry-interval", r.settings.RetryInterval), slog.Int("refusals-not-logged", d.Suppressed))
	}
}

// refusalLogInterval is how long the refusals after a logged one are only
// counted.
const refusalLogInterval = time.Minute

func (r *region) onRegisterAck(ctx actor.Context, msg *messages.RegisterAck) {
	c := msg.GetCoordinator()
	if c == nil || c.GetId() == "" {
		r.drop(ctx, msg, "RegisterAck without a coordinator")
		return
	}
	if r.life.removed {
		r.drop(ctx, msg, "RegisterAck while this member is removed from the cluster")
		return
	}
	oldest, _ := membership.Oldest(r.memberList(), r.settings.Role)
	ack, err := r.link.ack(c, msg.GetEpoch(), c.GetAddress() == oldest.Address && oldest.Address != "", r.cluster.Self().ID)
	switch {
	case err != nil:
		r.drop(ctx, msg, err.Error())
		return
	case ack.repeated:
		r.requestShardBufferHomes(ctx)
		return
	}
	if ack.warning != "" {
		ctx.Logger().Warn("shard region: "+ack.warning, slog.String("type", r.typeName), slog.String("coordinator", c.String()))
	}
	ctx.Logger().Debug("shard region registered with coordinator", slog.String("type", r.typeName),
		slog.String("coordinator", c.String()), slog.Uint64("epoch", msg.GetEpoch()))
	if ack.unwatch != nil {
		ctx.Unwatch(ack.unwatch)
	}
	ctx.Watch(c)
	r.requestShardBufferHomes(ctx)
	if r.life.gracefulShutdown {
		ctx.Request(c, &messages.GracefulShutdownReq{ShardRegion: ctx.Self()})
	}
}

// obeys tells whether a coordinator command (msg, at epoch) comes from the
// coordinator this region registered with, or one of its rebalance
// workers, at its epoch; anything else is dropped with the reason. A
// command from a newer epoch, sent by a coordinator of this type on a live
// member, means the region missed a coordinator change: it registers
// again. Anyone else's is only dropped.
func (r *region) obeys(ctx actor.Context, msg proto.Message, epoch uint64) bool {
	_, live := r.members[ctx.Sender().GetAddress()]
	why, missed := r.link.command(ctx.Sender(), epoch, r.coordinatorID(), live)
	if why == "" {
		return true
	}
	r.drop(ctx, msg, why)
	if missed {
		r.coordinatorLost(ctx, fmt.Sprintf("a command at epoch %d, above the registered coordinator's %d", epoch, r.link.epoch))
	}
	return false
}

// coordinatorID is the process ID of this type's coordinator on whichever
// member runs it: the child of the coordinator's singleton (see
// coordinator.SupervisorProps).
func (r *region) coordinatorID() string {
	return shardingadmin.CoordinatorManagerName(r.typeName) + "/" + shardingconfig.CoordinatorSingletonName + "/" + coordinator.CoordinatorName
}

// oldestOfRole is the ID of the oldest member with the region's role,
// where its coordinator runs; "" if none.
func (r *region) oldestOfRole() string {
	oldest, _ := membership.Oldest(r.memberList(), r.settings.Role)
	return oldest.ID
}

func (r *region) memberList() []membership.Member {
	out := make([]membership.Member, 0, len(r.members))
	for _, m := range r.members {
		out = append(out, m)
	}
	return out
}

func (r *region) requestShardBufferHomes(ctx actor.Context) {
	if !r.link.registered() {
		return
	}
	for _, shard := range r.buffers.shards() {
		r.askHome(ctx, shard)
	}
}

func (r *region) coordinatorLost(ctx actor.Context, why string) {
	c := r.link.lose()
	if c == nil {
		return
	}
	ctx.Logger().Debug("shard region lost its coordinator; registering again", slog.String("type", r.typeName),
		slog.String("why", why))
	ctx.Unwatch(c)
	r.startRegistration(ctx)
}
