package actorsharding

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/guard"
	"github.com/protoshard/protoshard/internal/metrics"
	"github.com/protoshard/protoshard/internal/shardproto"
	"github.com/protoshard/protoshard/internal/staleness"
	"github.com/protoshard/protoshard/internal/throttle"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/shardactor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// StateActive is the ShardRegion's one state (Akka's region is not an FSM
// either); it appears in logs.
const StateActive = "active"

// region is Akka's ShardRegion. A proxy-only region (entityProps nil)
// routes but never hosts a shard.
type region struct {
	typeName    string
	entityProps *actor.Props // nil: proxy only
	extractor   MessageExtractor
	settings    Settings
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
	cancelRetry scheduler.CancelFunc
	// registrations: when the region registers again while it has no
	// coordinator, besides the periodic retry.
	registrations registrationSchedule
	// lastSweep: when the region last swept its routes and the homes on
	// other nodes (see sweepRoutes).
	lastSweep time.Time
	// coordinator is the coordinator this region registered with, and
	// epoch its epoch: the only source of commands the region obeys.
	coordinator *actor.PID
	epoch       uint64
	// maxEpoch is the highest coordinator epoch this region has obeyed.
	maxEpoch uint64
	// registeredAs is the member incarnation this region last registered
	// as (see messages.ShardRegionStatus.RegisteredMemberId).
	registeredAs string
	members      map[string]membership.Member // live members by address
	// identity is the extractor's, sent with Register (see
	// IdentifiedExtractor).
	identity coordinatoractor.ExtractorIdentity
	// refusals rate-limits the log of refused registrations.
	refusals *throttle.Limiter

	table   shardTable
	buffers shardBuffers
	// handOffs: the planned hand-offs this region takes part in, as the
	// shard's old home or as a region that forwarded to it.
	handOffs handOffs

	// removed: this member was removed from the cluster (failure detection
	// or its own fencing) and has not joined again as removedID's
	// successor. The others may host its shards already, so it hosts and
	// forwards nothing: messages fail fast with a dead-letter event.
	removed   bool
	removedID string

	gracefulShutdown bool
	// stoppingLocally: shutting down with no other member of the role up
	// to take the shards (the whole cluster is shutting down), so the
	// region stops its shards itself (see nobodyToTakeOver).
	stoppingLocally bool
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

// ShardLimit is one shard's share of a region's active-entity limit: the
// limit divided by the number of shards, at least 1 (a share of 0 would
// mean "no limit" to the shard). 0 (no limit) stays 0.
func ShardLimit(regionLimit, shards int) int {
	if regionLimit <= 0 {
		return 0
	}
	if shards <= 1 {
		return regionLimit
	}
	return max(1, regionLimit/shards)
}

type bufferedMessage struct {
	entityID string
	message  any // the entity's message, or *messages.StartEntity
	sender   *actor.PID
	// forwarded: another region sent it here (in a ShardingEnvelope, or
	// by itself to the region's entry).
	forwarded bool
	// pending marks it on the slow way for the router (see
	// shardproto.Pending); released when it leaves the region for good.
	pending *shardproto.Pending
	// header: the message's header (a trace context), or nil.
	header map[string]string
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

func (r *region) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		r.timers = scheduler.NewTimerScheduler(ctx)
		r.members = map[string]membership.Member{}
		r.table = newShardTable(ctx.Self())
		if r.routes == nil {
			r.routes = newRouteTable(ctx.ActorSystem(), r.typeName, &typeIDs{})
		}
		r.buffers = newShardBuffers(r.settings.BufferSize)
		r.handOffs = newHandOffs()
		r.activeEntityLimit = r.settings.Shard.ActiveEntityLimit
		r.metrics = metrics.For(ctx.ActorSystem()).Type(r.typeName)
		r.cluster.Subscribe(ctx.Self())
		r.cancelRetry = r.timers.SendRepeatedly(r.settings.RetryInterval, r.settings.RetryInterval, ctx.Self(), retryTick{})
		r.registrations = newRegistrationSchedule(r.settings.RetryInterval)
		ctx.Logger().Debug("shard region started", slog.String("type", r.typeName), slog.Bool("proxy", r.proxyOnly()),
			slog.String("state", StateActive))
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
		if r.coordinator != nil {
			ctx.Request(r.coordinator, &messages.RegionStopped{ShardRegion: ctx.Self()})
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
		if r.stoppingLocally {
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

// --- registration and fencing ---

// startRegistration registers now and schedules the next attempts (see
// registrationSchedule), when the region has no coordinator: it started,
// joined, lost its coordinator, or the oldest member changed.
func (r *region) startRegistration(ctx actor.Context) {
	if r.coordinator != nil || r.removed || r.cluster.Self().ID == "" {
		return // registered; or removed, or not joined yet: started again once (re-)joined
	}
	r.register(ctx)
	if retry, delay, ok := r.registrations.start(); ok {
		r.timers.SendOnce(delay, ctx.Self(), retry)
	}
}

func (r *region) onRegisterRetry(ctx actor.Context, retry registerRetry) {
	if r.coordinator != nil {
		r.registrations.stop()
		return
	}
	current, next, delay, ok := r.registrations.due(retry)
	if !current {
		return
	}
	r.register(ctx)
	if ok {
		r.timers.SendOnce(delay, ctx.Self(), next)
	}
}

func (r *region) register(ctx actor.Context) {
	self := r.cluster.Self()
	if self.ID == "" || r.removed {
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
	if r.coordinator != nil || r.removed {
		ctx.Logger().Debug("shard region: a refusal of an earlier registration; ignored", slog.String("type", r.typeName),
			slog.Any("coordinator", msg.GetCoordinator()), slog.Bool("registered", r.coordinator != nil))
		return
	}
	// No sender: proto.actor would answer the event with a
	// DeadLetterResponse to it.
	deadletter.PublishError(ctx.ActorSystem(), msg.GetCoordinator(), r.registration(ctx, r.cluster.Self().ID), nil,
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
	if r.removed {
		r.drop(ctx, msg, "RegisterAck while this member is removed from the cluster")
		return
	}
	if r.coordinator != nil && r.coordinator.Equal(c) && r.epoch == msg.GetEpoch() {
		r.requestShardBufferHomes(ctx)
		return // a late answer to a Register resent before the first ack
	}
	oldest, _ := membership.Oldest(r.memberList(), r.settings.Role)
	accept, why := acceptCoordinator(r.maxEpoch, msg.GetEpoch(), c.GetAddress() == oldest.Address && oldest.Address != "")
	if !accept {
		r.drop(ctx, msg, why)
		return
	}
	if why != "" {
		ctx.Logger().Warn("shard region: "+why, slog.String("type", r.typeName), slog.String("coordinator", c.String()))
	}
	ctx.Logger().Debug("shard region registered with coordinator", slog.String("type", r.typeName),
		slog.String("coordinator", c.String()), slog.Uint64("epoch", msg.GetEpoch()))
	if r.coordinator != nil && !r.coordinator.Equal(c) {
		ctx.Unwatch(r.coordinator)
	}
	r.coordinator = c
	r.registrations.stop()
	r.epoch = msg.GetEpoch()
	r.maxEpoch = max(r.maxEpoch, r.epoch)
	r.registeredAs = r.cluster.Self().ID
	ctx.Watch(c)
	r.requestShardBufferHomes(ctx)
	if r.gracefulShutdown {
		ctx.Request(c, &messages.GracefulShutdownReq{ShardRegion: ctx.Self()})
	}
}

// acceptCoordinator decides whether a region follows the coordinator of a
// RegisterAck at epoch, having obeyed coordinators up to maxEpoch. A lower
// epoch is a stale coordinator (an old ack, a paused node), unless the
// coordinator runs on the oldest member, where the membership says the
// coordinator is: then the store's versions went back (Consul lost its
// data, or it was restored from an older snapshot), and why says so.
func acceptCoordinator(maxEpoch, epoch uint64, onOldest bool) (accept bool, why string) {
	switch {
	case epoch >= maxEpoch:
		return true, ""
	case onOldest:
		return true, fmt.Sprintf("coordinator epoch %d is below the highest seen (%d) but it runs on the oldest member: "+
			"its state store was reset or restored; following it", epoch, maxEpoch)
	default:
		return false, fmt.Sprintf("RegisterAck from a stale coordinator: epoch %d, below the highest seen (%d), and not on the oldest member",
			epoch, maxEpoch)
	}
}

// obeys tells whether a coordinator command (msg, at epoch) comes from the
// coordinator this region registered with, or one of its rebalance
// workers, at its epoch; anything else is dropped with the reason. A
// command from a newer epoch, sent by a coordinator of this type on a live
// member, means the region missed a coordinator change: it registers
// again. Anyone else's is only dropped.
func (r *region) obeys(ctx actor.Context, msg proto.Message, epoch uint64) bool {
	why := commandRejection(r.coordinator, r.epoch, ctx.Sender(), epoch)
	if why == "" {
		return true
	}
	r.drop(ctx, msg, why)
	_, live := r.members[ctx.Sender().GetAddress()]
	if r.coordinator != nil && missedCoordinatorChange(r.coordinatorID(), r.maxEpoch, ctx.Sender(), epoch, live) {
		r.coordinatorLost(ctx, fmt.Sprintf("a command at epoch %d, above the registered coordinator's %d", epoch, r.epoch))
	}
	return false
}

// coordinatorID is the process ID of this type's coordinator on whichever
// member runs it: the child of the coordinator's singleton (see
// coordinatoractor.SupervisorProps).
func (r *region) coordinatorID() string {
	return CoordinatorManagerName(r.typeName) + "/" + withSingletonName(r.settings.Singleton).SingletonName + "/" + coordinatoractor.CoordinatorName
}

// missedCoordinatorChange tells whether a command at epoch from sender
// that the region rejected means that a newer coordinator runs: the epoch
// is above every epoch the region obeyed (maxEpoch), and sender is the
// coordinator of this type (its process ID is coordinatorID) or one of its
// workers, on a live member. A higher epoch from any other sender (an
// unrelated actor, a message forged with that epoch) changes nothing.
func missedCoordinatorChange(coordinatorID string, maxEpoch uint64, sender *actor.PID, epoch uint64, liveMember bool) bool {
	if sender == nil || epoch <= maxEpoch || !liveMember {
		return false
	}
	id := sender.GetId()
	return id == coordinatorID || strings.HasPrefix(id, coordinatorID+"/")
}

// commandRejection says why a region registered with coordinator at
// coordinatorEpoch must not obey a command from sender at epoch, or "".
// A command comes from the coordinator itself or from one of its
// rebalance workers, which are its children (their PID ids extend its id).
func commandRejection(coordinator *actor.PID, coordinatorEpoch uint64, sender *actor.PID, epoch uint64) string {
	switch {
	case coordinator == nil:
		return "coordinator command while the region is not registered with a coordinator"
	case sender == nil:
		return "coordinator command without a sender"
	case !sender.Equal(coordinator) && !isChildOf(sender, coordinator):
		return fmt.Sprintf("coordinator command from %s, which is neither the coordinator the region registered with (%s) nor one of its workers",
			sender, coordinator)
	case epoch != coordinatorEpoch:
		return fmt.Sprintf("coordinator command at epoch %d; the registered coordinator's epoch is %d", epoch, coordinatorEpoch)
	}
	return ""
}

// isChildOf reports whether pid names a descendant of parent: proto.actor
// names a child "<parent id>/<name>".
func isChildOf(pid, parent *actor.PID) bool {
	return pid.GetAddress() == parent.GetAddress() && strings.HasPrefix(pid.GetId(), parent.GetId()+"/")
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

func (r *region) onRetryTick(ctx actor.Context) {
	// (Whether anybody is left to take the shards changes only with
	// membership events and the start of the shutdown, which check it.)
	if r.gracefulShutdown {
		r.tryCompleteGracefulShutdown(ctx)
	}
	r.sweepRoutes(ctx, time.Now())
	if r.coordinator == nil {
		r.register(ctx)
		return
	}
	r.requestShardBufferHomes(ctx)
	r.retryHandOffForwarded(ctx)
	if r.gracefulShutdown {
		ctx.Request(r.coordinator, &messages.GracefulShutdownReq{ShardRegion: ctx.Self()})
	}
}

// homeIdleSweeps is how many whole sweep intervals a home on another node
// goes unused before the region forgets it; the interval is half the
// idle timeout (Settings.homeIdleTimeout), so a home goes between one and
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
	idle := r.settings.homeIdleTimeout()
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

func (r *region) requestShardBufferHomes(ctx actor.Context) {
	if r.coordinator == nil {
		return
	}
	for _, shard := range r.buffers.shards() {
		ctx.Request(r.coordinator, &messages.GetShardHome{Shard: shard})
	}
}

func (r *region) coordinatorLost(ctx actor.Context, why string) {
	if r.coordinator == nil {
		return
	}
	ctx.Logger().Debug("shard region lost its coordinator; registering again", slog.String("type", r.typeName),
		slog.String("why", why))
	ctx.Unwatch(r.coordinator)
	r.coordinator = nil
	r.startRegistration(ctx)
}

// --- shard homes ---

// receiveShardHome learns that shard lives at ref (from cmd, a ShardHome or
// ShardHomes of the coordinator).
func (r *region) receiveShardHome(ctx actor.Context, cmd proto.Message, shard string, ref *actor.PID) {
	defer r.updateRoute(shard)
	if err := messages.CheckShardID(shard); err != nil || ref == nil || ref.GetId() == "" {
		r.drop(ctx, cmd, fmt.Sprintf("ShardHome with an invalid shard (%v) or region (%v)", err, ref))
		return
	}
	isSelf := r.table.isSelf(ref)
	if !isSelf {
		if _, live := r.members[ref.Address]; !live {
			// A stale answer (the coordinator has not seen the removal yet):
			// keep buffering, ask again on the next tick.
			ctx.Logger().Debug("shard region: ignoring ShardHome on a member that is gone",
				slog.String("type", r.typeName), slog.String("shard", shard), slog.String("region", ref.String()))
			return
		}
		if _, err := r.table.stop(shard); err == nil {
			// Should not happen: the coordinator moves a shard only after
			// its hand-off. Akka throws, which restarts the region and stops
			// all its shards; the coordinator is the authority, so this
			// region stops its copy of the shard and follows it.
			pid, _, _ := r.table.child(shard)
			ctx.Logger().Error("shard region: coordinator names another home for a shard this region hosts; stopping the local shard",
				slog.String("type", r.typeName), slog.String("shard", shard), slog.String("other", ref.String()))
			ctx.Stop(pid)
			r.shareEntityLimit(ctx)
		}
	}
	if isSelf && r.gracefulShutdown {
		if _, running := r.table.running(shard); !running {
			// A coordinator that took over during this region's shutdown
			// may still name it; starting the shard here would only
			// restart its entities on a leaving node. Its messages wait
			// until the coordinator, told GracefulShutdownReq again on the
			// next tick, moves the shard.
			ctx.Logger().Debug("shard region: not starting a shard while shutting down", slog.String("type", r.typeName), slog.String("shard", shard))
			return
		}
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
	if err := messages.CheckShardID(shard); err != nil {
		r.drop(ctx, msg, fmt.Sprintf("HostShard: %v", err))
		return
	}
	if r.proxyOnly() {
		r.drop(ctx, msg, "HostShard sent to a proxy, which hosts no shards")
		return
	}
	if r.gracefulShutdown {
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
func (r *region) startShard(ctx actor.Context, shard string) (*actor.PID, error) {
	if r.proxyOnly() {
		return nil, fmt.Errorf("shard region %s is a proxy and hosts no shards", r.typeName)
	}
	if r.table.alive(shard) {
		return nil, fmt.Errorf("start shard %s: %w", shard, errShardAlive)
	}
	pid, err := staleness.SpawnNamed(ctx, r.cluster.Stale, shardactor.Props(r.typeName, shard, r.entityProps, r.settings.Shard, r.routes.shard(shard)), shardactor.EntityName(shard))
	if err != nil {
		return nil, fmt.Errorf("spawn shard %s: %w", shard, err)
	}
	if err := r.table.started(shard, pid); err != nil {
		ctx.Stop(pid)
		return nil, err
	}
	r.shareEntityLimit(ctx)
	r.updateRoute(shard)
	ctx.Logger().Debug("shard started", slog.String("type", r.typeName), slog.String("shard", shard))
	return pid, nil
}

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
	to := ack.GetReplyTo()
	switch {
	case to == nil:
		r.drop(ctx, ack, "BeginHandOffAck without a worker to relay it to: a region does not take acks")
	case r.coordinator == nil || !isChildOf(to, r.coordinator):
		r.drop(ctx, ack, fmt.Sprintf("BeginHandOffAck to relay to %s, which is not a worker of this region's coordinator (%v)", to, r.coordinator))
	default:
		ctx.Request(to, &messages.BeginHandOffAck{Shard: ack.GetShard(), Region: ack.GetRegion()})
	}
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
	if r.coordinator == nil {
		ctx.Logger().Debug("shard region: HandOffForwarded while without a coordinator; the old home repeats it",
			slog.String("type", r.typeName), slog.String("shard", msg.GetShard()))
		return
	}
	ctx.Request(r.coordinator, msg)
}

// reportHandOffForwarded: as the old home of shard, this region has
// forwarded what it held to the new home (via, nil if it is the new home
// itself or nothing was forwarded): it reports so, through via so that
// the report follows those messages.
func (r *region) reportHandOffForwarded(ctx actor.Context, shard string, via *actor.PID) {
	if owes, reported := r.handOffs.owes(shard); !owes || reported {
		return
	}
	msg := &messages.HandOffForwarded{Shard: shard, OldHome: ctx.Self()}
	switch {
	case via != nil:
		ctx.Request(via, msg)
	case r.coordinator != nil:
		ctx.Request(r.coordinator, msg)
	default:
		return // reported on a later tick, once registered
	}
	if err := r.handOffs.reported(shard, via); err != nil {
		ctx.Logger().Error("shard region: HandOffForwarded", slog.String("type", r.typeName), slog.Any("error", err))
	}
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
		if r.coordinator != nil {
			ctx.Request(r.coordinator, &messages.GetShardHome{Shard: shard})
		}
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
	if r.removed || r.stoppingLocally {
		reason := errRemoved
		if r.stoppingLocally {
			reason = errClusterShuttingDown
		}
		for _, m := range msgs {
			r.dropBuffered(ctx, msg.Shard, m, reason)
		}
		return
	}
	r.buffers.prepend(msg.Shard, msgs)
}

func (r *region) onHandOffForwardedAck(ctx actor.Context, msg *messages.HandOffForwardedAck) {
	if r.coordinator == nil || !r.coordinator.Equal(ctx.Sender()) {
		r.drop(ctx, msg, fmt.Sprintf("HandOffForwardedAck from %v, not this region's coordinator (%v)", ctx.Sender(), r.coordinator))
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
	for shard, via := range r.handOffs.resends() {
		if via != nil {
			if _, live := r.members[via.Address]; live {
				ctx.Request(via, &messages.HandOffForwarded{Shard: shard, OldHome: ctx.Self()})
				continue
			}
		}
		ctx.Request(r.coordinator, &messages.HandOffForwarded{Shard: shard, OldHome: ctx.Self()})
	}
	for shard := range r.handOffs.owed {
		if !r.table.alive(shard) {
			r.afterHandOff(ctx, shard)
		}
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
	pid, state, alive := r.table.child(shard)
	switch {
	case !alive:
		ctx.Respond(&messages.ShardStopped{Shard: shard})
		r.afterHandOff(ctx, shard)
	case state == shardRunning:
		if _, err := r.table.handOff(shard); err != nil {
			ctx.Logger().Error("shard region: HandOff", slog.String("type", r.typeName), slog.Any("error", err))
			return
		}
		ctx.Forward(pid)
		r.shareEntityLimit(ctx)
	case state == shardHandingOff:
		// The shard answers every HandOff it gets, a repeated one too.
		ctx.Forward(pid)
	default:
		// Stopped by this region, it answers nobody: the region answers
		// for it once it has terminated.
		if err := r.table.awaitStopped(shard, ctx.Sender()); err != nil {
			ctx.Logger().Error("shard region: HandOff", slog.String("type", r.typeName), slog.Any("error", err))
		}
	}
}

func (r *region) onTerminated(ctx actor.Context, who *actor.PID) {
	if who == nil {
		return
	}
	if r.coordinator != nil && who.Equal(r.coordinator) {
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
	if ended.state == shardRunning && r.settings.RememberEntities {
		// As Akka's region: its remembered entities run again without
		// waiting for a message, after shard-failure-backoff.
		backoff := r.settings.Shard.WithDefaults().ShardFailureBackoff
		ctx.Logger().Warn("shard stopped unexpectedly; it starts again after the shard-failure back-off, or on its next message",
			slog.String("type", r.typeName), slog.String("shard", shard), slog.Duration("backoff", backoff))
		r.timers.SendOnce(backoff, ctx.Self(), restartShard{shard: shard})
	} else if ended.state == shardRunning {
		ctx.Logger().Warn("shard stopped unexpectedly; it starts again on its next message",
			slog.String("type", r.typeName), slog.String("shard", shard))
	}
	r.shareEntityLimit(ctx)
	r.afterHandOff(ctx, shard)
	if r.table.homeIsSelf(shard) && !r.gracefulShutdown && !r.removed &&
		(r.buffers.has(shard) || r.table.startAwaited(shard)) {
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
	if !r.table.homeIsSelf(shard) || r.gracefulShutdown || r.removed {
		return
	}
	if r.ensureShard(ctx, shard) {
		r.shardStarted(ctx, shard)
		return
	}
	if !r.table.alive(shard) {
		r.timers.SendOnce(r.settings.Shard.WithDefaults().ShardFailureBackoff, ctx.Self(), restartShard{shard: shard})
	}
}

func (r *region) regionTerminated(ctx actor.Context, ref *actor.PID) {
	if shards := r.table.forgetRegion(ref); len(shards) > 0 {
		for _, s := range shards {
			r.updateRoute(s)
		}
		ctx.Logger().Debug("shard region: other region terminated", slog.String("type", r.typeName),
			slog.String("region", coordinatoractor.RegionKey(ref)), slog.Int("shards", len(shards)))
	}
}

// --- membership ---

// openEntry opens the region's entry for member incarnation memberID, in
// place of an earlier incarnation's.
func (r *region) openEntry(ctx actor.Context, memberID string) {
	name := regionEntryName(r.typeName, memberID)
	if r.router == nil || (r.entry != nil && r.entry.Id == name) {
		return
	}
	r.closeEntry(ctx)
	// Set, not Add: only this type's region of this member has the name,
	// and after a restart of the region actor it is there already.
	registry := ctx.ActorSystem().ProcessRegistry
	registry.LocalPIDs.GetBucket(name).Set(name, &regionEntry{router: r.router, memberID: memberID})
	r.entry = actor.NewPID(registry.Address, name)
}

func (r *region) closeEntry(ctx actor.Context) {
	if r.entry != nil {
		ctx.ActorSystem().ProcessRegistry.Remove(r.entry)
		r.entry = nil
	}
}

// onMessageTypeKnown: a live member's region knows a message type, so the
// router sends it there without an envelope from now on.
func (r *region) onMessageTypeKnown(ctx actor.Context, msg *messages.MessageTypeKnown) {
	for _, m := range r.members {
		if m.ID == msg.GetMemberId() && msg.GetTypeName() != "" {
			r.routes.types.learn(m.ID, protoreflect.FullName(msg.GetTypeName()), msg.GetTypeId())
			if msg.GetEntityIdHeader() {
				r.routes.types.learn(m.ID, takesEntityIDHeader, 0)
			}
			return
		}
	}
	// An answer that arrived after its member was removed: nothing to learn.
	ctx.Logger().Debug("shard region: MessageTypeKnown from no live member", slog.String("type", r.typeName),
		slog.String("member", msg.GetMemberId()), slog.String("message-type", msg.GetTypeName()))
}

func (r *region) handleMembership(ctx actor.Context) bool {
	switch msg := ctx.Message().(type) {
	case *membership.CurrentClusterState:
		if id := msg.Self.ID; id != "" {
			r.routes.memberID.Store(&id)
			r.openEntry(ctx, id)
		}
		before := r.members
		r.members = map[string]membership.Member{}
		for _, m := range msg.Members {
			r.memberAt(ctx, before[m.Address], m)
		}
		if r.removed && msg.Self.ID != "" && msg.Self.ID != r.removedID {
			ctx.Logger().Debug("shard region: this node joined the cluster again as a new member; registering",
				slog.String("type", r.typeName), slog.String("member", msg.Self.ID))
			r.removed = false
		}
		r.startRegistration(ctx)
	case membership.MemberUp, membership.MemberLeft, membership.MemberRemoved:
		unregistered, oldest := r.coordinator == nil, ""
		if unregistered {
			oldest = r.oldestOfRole()
		}
		switch msg := msg.(type) {
		case membership.MemberUp:
			r.memberAt(ctx, r.members[msg.Member.Address], msg.Member)
		case membership.MemberLeft:
			r.members[msg.Member.Address] = msg.Member
		case membership.MemberRemoved:
			r.onMemberRemoved(ctx, msg) // registers again if its coordinator ran there
		}
		if unregistered && r.oldestOfRole() != oldest {
			// Where the coordinator runs next (Akka's region registers
			// on every change of the oldest, too).
			r.startRegistration(ctx)
		}
	default:
		return false
	}
	r.stopLocallyIfNobodyToTakeOver(ctx)
	return true
}

// memberAt records m as the live member at its address, where before was.
// Another member there before (a process restarted on the address, whose
// removal may come later) means that the regions known there are the
// earlier incarnation's: a message sent to them now would name m as its
// incarnation, and m never hosted their shards.
func (r *region) memberAt(ctx actor.Context, before, m membership.Member) {
	if before.ID != "" && before.ID != m.ID && m.Address != ctx.Self().Address {
		for _, ref := range r.table.regionsAt(m.Address) {
			r.regionTerminated(ctx, ref)
		}
	}
	r.members[m.Address] = m
}

func (r *region) onMemberRemoved(ctx actor.Context, msg membership.MemberRemoved) {
	if cur, ok := r.members[msg.Member.Address]; ok && cur.ID == msg.Member.ID {
		delete(r.members, msg.Member.Address)
	}
	r.routes.types.forget(msg.Member.ID)
	if msg.Member.Address == ctx.Self().Address {
		if self := r.cluster.Self(); self.ID == msg.Member.ID || self.ID == "" {
			r.selfRemoved(ctx, msg)
			return
		}
	}
	for _, ref := range r.table.regionsAt(msg.Member.Address) {
		r.regionTerminated(ctx, ref)
	}
	if r.coordinator != nil && r.coordinator.Address == msg.Member.Address {
		r.coordinatorLost(ctx, "its member was removed")
	}
}

// selfRemoved: this member was removed (a crash as the others see it, or
// its own TTL fencing). The others start its shards once their removal
// margin has passed, so it stops hosting them now, drops what it buffered
// (forwarding it late would overtake the senders' later messages) and
// fails fast until it has joined again.
func (r *region) selfRemoved(ctx actor.Context, msg membership.MemberRemoved) {
	if r.removed && r.removedID == msg.Member.ID {
		return
	}
	r.removed = true
	r.removedID = msg.Member.ID
	r.routes.closeAll()
	running := r.table.runningShards()
	ctx.Logger().Warn("shard region: this member was removed; stopping every shard it hosts",
		slog.String("type", r.typeName), slog.Int("shards", len(running)), slog.Bool("graceful", msg.Graceful))
	for _, s := range running {
		if pid, err := r.table.stop(s.shard); err == nil {
			ctx.Stop(pid)
		}
	}
	r.table.forgetAllHomes()
	r.handOffs.clear()
	for _, shard := range r.buffers.shards() {
		r.dropBuffer(ctx, shard, errRemoved)
	}
	if r.coordinator != nil {
		ctx.Unwatch(r.coordinator)
		r.coordinator = nil
	}
	r.registrations.stop()
}

var errStale = fmt.Errorf("this node has not confirmed its membership within the failure detection timeout "+
	"(it was paused or cut off): the others may have removed it: %w", deadletter.ErrMemberRemoved)

var errRemoved = fmt.Errorf("this node was removed from the cluster (failure detection or its own fencing) and has not joined again: %w", deadletter.ErrMemberRemoved)

// --- graceful shutdown ---

func (r *region) onGracefulShutdown(ctx actor.Context) {
	if !r.gracefulShutdown {
		ctx.Logger().Debug("shard region: graceful shutdown starting", slog.String("type", r.typeName),
			slog.Int("shards", r.table.runningCount()))
	}
	r.gracefulShutdown = true
	if r.coordinator != nil {
		ctx.Request(r.coordinator, &messages.GracefulShutdownReq{ShardRegion: ctx.Self()})
	}
	r.stopLocallyIfNobodyToTakeOver(ctx)
	r.tryCompleteGracefulShutdown(ctx)
}

// nobodyToTakeOver tells whether a region of role on selfAddress that shuts
// down has no member to hand its shards to: it knows its own member (so
// members is a real view), and every other member with the role is
// leaving. That is a whole-cluster shutdown, such as the last nodes
// stopping together: the coordinator's member may be leaving too and its
// hand-offs never finish. Akka's analogue is preparing for a full cluster
// shutdown, where a region stops without hand-off.
func nobodyToTakeOver(members map[string]membership.Member, selfAddress, role string) bool {
	if _, known := members[selfAddress]; !known {
		return false
	}
	for addr, m := range members {
		if addr != selfAddress && m.HasRole(role) && m.Status == membership.Up {
			return false
		}
	}
	return true
}

// stopLocallyIfNobodyToTakeOver: during a graceful shutdown with nobody to
// take over, the region hands each shard off to itself: the shard stops its
// entities with the hand-off stop message, as for a move, so remembered
// entities stay remembered for the cluster's next start. What is buffered,
// and what arrives for a shard without a running home from now on, is
// dropped with a reason: no member is left to start it. An entity cannot
// run twice: the coordinator reallocates these shards only once this region
// has stopped.
func (r *region) stopLocallyIfNobodyToTakeOver(ctx actor.Context) {
	if !r.gracefulShutdown || r.stoppingLocally || r.proxyOnly() || !nobodyToTakeOver(r.members, ctx.Self().Address, r.settings.Role) {
		return
	}
	r.stoppingLocally = true
	running := r.table.runningShards()
	ctx.Logger().Debug("shard region: no other member of the role is up to take the shards (the cluster is shutting down); stopping them here",
		slog.String("type", r.typeName), slog.Int("shards", len(running)))
	for _, s := range running {
		if pid, err := r.table.handOff(s.shard); err == nil {
			ctx.Request(pid, &messages.HandOff{Shard: s.shard})
		}
	}
	for _, shard := range r.buffers.shards() {
		r.dropBuffer(ctx, shard, errClusterShuttingDown)
	}
	r.tryCompleteGracefulShutdown(ctx)
}

var errClusterShuttingDown = fmt.Errorf("the cluster is shutting down: no member of the role is left up to host the shard: %w", deadletter.ErrShuttingDown)

func (r *region) tryCompleteGracefulShutdown(ctx actor.Context) {
	if r.gracefulShutdown && r.table.liveChildren() == 0 && r.buffers.len() == 0 && r.handOffs.owedCount() == 0 {
		ctx.Logger().Debug("shard region: graceful shutdown complete", slog.String("type", r.typeName))
		ctx.Stop(ctx.Self())
	}
}

func (r *region) onStopping(ctx actor.Context) {
	r.cluster.Unsubscribe(ctx.Self())
	if r.cancelRetry != nil {
		r.cancelRetry()
	}
	for _, shard := range r.buffers.shards() {
		r.dropBuffer(ctx, shard, fmt.Errorf("shard region stopped with the message still buffered: %w", deadletter.ErrShuttingDown))
	}
}

// --- user messages ---

func (r *region) onEnvelope(ctx actor.Context, env *messages.ShardingEnvelope) {
	id := env.GetEntityId()
	if err := messages.CheckEntityID(id); err != nil {
		r.drop(ctx, env, fmt.Sprintf("ShardingEnvelope: %v", err))
		return
	}
	shard := r.extractor.ShardID(id)
	if err := messages.CheckShardID(shard); err != nil {
		r.drop(ctx, env, fmt.Sprintf("the extractor gives no valid shard for entity %q: %v", id, err))
		return
	}
	if to := env.GetToMemberId(); to != "" && to != r.cluster.Self().ID {
		deadletter.PublishError(ctx.ActorSystem(), ctx.Self(), env, ctx.Sender(), fmt.Errorf("shard region %s: entity %q: %w", r.typeName, id, earlierIncarnation(to)))
		return
	}
	if env.GetShardId() != "" && env.GetShardId() != shard {
		r.drop(ctx, env, fmt.Sprintf("ShardingEnvelope names shard %q but this node's extractor maps entity %q to shard %q: the extractors of the nodes differ",
			env.GetShardId(), id, shard))
		return
	}
	m, err := UnpackEnvelope(env)
	if err != nil {
		r.drop(ctx, env, err.Error())
		return
	}
	// Only another node's region names the incarnation it forwards to; an
	// envelope of one of this node's senders waits its turn like any
	// message of theirs.
	r.deliverMessage(ctx, shard, bufferedMessage{entityID: id, message: m, sender: ctx.Sender(), forwarded: env.GetToMemberId() != "",
		header: messageHeader(ctx, env.GetHeaders())})
}

func (r *region) onUserMessage(ctx actor.Context, msg any) {
	id, err := r.extractor.EntityID(msg)
	if err != nil || id == "" {
		if err == nil {
			err = ErrNoEntityID
		}
		r.drop(ctx, msg, fmt.Sprintf("cannot route: %v", err))
		return
	}
	if err := messages.CheckEntityID(id); err != nil {
		r.drop(ctx, msg, fmt.Sprintf("cannot route: %v", err))
		return
	}
	m, err := r.extractor.UnwrapMessage(msg)
	if err != nil {
		r.drop(ctx, msg, fmt.Sprintf("cannot unwrap the message for entity %q: %v", id, err))
		return
	}
	if m == nil {
		r.drop(ctx, msg, fmt.Sprintf("the extractor unwrapped a nil message for entity %q", id))
		return
	}
	shard := r.extractor.ShardID(id)
	if err := messages.CheckShardID(shard); err != nil {
		r.drop(ctx, msg, fmt.Sprintf("the extractor gives no valid shard for entity %q: %v", id, err))
		return
	}
	if r.proxyOnly() {
		if _, ok := m.(proto.Message); !ok {
			r.drop(ctx, msg, fmt.Sprintf("%T is not a protobuf message, and a proxy can only send to other nodes", m))
			return
		}
	}
	r.deliverMessage(ctx, shard, bufferedMessage{entityID: id, message: m, sender: ctx.Sender(), header: messageHeader(ctx, nil)})
}

func (r *region) onStartEntity(ctx actor.Context, msg *messages.StartEntity) {
	if err := messages.CheckEntityID(msg.GetEntityId()); err != nil {
		r.drop(ctx, msg, fmt.Sprintf("StartEntity: %v", err))
		return
	}
	shard := r.extractor.ShardID(msg.GetEntityId())
	if err := messages.CheckShardID(shard); err != nil {
		r.drop(ctx, msg, fmt.Sprintf("the extractor gives no valid shard for entity %q: %v", msg.GetEntityId(), err))
		return
	}
	r.deliverMessage(ctx, shard, bufferedMessage{entityID: msg.GetEntityId(), message: msg, sender: ctx.Sender()})
}

// deliverMessage is Akka's deliverMessage: to the known home, else into
// the shard's buffer (asking the coordinator when the buffer opens).
func (r *region) deliverMessage(ctx actor.Context, shard string, m bufferedMessage) {
	if r.removed {
		r.dropBuffered(ctx, shard, m, errRemoved)
		return
	}
	// While the shard's old home still forwards to this new home, what
	// other regions send is that forwarding, and goes ahead of what this
	// region's senders buffered; those wait for the end of it.
	ahead := false
	if r.handOffs.awaits(shard) {
		if !m.forwarded {
			r.buffer(ctx, shard, m)
			return
		}
		ahead = true
	}
	home, known := r.table.home(shard)
	if known && (ahead || !r.buffers.has(shard)) && r.table.isSelf(home) {
		if pid, running := r.table.running(shard); running {
			// The hot path. The shard checks that this node's membership
			// is not stale, as it must for what already waits in its
			// mailbox; checking here as well would read the clock twice.
			r.sendToShard(ctx, pid, m)
			return
		}
	}
	if r.cluster.Stale() {
		// Paused or cut off past the TTL: the others may have removed this
		// node and started its shards elsewhere, and it has not heard yet.
		r.dropBuffered(ctx, shard, m, errStale)
		return
	}
	if r.buffers.has(shard) && !ahead {
		// Older messages wait for the home: keep the order.
		r.buffer(ctx, shard, m)
		return
	}
	if !known {
		r.buffer(ctx, shard, m)
		if r.coordinator != nil {
			ctx.Request(r.coordinator, &messages.GetShardHome{Shard: shard})
		}
		return
	}
	if r.table.isSelf(home) {
		if r.gracefulShutdown || r.table.alive(shard) {
			// See receiveShardHome; or an earlier child of the shard still
			// stops: the message waits for its Terminated.
			r.buffer(ctx, shard, m)
			return
		}
		pid, err := r.startShard(ctx, shard)
		if err != nil {
			r.dropBuffered(ctx, shard, m, err)
			return
		}
		r.sendToShard(ctx, pid, m)
		return
	}
	r.sendToRegion(ctx, home, shard, m)
}

// updateRoute opens shard to direct sends while it runs here, this region
// is its home, and no old home still forwards to it; else closes it. A
// shard homed on another live node gets that home as its remote route, in
// a proxy too. A shard without a route needs none to be closed: it has
// nothing open and no remote home.
func (r *region) updateRoute(shard string) {
	_, running := r.table.running(shard)
	open := !r.proxyOnly() && running && !r.removed && r.table.homeIsSelf(shard) && !r.handOffs.awaits(shard)
	home, known := r.table.home(shard)
	member, live := r.members[home.GetAddress()]
	remote := known && live && !r.removed && !r.table.isSelf(home)
	sr, exists := r.routes.existing(shard)
	if !exists && !open && !remote {
		return
	}
	if !exists {
		sr = r.routes.shard(shard)
	}
	if sr.open.Load() != open {
		sr.open.Store(open)
	}
	if remote {
		sr.setRemote(home, member.ID)
	} else {
		sr.closeRemote()
	}
}

func (r *region) sendToShard(ctx actor.Context, pid *actor.PID, m bufferedMessage) {
	if se, ok := m.message.(*messages.StartEntity); ok {
		ctx.RequestWithCustomSender(pid, se, m.sender)
		return
	}
	d := &shardproto.Deliver{EntityID: m.entityID, Message: m.message, Pending: m.pending, Header: m.header}
	// No envelope to allocate when nobody waits for an answer.
	shardproto.Tell(ctx, pid, d, m.sender, nil)
}

// messageHeader is the header of the message ctx processes, with extra's
// entries it lacks, to keep with the message (a bufferedMessage has its
// entity ID already): nil if there is none, the usual case.
func messageHeader(ctx actor.Context, extra map[string]string) map[string]string {
	h := shardproto.HeaderOf(ctx.MessageHeader())
	delete(h, entityIDHeader)
	for k, v := range extra {
		if h == nil {
			h = make(map[string]string, len(extra))
		}
		if _, ok := h[k]; !ok {
			h[k] = v
		}
	}
	if len(h) == 0 {
		return nil
	}
	return h
}

// sendToRegion forwards to another node's region. The payload travels in a
// ShardingEnvelope (google.protobuf.Any) until that node confirmed it knows
// the type, then by itself to the region's entry: protoactor-go's remote
// crashes on a top-level type the receiver does not know, while an unknown
// Any payload is only an error that the receiving region reports.
func (r *region) sendToRegion(ctx actor.Context, home *actor.PID, shard string, m bufferedMessage) {
	member, live := r.members[home.Address]
	if !live {
		// No member incarnation to address it to, so nothing would fence
		// it there: it waits until the coordinator names a home on a live
		// member (receiveShardHome ignores the others).
		r.table.forgetHome(shard)
		r.updateRoute(shard)
		r.buffer(ctx, shard, m)
		if r.coordinator != nil {
			ctx.Request(r.coordinator, &messages.GetShardHome{Shard: shard})
		}
		return
	}
	r.table.homeUsed(shard)
	if se, ok := m.message.(*messages.StartEntity); ok {
		ctx.RequestWithCustomSender(home, se, m.sender)
		return
	}
	pm, ok := m.message.(proto.Message)
	if !ok {
		r.dropBuffered(ctx, shard, m, fmt.Errorf("%T is not a protobuf message, so it cannot reach it on %s: %w", m.message, home.Address, deadletter.ErrNotSerializable))
		return
	}
	tooLarge := func(err error) {
		m.pending.Release()
		deadletter.PublishError(ctx.ActorSystem(), ctx.Self(), m.message, m.sender,
			fmt.Errorf("shard region %s: shard %s, entity %q, to %s: %w", r.typeName, shard, m.entityID, home.Address, err))
	}
	types := r.routes.types.of(member.ID)
	if has(types, pm.ProtoReflect().Descriptor().FullName()) && sendsAsItIs(r.extractor, m.entityID, pm) {
		// The home knows the type: by itself to its entry (see entry.go).
		if err := guard.CheckSize(pm, roomLeft(r.settings.MaxMessageSize, m.header)); err != nil {
			tooLarge(err)
			return
		}
		shardproto.Tell(ctx, actor.NewPID(home.Address, regionEntryName(r.typeName, member.ID)), pm, m.sender, m.header)
		m.pending.Release()
		return
	}
	if out, n, ok := withEntityID(types, m.entityID, nil, pm, m.sender, m.header); ok {
		// The message does not name its entity (an EntityRef's, or one the
		// extractor unwraps): the ID goes with it (see withEntityID).
		if n > r.settings.MaxMessageSize {
			tooLarge(fmt.Errorf("%T with its entity ID encodes to about %d bytes, more than the %d a remote node accepts: %w",
				pm, n, r.settings.MaxMessageSize, deadletter.ErrMessageTooLarge))
			return
		}
		ctx.Send(actor.NewPID(home.Address, regionEntryName(r.typeName, member.ID)), out)
		m.pending.Release()
		return
	}
	payload, err := anypb.New(pm)
	if err != nil {
		r.dropBuffered(ctx, shard, m, fmt.Errorf("cannot encode %T: %w: %w", m.message, deadletter.ErrNotSerializable, err))
		return
	}
	env := &messages.ShardingEnvelope{EntityId: m.entityID, Message: payload, ShardId: shard, ToMemberId: member.ID,
		KnownTypeAckTo: knownTypeAckTo(types, pm, ctx.ActorSystem().Address())}
	if err := guard.CheckSize(env, roomLeft(r.settings.MaxMessageSize, m.header)); err != nil {
		tooLarge(err)
		return
	}
	shardproto.Tell(ctx, home, env, m.sender, m.header)
	m.pending.Release()
}

func (r *region) buffer(ctx actor.Context, shard string, m bufferedMessage) {
	if r.stoppingLocally {
		r.dropBuffered(ctx, shard, m, errClusterShuttingDown)
		return
	}
	if err := r.buffers.add(shard, m); err != nil {
		r.dropBuffered(ctx, shard, m, err)
		return
	}
	if step := r.settings.BufferSize / 10; step > 0 && r.buffers.len()%step == 0 {
		ctx.Logger().Warn("shard region buffer usage", slog.String("type", r.typeName), slog.Int("buffered", r.buffers.len()),
			slog.Int("buffer-size", r.settings.BufferSize))
	}
}

// deliverBufferedMessages sends on what waited for shard's home. At the
// home itself, what other regions forwarded goes first: the old home's
// forwarding of a hand-off holds the older messages of this region's own
// senders (see deliverMessage); while it still forwards, only that goes.
func (r *region) deliverBufferedMessages(ctx actor.Context, shard string) {
	var msgs []bufferedMessage
	home, known := r.table.home(shard)
	switch {
	case r.handOffs.awaits(shard):
		msgs = r.buffers.takeForwarded(shard)
	case known && r.table.isSelf(home):
		msgs = append(r.buffers.takeForwarded(shard), r.buffers.take(shard)...)
	default:
		msgs = r.buffers.take(shard)
	}
	for _, m := range msgs {
		r.deliverMessage(ctx, shard, m)
	}
	r.tryCompleteGracefulShutdown(ctx)
}

func (r *region) dropBuffer(ctx actor.Context, shard string, reason error) {
	for _, m := range r.buffers.take(shard) {
		r.dropBuffered(ctx, shard, m, reason)
	}
}

// dropBuffered reports m, a message for an entity of shard, as dropped.
func (r *region) dropBuffered(ctx actor.Context, shard string, m bufferedMessage, reason error) {
	m.pending.Release()
	deadletter.PublishError(ctx.ActorSystem(), ctx.Self(), m.message, m.sender,
		fmt.Errorf("shard region %s: shard %s, entity %q: %w", r.typeName, shard, m.entityID, reason))
}

func (r *region) drop(ctx actor.Context, msg any, reason string) {
	deadletter.Publish(ctx.ActorSystem(), ctx.Self(), msg, ctx.Sender(), fmt.Sprintf("shard region %s: %s", r.typeName, reason))
}

// --- queries ---

// askCoordinator forwards a query the coordinator answers; without a
// coordinator the answer is empty at once (as Akka's region).
func (r *region) askCoordinator(ctx actor.Context, empty proto.Message) {
	if r.coordinator == nil {
		ctx.Respond(empty)
		return
	}
	ctx.Forward(r.coordinator)
}

// status answers GetShardRegionStatus, from the region's own state.
func (r *region) status() *messages.ShardRegionStatus {
	st := &messages.ShardRegionStatus{TypeName: r.typeName, RegisteredMemberId: r.registeredAs, Proxy: r.proxyOnly()}
	if r.coordinator != nil {
		st.RegisteredWithCoordinator, st.Coordinator, st.Epoch = true, r.coordinator, r.epoch
	}
	return st
}

// onGetShardRegionStats answers with the entity count of every local shard.
func (r *region) onGetShardRegionStats(ctx actor.Context) {
	r.queryShards(ctx, &shardproto.GetShardStats{}, func(answers []shardAnswer) proto.Message {
		out := &messages.ShardRegionStats{Stats: map[string]int32{}}
		for _, a := range answers {
			if st, ok := a.answer.(*shardproto.ShardStats); ok {
				out.Stats[a.shard] = int32(st.EntityCount)
			} else {
				out.Failed = append(out.Failed, a.shard)
			}
		}
		return out
	})
}

// onGetShardRegionState answers with the entity IDs of every local shard.
func (r *region) onGetShardRegionState(ctx actor.Context) {
	r.queryShards(ctx, &shardproto.GetCurrentShardState{}, func(answers []shardAnswer) proto.Message {
		out := &messages.CurrentShardRegionState{}
		for _, a := range answers {
			if st, ok := a.answer.(*shardproto.CurrentShardState); ok {
				out.Shards = append(out.Shards, &messages.ShardState{ShardId: a.shard, EntityIds: st.EntityIDs})
			} else {
				out.Failed = append(out.Failed, a.shard)
			}
		}
		return out
	})
}

// queryShards asks every local shard q off the actor (the answer waits for
// the slowest shard, up to the query timeout) and sends the sender what
// build makes of the answers; a shard that does not answer has a nil one.
func (r *region) queryShards(ctx actor.Context, q any, build func([]shardAnswer) proto.Message) {
	requester := ctx.Sender()
	if requester == nil {
		return
	}
	shards := r.table.runningShards()
	root := guard.Root(ctx.ActorSystem(), r.settings.MaxMessageSize)
	timeout := r.settings.ShardRegionQueryTimeout
	go func() {
		root.Send(requester, build(askShards(root, shards, q, timeout)))
	}()
}

type shardRef struct {
	shard string
	pid   *actor.PID
}

type shardAnswer struct {
	shard  string
	answer any
}

// askShards asks every shard at once and waits for all answers or the
// timeout; a shard that fails has a nil answer.
func askShards(root *actor.RootContext, shards []shardRef, q any, timeout time.Duration) []shardAnswer {
	futures := make([]*actor.Future, len(shards))
	for i, s := range shards {
		futures[i] = root.RequestFuture(s.pid, q, timeout)
	}
	out := make([]shardAnswer, len(shards))
	for i, f := range futures {
		res, err := f.Result()
		if err != nil {
			res = nil
		}
		out[i] = shardAnswer{shard: shards[i].shard, answer: res}
	}
	return out
}

// shareEntityLimit tells every shard its share of the region's limit; the
// shares change with the number of shards (as Akka's region does).
func (r *region) shareEntityLimit(ctx actor.Context) {
	if r.activeEntityLimit <= 0 && !r.limitShared {
		return // no limit was ever set: nothing to tell
	}
	r.limitShared = true
	running := r.table.runningShards()
	share := ShardLimit(r.activeEntityLimit, len(running))
	for _, s := range running {
		ctx.Send(s.pid, &shardproto.SetActiveEntityLimit{Limit: share})
	}
}
