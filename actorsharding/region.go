package actorsharding

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/protoshard/protoshard/internal/coordinator"
	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/internal/metrics"
	"github.com/protoshard/protoshard/internal/shard"
	"github.com/protoshard/protoshard/internal/shardingconfig"
	"github.com/protoshard/protoshard/internal/shardproto"
	"github.com/protoshard/protoshard/internal/staleness"
	"github.com/protoshard/protoshard/internal/throttle"
	"github.com/protoshard/protoshard/internal/ticker"
	"github.com/protoshard/protoshard/internal/wire"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/proto"
)

// stateActive is the ShardRegion's one state (Akka's region is not an FSM
// either); it appears in logs.
const stateActive = "active"

// region is Akka's ShardRegion. A proxy-only region (entityProps nil)
// routes but never hosts a shard.
type region struct {
	typeName    string
	entityProps *actor.Props // nil: proxy only
	extractor   MessageExtractor
	settings    shardingconfig.Settings
	cluster     *membership.Cluster
	// coordinatorProxy is the singleton proxy to the coordinator; Register
	// goes through it, everything else straight to the coordinator.
	coordinatorProxy *actor.PID
	stopped          chan struct{}
	// routes is what the region's router reads (see regionProcess); the
	// region opens a shard there while it may take messages directly.
	routes *routeTable
	router *regionProcess // nil: no router in front (tests)
	// entry: the region's entry (see regionEntryName) for this member's
	// incarnation, once joined.
	entry *actor.PID

	timers      *scheduler.TimerScheduler
	cancelRetry func()
	// lastSweep: when the region last swept its routes and the homes on
	// other nodes (see sweepRoutes).
	lastSweep time.Time
	// link is the region's registration with its coordinator, the only
	// source of commands the region obeys.
	link    coordinatorLink
	members map[string]membership.Member // live members by address
	// identity is the extractor's, sent with Register (see
	// IdentifiedExtractor).
	identity coordinator.ExtractorIdentity
	// refusals rate-limits the log of refused registrations.
	refusals *throttle.Limiter

	table   shardTable
	buffers shardBuffers
	// handOffs: the planned hand-offs this region takes part in, as the
	// shard's old home or as a region that forwarded to it.
	handOffs handOffs

	// life: removed from the cluster, shutting down, stopping locally.
	life regionLife
	// activeEntityLimit is the region's passivation limit (0: none), which
	// its shards share evenly.
	activeEntityLimit int
	limitShared       bool // a limit was sent to the shards once

	metrics *metrics.Type
}

// SetActiveEntityLimit, sent to a region, changes its passivation
// active-entity limit at run time (Akka's SetActiveEntityLimit): each of
// its shards gets an even share, and entities beyond it are passivated
// (least recently used first, by default). 0 removes the limit.
type SetActiveEntityLimit struct {
	// Limit is the region's new active-entity limit; 0 removes it.
	Limit int
}

// shardLimit is one shard's share of a region's active-entity limit: the
// limit divided by the number of shards, at least 1 (a share of 0 would
// mean "no limit" to the shard). 0 (no limit) stays 0.
func shardLimit(regionLimit, shards int) int {
	if regionLimit <= 0 {
		return 0
	}
	if shards <= 1 {
		return regionLimit
	}
	return max(1, regionLimit/shards)
}

type retryTick struct{}

// getRouteCounts asks a region how many shard routes its router has, and
// how many shard homes it knows; the answer is a routeCounts.
type getRouteCounts struct{}

type routeCounts struct{ routes, entities, homes int }

// restartShard: the shard-failure back-off of a remembering shard that
// stopped unexpectedly is over (Akka's RestartShard).
type restartShard struct{ shard string }

func (r *region) proxyOnly() bool { return r.entityProps == nil }

// shardFailureBackoff is Akka's shard-failure-backoff, as the shards use it.
func (r *region) shardFailureBackoff() time.Duration {
	return shard.WithDefaults(r.settings.Shard).ShardFailureBackoff
}

func (r *region) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		r.timers = scheduler.NewTimerScheduler(ctx)
		r.members = map[string]membership.Member{}
		r.table = newShardTable(ctx.Self())
		if r.routes == nil {
			r.routes = newRouteTable(ctx.ActorSystem(), r.typeName)
		}
		r.buffers = newShardBuffers(r.settings.BufferSize)
		r.handOffs = newHandOffs()
		r.activeEntityLimit = r.settings.Shard.ActiveEntityLimit
		r.metrics = metrics.For(ctx.ActorSystem()).Type(r.typeName)
		r.cluster.Subscribe(ctx.Self())
		r.cancelRetry = ticker.SendRepeatedly(ctx, r.settings.RetryInterval, r.settings.RetryInterval, ctx.Self(), retryTick{})
		r.link.schedule = newRegistrationSchedule(r.settings.RetryInterval)
		ctx.Logger().Debug("shard region started", slog.String("type", r.typeName), slog.Bool("proxy", r.proxyOnly()),
			slog.String("state", stateActive))
		r.startRegistration(ctx)
	default:
		r.active(ctx)
	}
	r.metrics.Region(r.table.liveChildren(), r.buffers.len())
}

// active handles everything: the protocol, queries and user messages.
func (r *region) active(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Stopping:
		r.onStopping(ctx)
	case *actor.Stopped:
		// Sent after the shards (children) and so their entities have
		// stopped: the coordinator may reallocate them at once.
		if r.link.registered() {
			ctx.Request(r.link.coordinator, &messages.RegionStopped{ShardRegion: ctx.Self()})
		}
		if r.router != nil {
			r.router.stopped.Store(true)
		}
		r.closeEntry(ctx)
		r.routes.closeAll()
		if r.stopped != nil {
			close(r.stopped)
		}
	case *actor.Started, *actor.Restarting, *actor.ReceiveTimeout:
	case *actor.DeadLetterResponse:
		// proto.actor's answer to one of this region's requests (Register,
		// GetShardHome...) to an actor that is gone: they are retried.
		ctx.Logger().Debug("shard region: a request reached no one", slog.String("type", r.typeName), slog.Any("target", msg.Target))
	case retryTick:
		r.onRetryTick(ctx)
	case registerRetry:
		r.onRegisterRetry(ctx, msg)
	case getRouteCounts:
		ctx.Respond(routeCounts{routes: r.routes.count(), entities: r.routes.entities.count(), homes: len(r.table.homes)})
	case restartShard:
		r.onRestartShard(ctx, msg.shard)
	case *messages.RegisterAck:
		r.onRegisterAck(ctx, msg)
	case *messages.RegisterRefused:
		r.onRegisterRefused(ctx, msg)
	case *messages.ShardHome:
		if r.obeys(ctx, msg, msg.GetEpoch()) {
			r.receiveShardHome(ctx, msg, msg.GetShard(), msg.GetRef())
		}
	case *messages.ShardHomes:
		if r.obeys(ctx, msg, msg.GetEpoch()) {
			for _, e := range msg.GetHomes() {
				for _, s := range e.GetShards() {
					r.receiveShardHome(ctx, msg, s, e.GetRegion())
				}
			}
		}
	case *messages.HostShard:
		if r.obeys(ctx, msg, msg.GetEpoch()) {
			r.onHostShard(ctx, msg)
		}
	case *messages.BeginHandOff:
		if r.obeys(ctx, msg, msg.GetEpoch()) {
			r.onBeginHandOff(ctx, msg.GetShard())
		}
	case *messages.HandOff:
		if r.obeys(ctx, msg, msg.GetEpoch()) {
			r.onHandOff(ctx, msg)
		}
	case *messages.BeginHandOffAck:
		r.relayBeginHandOffAck(ctx, msg)
	case *messages.HandOffForwarded:
		r.relayHandOffForwarded(ctx, msg)
	case *messages.HandOffForwardedAck:
		r.onHandOffForwardedAck(ctx, msg)
	case *shardproto.HandOffReturned:
		r.onHandOffReturned(ctx, msg)
	case *actor.Terminated:
		r.onTerminated(ctx, msg.Who)
	case *messages.GracefulShutdown:
		r.onGracefulShutdown(ctx)
	case *messages.GetCurrentRegions:
		r.askCoordinator(ctx, &messages.CurrentRegions{})
	case *messages.GetClusterShardingStats:
		r.askCoordinator(ctx, &messages.ClusterShardingStats{Regions: map[string]*messages.ShardRegionStats{}})
	case *messages.GetShardCoordinatorState:
		r.askCoordinator(ctx, &messages.ShardCoordinatorState{})
	case *messages.GetShardRegionStats:
		r.onGetShardRegionStats(ctx)
	case *messages.GetShardRegionState:
		r.onGetShardRegionState(ctx)
	case *messages.GetShardRegionStatus:
		ctx.Respond(r.status())
	case *messages.StartEntity:
		r.onStartEntity(ctx, msg)
	case *SetActiveEntityLimit:
		if msg.Limit < 0 {
			r.drop(ctx, msg, fmt.Sprintf("negative active-entity limit %d", msg.Limit))
			return
		}
		ctx.Logger().Debug("shard region: active-entity limit changed", slog.String("type", r.typeName), slog.Int("limit", msg.Limit))
		r.activeEntityLimit = msg.Limit
		r.shareEntityLimit(ctx)
	case *routed:
		m := bufferedMessage{entityID: msg.entityID, message: msg.message, sender: ctx.Sender(), forwarded: msg.forwarded(), pending: msg.pending,
			header: messageHeader(ctx, nil)}
		if msg.forwarded() && msg.to != r.cluster.Self().ID {
			// The router let it pass before this node joined again.
			r.dropBuffered(ctx, msg.shard, m, earlierIncarnation(msg.to))
			return
		}
		r.deliverMessage(ctx, msg.shard, m)
		r.updateRoute(msg.shard) // the shard may have started for it
	case *messages.ShardingEnvelope:
		r.onEnvelope(ctx, msg)
	case *messages.MessageTypeKnown:
		r.onMessageTypeKnown(ctx, msg)
	case *messages.ShardStopped:
		if r.life.stoppingLocally {
			return // the answer of a shard this region stopped itself; its Terminated is what counts
		}
		r.drop(ctx, msg, fmt.Sprintf("%T is a protocol message a region does not take", msg))
	case *messages.RegisterProxy, *messages.Register, *messages.GetShardHome, *messages.ShardStarted,
		*messages.RebalanceDone, *messages.Passivate,
		*messages.StartEntityAck, *messages.GracefulShutdownReq, *messages.RegionStopped:
		// Protocol messages that only a coordinator, worker or shard takes:
		// sent here they are a mistake, never an entity's message.
		r.drop(ctx, msg, fmt.Sprintf("%T is a protocol message a region does not take", msg))
	case nil:
		r.drop(ctx, nil, "nil message")
	default:
		if r.handleMembership(ctx) {
			return
		}
		r.onUserMessage(ctx, msg)
	}
}

func (r *region) onRetryTick(ctx actor.Context) {
	// (Whether anybody is left to take the shards changes only with
	// membership events and the start of the shutdown, which check it.)
	if r.life.gracefulShutdown {
		r.tryCompleteGracefulShutdown(ctx)
	}
	r.sweepRoutes(ctx, time.Now())
	if !r.link.registered() {
		r.register(ctx)
		return
	}
	r.requestShardBufferHomes(ctx)
	r.retryHandOffForwarded(ctx)
	if r.life.gracefulShutdown {
		ctx.Request(r.link.coordinator, &messages.GracefulShutdownReq{ShardRegion: ctx.Self()})
	}
}

// homeIdleSweeps is how many whole sweep intervals a home on another node
// goes unused before the region forgets it; the interval is half the
// idle timeout (shardingconfig.Settings.HomeIdleTimeout), so a home goes between one and
// one and a half timeouts after its last use, as an idle entity does.
const homeIdleSweeps = 2

// sweepRoutes, every half home idle timeout, forgets the homes on other
// nodes that this region's messages have not used for that timeout (a
// shard ID per entity would otherwise leave one for every entity ever
// sent to) and retires the router's routes of the shards it has nothing
// of: no home that takes messages directly, no child, no buffered or
// pending message, no hand-off. A shard's next message asks the
// coordinator for its home again, as its first did.
func (r *region) sweepRoutes(ctx actor.Context, now time.Time) {
	idle := r.settings.HomeIdleTimeout()
	if r.lastSweep.IsZero() {
		r.lastSweep = now
	}
	if now.Sub(r.lastSweep) < idle/homeIdleSweeps {
		return
	}
	r.lastSweep = now
	used := func(shard string) bool {
		sr, ok := r.routes.existing(shard)
		if !ok {
			return false
		}
		h := sr.remote.Load()
		return h != nil && h.guard.takeUsed()
	}
	forgot := r.table.sweepIdleHomes(used, r.holdsShard, homeIdleSweeps)
	for _, shard := range forgot {
		r.updateRoute(shard)
	}
	left := r.routes.sweep(r.holdsShard)
	if len(forgot) > 0 {
		ctx.Logger().Debug("shard region: forgot the homes of shards unused for the idle timeout", slog.String("type", r.typeName),
			slog.Int("forgotten", len(forgot)), slog.Int("homes", len(r.table.homes)), slog.Int("routes", left), slog.Duration("idle-timeout", idle))
	}
}

// holdsShard reports whether the region has something of shard's in hand:
// a child (whose entities' routes hang on the shard's route), buffered
// messages, or a part in a hand-off.
func (r *region) holdsShard(shard string) bool {
	return r.table.alive(shard) || r.buffers.has(shard) || r.handOffs.involves(shard)
}

// receiveShardHome learns that shard lives at ref (from cmd, a ShardHome or
// ShardHomes of the coordinator).
func (r *region) receiveShardHome(ctx actor.Context, cmd proto.Message, shard string, ref *actor.PID) {
	defer r.updateRoute(shard)
	if err := wire.CheckShardID(shard); err != nil || ref == nil || ref.GetId() == "" {
		r.drop(ctx, cmd, fmt.Sprintf("ShardHome with an invalid shard (%v) or region (%v)", err, ref))
		return
	}
	isSelf := r.table.isSelf(ref)
	_, live := r.members[ref.Address]
	v, _ := r.viewOf(shard)
	step, stopLocal := decideShardHome(v, isSelf, live)
	switch step {
	case homeIgnoreGone:
		// A stale answer (the coordinator has not seen the removal yet):
		// keep buffering, ask again on the next tick.
		ctx.Logger().Debug("shard region: ignoring ShardHome on a member that is gone",
			slog.String("type", r.typeName), slog.String("shard", shard), slog.String("region", ref.String()))
		return
	case homeNotWhileShuttingDown:
		// A coordinator that took over during this region's shutdown may
		// still name it; starting the shard here would only restart its
		// entities on a leaving node. Its messages wait until the
		// coordinator, told GracefulShutdownReq again on the next tick,
		// moves the shard.
		ctx.Logger().Debug("shard region: not starting a shard while shutting down", slog.String("type", r.typeName), slog.String("shard", shard))
		return
	}
	if stopLocal {
		// Should not happen: the coordinator moves a shard only after its
		// hand-off. Akka throws, which restarts the region and stops all
		// its shards; the coordinator is the authority, so this region
		// stops its copy of the shard and follows it.
		ctx.Logger().Error("shard region: coordinator names another home for a shard this region hosts; stopping the local shard",
			slog.String("type", r.typeName), slog.String("shard", shard), slog.String("other", ref.String()))
		r.stopShard(ctx, shard)
		r.shareEntityLimit(ctx)
	}
	r.setHome(ctx, shard, ref)
	if isSelf && !r.ensureShard(ctx, shard) {
		// Its messages wait for the shard, and whatever comes later
		// queues behind them: as the old home, nothing to wait for.
		r.reportHandOffForwarded(ctx, shard, nil)
		return
	}
	r.deliverBufferedMessages(ctx, shard)
	if isSelf {
		ref = nil
	}
	r.reportHandOffForwarded(ctx, shard, ref)
}

func (r *region) setHome(ctx actor.Context, shard string, ref *actor.PID) {
	if r.table.setHome(shard, ref) {
		ctx.Watch(ref)
	}
	r.handOffs.homeLearned(shard)
}

// ensureShard makes sure shard, whose home is this region, has a running
// child, and reports whether it has. It starts none while an earlier child
// of the shard is still alive: the shard's messages wait for its
// Terminated, which starts the next one.
func (r *region) ensureShard(ctx actor.Context, shard string) bool {
	if _, ok := r.table.running(shard); ok {
		return true
	}
	if r.table.alive(shard) {
		return false
	}
	_, err := r.startShard(ctx, shard)
	switch {
	case errors.Is(err, staleness.ErrStale):
		// Expected, for every shard asked for, until this node hears of
		// its removal or confirms its membership again.
		ctx.Logger().Debug("shard region: not starting shard", slog.String("type", r.typeName), slog.String("shard", shard), slog.Any("error", err))
		return false
	case err != nil:
		ctx.Logger().Error("shard region: cannot start shard", slog.String("type", r.typeName), slog.String("shard", shard), slog.Any("error", err))
		return false
	}
	return true
}

func (r *region) onHostShard(ctx actor.Context, msg *messages.HostShard) {
	shard := msg.GetShard()
	defer r.updateRoute(shard)
	if err := wire.CheckShardID(shard); err != nil {
		r.drop(ctx, msg, fmt.Sprintf("HostShard: %v", err))
		return
	}
	if r.proxyOnly() {
		r.drop(ctx, msg, "HostShard sent to a proxy, which hosts no shards")
		return
	}
	if r.life.gracefulShutdown {
		ctx.Logger().Debug("shard region: ignoring HostShard while shutting down", slog.String("type", r.typeName), slog.String("shard", shard))
		return
	}
	if old := msg.GetForwardingOldHome(); old != nil && old.GetId() != "" {
		r.handOffs.awaitForward(shard, old, time.Now(), r.settings.Coordinator.HandOffTimeout)
	}
	r.setHome(ctx, shard, ctx.Self())
	r.table.awaitStart(shard, ctx.Sender())
	if !r.ensureShard(ctx, shard) {
		return // ShardStarted once the earlier child has terminated and the next one runs
	}
	r.shardStarted(ctx, shard)
}

// shardStarted answers the HostShard requests waiting for shard, which
// runs now, and hands it what was buffered for it.
func (r *region) shardStarted(ctx actor.Context, shard string) {
	for _, to := range r.table.takeAwaitedStarts(shard) {
		ctx.Request(to, &messages.ShardStarted{Shard: shard})
	}
	r.deliverBufferedMessages(ctx, shard)
}

// startShard spawns shard's child, named by the shard's ID as in Akka. The
// table refuses while an earlier child lives, so the name is free. It
// starts none while this node's membership is stale (staleness.ErrStale):
// the others may run the shard by now.
func (r *region) startShard(ctx actor.Context, shardID string) (*actor.PID, error) {
	if r.proxyOnly() {
		return nil, fmt.Errorf("shard region %s is a proxy and hosts no shards", r.typeName)
	}
	if r.table.alive(shardID) {
		return nil, fmt.Errorf("start shard %s: %w", shardID, errShardAlive)
	}
	pid, err := staleness.SpawnNamed(ctx, membershiphook.Of(r.cluster).Stale, shard.Props(r.typeName, shardID, r.entityProps, r.settings.Shard, r.routes.shard(shardID)), shard.EntityName(shardID))
	if err != nil {
		return nil, fmt.Errorf("spawn shard %s: %w", shardID, err)
	}
	if err := r.table.started(shardID, pid); err != nil {
		ctx.Stop(pid)
		return nil, err
	}
	r.shareEntityLimit(ctx)
	r.updateRoute(shardID)
	ctx.Logger().Debug("shard started", slog.String("type", r.typeName), slog.String("shard", shardID))
	return pid, nil
}

// stopShard stops shard's running child: it answers nothing, and the
// shard starts again here only after its Terminated.
func (r *region) stopShard(ctx actor.Context, shard string) {
	if pid, err := r.table.stop(shard); err == nil {
		ctx.Stop(pid)
	}
}

func (r *region) onTerminated(ctx actor.Context, who *actor.PID) {
	if who == nil {
		return
	}
	if r.link.registered() && who.Equal(r.link.coordinator) {
		r.coordinatorLost(ctx, "coordinator terminated")
		return
	}
	if who.Address == ctx.Self().Address && r.table.isChild(who.Id) {
		r.onShardTerminated(ctx, who)
		return
	}
	r.regionTerminated(ctx, who)
}

// onShardTerminated: a shard child is gone, with its entities. Only now
// may the shard start again here, if its home is still this region and
// messages or a HostShard wait for it.
func (r *region) onShardTerminated(ctx actor.Context, who *actor.PID) {
	shard, ended, err := r.table.terminated(who.Id)
	if err != nil {
		ctx.Logger().Error("shard region: Terminated", slog.String("type", r.typeName), slog.Any("error", err))
		return
	}
	defer r.updateRoute(shard)
	for _, to := range ended.handOffReplyTo {
		ctx.Request(to, &messages.ShardStopped{Shard: shard})
	}
	switch endOf(ended.state, r.settings.RememberEntities) {
	case shardEndRestartLater:
		backoff := r.shardFailureBackoff()
		ctx.Logger().Warn("shard stopped unexpectedly; it starts again after the shard-failure back-off, or on its next message",
			slog.String("type", r.typeName), slog.String("shard", shard), slog.Duration("backoff", backoff))
		r.timers.SendOnce(backoff, ctx.Self(), restartShard{shard: shard})
	case shardEndOnNextMessage:
		ctx.Logger().Warn("shard stopped unexpectedly; it starts again on its next message",
			slog.String("type", r.typeName), slog.String("shard", shard))
	}
	r.shareEntityLimit(ctx)
	r.afterHandOff(ctx, shard)
	if r.table.restartWanted(shard, r.buffers.has(shard), r.life.gracefulShutdown, r.life.removed) {
		if r.ensureShard(ctx, shard) {
			r.shardStarted(ctx, shard)
		}
	}
	r.tryCompleteGracefulShutdown(ctx)
}

// onRestartShard starts a remembering shard again after its failure
// back-off, if it still lives here and no message started it meanwhile.
// A start refused (this node's membership is stale) is tried again after
// the back-off, until the node hears of its removal (the shard's home is
// forgotten then) or confirms its membership again.
func (r *region) onRestartShard(ctx actor.Context, shard string) {
	defer r.updateRoute(shard)
	if !r.table.homeIsSelf(shard) || r.life.gracefulShutdown || r.life.removed {
		return
	}
	if r.ensureShard(ctx, shard) {
		r.shardStarted(ctx, shard)
		return
	}
	if !r.table.alive(shard) {
		r.timers.SendOnce(r.shardFailureBackoff(), ctx.Self(), restartShard{shard: shard})
	}
}

func (r *region) regionTerminated(ctx actor.Context, ref *actor.PID) {
	if shards := r.table.forgetRegion(ref); len(shards) > 0 {
		for _, s := range shards {
			r.updateRoute(s)
		}
		ctx.Logger().Debug("shard region: other region terminated", slog.String("type", r.typeName),
			slog.String("region", coordinator.RegionKey(ref)), slog.Int("shards", len(shards)))
	}
}

// deliverMessage is Akka's deliverMessage: to the known home, else into
// the shard's buffer (asking the coordinator when the buffer opens); see
// decideDelivery.
func (r *region) deliverMessage(ctx actor.Context, shard string, m bufferedMessage) {
	v, pid := r.viewOf(shard)
	switch decideDelivery(v, m.forwarded, membershiphook.Of(r.cluster).Stale) {
	case deliverToShard:
		r.sendToShard(ctx, pid, m)
	case deliverDropRemoved:
		r.dropBuffered(ctx, shard, m, errRemoved)
	case deliverDropStale:
		r.dropBuffered(ctx, shard, m, errStale)
	case deliverBuffer:
		r.buffer(ctx, shard, m)
	case deliverBufferAndAsk:
		r.buffer(ctx, shard, m)
		r.askHome(ctx, shard)
	case deliverStartShard:
		pid, err := r.startShard(ctx, shard)
		if err != nil {
			r.dropBuffered(ctx, shard, m, err)
			return
		}
		r.sendToShard(ctx, pid, m)
	case deliverToRegion:
		home, _ := r.table.home(shard)
		r.sendToRegion(ctx, home, shard, m)
	}
}

// viewOf is what the region's values say of shard now, and the shard's
// local actor if it runs here.
func (r *region) viewOf(shard string) (shardView, *actor.PID) {
	return shardViewOf(&r.table, &r.buffers, &r.handOffs, shard, r.life.removed, r.life.gracefulShutdown)
}

// askHome asks the coordinator, if the region has one, where shard lives.
func (r *region) askHome(ctx actor.Context, shard string) {
	if r.link.registered() {
		ctx.Request(r.link.coordinator, &messages.GetShardHome{Shard: shard})
	}
}

// updateRoute sets shard's route in the router as routeState says. A
// shard without a route needs none to be closed: it has nothing open and
// no remote home.
func (r *region) updateRoute(shard string) {
	v, _ := r.viewOf(shard)
	home, _ := r.table.home(shard)
	member, live := r.members[home.GetAddress()]
	open, remote := routeState(v, r.proxyOnly(), live)
	sr, exists := r.routes.existing(shard)
	if !exists && !open && !remote {
		return
	}
	if !exists {
		sr = r.routes.shard(shard)
	}
	// The remote home closes before the shard opens here: closing waits
	// for the sends to it under way, and for the messages a producer's
	// batch holds for it (see sequencedBatch), which a direct send to an
	// entity opened here must not overtake.
	if !remote {
		sr.closeRemote()
	}
	if sr.open.Load() != open {
		sr.open.Store(open)
	}
	if remote {
		sr.setRemote(home, member.ID)
	}
}

// deliverBufferedMessages sends on what waited for shard's home (see
// shardBuffers.releaseBuffered).
func (r *region) deliverBufferedMessages(ctx actor.Context, shard string) {
	for _, m := range r.buffers.releaseBuffered(shard, r.handOffs.awaits(shard), r.table.homeIsSelf(shard)) {
		r.deliverMessage(ctx, shard, m)
	}
	r.tryCompleteGracefulShutdown(ctx)
}
