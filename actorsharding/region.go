package actorsharding

import (
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/shardactor"
	"google.golang.org/protobuf/proto"
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

	timers      *scheduler.TimerScheduler
	cancelRetry scheduler.CancelFunc
	coordinator *actor.PID
	members     map[string]membership.Member // live members by address

	regionByShard map[string]*actor.PID
	regions       map[string]map[string]struct{} // region key -> shards
	// shards are this region's shard children, by shard id.
	shards map[string]*actor.PID
	// shardByChild maps a child's PID id back to its shard.
	shardByChild map[string]string
	shardSeq     int
	handingOff   map[string]bool // child PID id -> handing off
	buffers      map[string][]bufferedMessage
	// handedOff: shards this region handed off and whose new home it has
	// not learned yet (see onEnvelope).
	handedOff   map[string]bool
	bufferOrder []string // shards in the order their buffers were opened
	buffered    int

	gracefulShutdown bool
	// stoppingLocally: shutting down with no other member of the role up
	// to take the shards (the whole cluster is shutting down), so the
	// region stops its shards itself (see nobodyToTakeOver).
	stoppingLocally bool
	// activeEntityLimit is the region's passivation limit (0: none), which
	// its shards share evenly.
	activeEntityLimit int
	limitShared       bool // a limit was sent to the shards once
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
}

type retryTick struct{}

func (r *region) proxyOnly() bool { return r.entityProps == nil }

func (r *region) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		r.timers = scheduler.NewTimerScheduler(ctx)
		r.members = map[string]membership.Member{}
		r.regionByShard = map[string]*actor.PID{}
		r.regions = map[string]map[string]struct{}{}
		r.shards = map[string]*actor.PID{}
		r.shardByChild = map[string]string{}
		r.handingOff = map[string]bool{}
		r.buffers = map[string][]bufferedMessage{}
		r.handedOff = map[string]bool{}
		r.activeEntityLimit = r.settings.Shard.ActiveEntityLimit
		r.cluster.Subscribe(ctx.Self())
		r.cancelRetry = r.timers.SendRepeatedly(r.settings.RetryInterval, r.settings.RetryInterval, ctx.Self(), retryTick{})
		ctx.Logger().Info("shard region started", slog.String("type", r.typeName), slog.Bool("proxy", r.proxyOnly()),
			slog.String("state", StateActive))
		r.register(ctx)
	default:
		r.active(ctx)
	}
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
			ctx.Send(r.coordinator, &messages.RegionStopped{ShardRegion: ctx.Self()})
		}
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
	case *messages.RegisterAck:
		r.onRegisterAck(ctx, msg)
	case *messages.ShardHome:
		r.receiveShardHome(ctx, msg.GetShard(), msg.GetRef())
	case *messages.ShardHomes:
		for _, e := range msg.GetHomes() {
			for _, s := range e.GetShards() {
				r.receiveShardHome(ctx, s, e.GetRegion())
			}
		}
	case *messages.HostShard:
		r.onHostShard(ctx, msg.GetShard())
	case *messages.BeginHandOff:
		r.onBeginHandOff(ctx, msg.GetShard())
	case *messages.HandOff:
		r.onHandOff(ctx, msg.GetShard())
	case *actor.Terminated:
		r.onTerminated(ctx, msg.Who)
	case *messages.GracefulShutdown:
		r.onGracefulShutdown(ctx)
	case *messages.GetCurrentRegions:
		r.askCoordinator(ctx, &messages.CurrentRegions{})
	case *messages.GetClusterShardingStats:
		r.askCoordinator(ctx, &messages.ClusterShardingStats{Regions: map[string]*messages.ShardRegionStats{}})
	case *messages.GetShardRegionStats:
		r.onGetShardRegionStats(ctx)
	case *messages.GetShardRegionState:
		r.onGetShardRegionState(ctx)
	case *messages.StartEntity:
		r.onStartEntity(ctx, msg)
	case *SetActiveEntityLimit:
		if msg.Limit < 0 {
			r.drop(ctx, msg, fmt.Sprintf("negative active-entity limit %d", msg.Limit))
			return
		}
		ctx.Logger().Info("shard region: active-entity limit changed", slog.String("type", r.typeName), slog.Int("limit", msg.Limit))
		r.activeEntityLimit = msg.Limit
		r.shareEntityLimit(ctx)
	case *messages.ShardingEnvelope:
		r.onEnvelope(ctx, msg)
	case *messages.ShardStopped:
		if r.stoppingLocally {
			return // the answer of a shard this region stopped itself; its Terminated is what counts
		}
		r.drop(ctx, msg, fmt.Sprintf("%T is a protocol message a region does not take", msg))
	case *messages.RegisterProxy, *messages.Register, *messages.GetShardHome, *messages.ShardStarted,
		*messages.BeginHandOffAck, *messages.RebalanceDone, *messages.Passivate,
		*messages.StartEntityAck, *messages.GracefulShutdownReq, *messages.RegionStopped:
		// Protocol messages that only a coordinator, worker or shard takes:
		// sent here they are a mistake, never an entity's message.
		deadletter.Publish(ctx.ActorSystem(), ctx.Self(), msg, ctx.Sender(),
			fmt.Sprintf("shard region %s: %T is a protocol message a region does not take", r.typeName, msg))
	case nil:
		deadletter.Publish(ctx.ActorSystem(), ctx.Self(), nil, ctx.Sender(),
			fmt.Sprintf("shard region %s: nil message", r.typeName))
	default:
		if r.handleMembership(ctx) {
			return
		}
		r.onUserMessage(ctx, msg)
	}
}

// --- registration ---

func (r *region) register(ctx actor.Context) {
	self := r.cluster.Self()
	if self.ID == "" {
		return // not joined yet (or removed): retried on the next tick
	}
	if r.proxyOnly() {
		ctx.Request(r.coordinatorProxy, &messages.RegisterProxy{ShardRegionProxy: ctx.Self(), MemberId: self.ID})
	} else {
		ctx.Request(r.coordinatorProxy, &messages.Register{ShardRegion: ctx.Self(), MemberId: self.ID})
	}
}

func (r *region) onRegisterAck(ctx actor.Context, msg *messages.RegisterAck) {
	c := msg.GetCoordinator()
	if c == nil {
		return
	}
	if r.coordinator == nil || !r.coordinator.Equal(c) {
		ctx.Logger().Info("shard region registered with coordinator", slog.String("type", r.typeName),
			slog.String("coordinator", c.String()))
	}
	if r.coordinator != nil && !r.coordinator.Equal(c) {
		ctx.Unwatch(r.coordinator)
	}
	r.coordinator = c
	ctx.Watch(c)
	r.requestShardBufferHomes(ctx)
	if r.gracefulShutdown {
		ctx.Request(c, &messages.GracefulShutdownReq{ShardRegion: ctx.Self()})
	}
}

func (r *region) onRetryTick(ctx actor.Context) {
	// (Whether anybody is left to take the shards changes only with
	// membership events and the start of the shutdown, which check it.)
	if r.gracefulShutdown {
		r.tryCompleteGracefulShutdown(ctx)
	}
	if r.coordinator == nil {
		r.register(ctx)
		return
	}
	r.requestShardBufferHomes(ctx)
	if r.gracefulShutdown {
		ctx.Request(r.coordinator, &messages.GracefulShutdownReq{ShardRegion: ctx.Self()})
	}
}

func (r *region) requestShardBufferHomes(ctx actor.Context) {
	if r.coordinator == nil {
		return
	}
	for _, shard := range r.bufferOrder {
		ctx.Request(r.coordinator, &messages.GetShardHome{Shard: shard})
	}
}

func (r *region) coordinatorLost(ctx actor.Context, why string) {
	if r.coordinator == nil {
		return
	}
	ctx.Logger().Info("shard region lost its coordinator; registering again", slog.String("type", r.typeName),
		slog.String("why", why))
	ctx.Unwatch(r.coordinator)
	r.coordinator = nil
	r.register(ctx)
}

// --- shard homes ---

func (r *region) receiveShardHome(ctx actor.Context, shard string, ref *actor.PID) {
	if shard == "" || ref == nil {
		return
	}
	isSelf := r.isSelf(ctx, ref)
	if !isSelf {
		if _, live := r.members[ref.Address]; !live {
			// A stale answer (the coordinator has not seen the removal yet):
			// keep buffering, ask again on the next tick.
			ctx.Logger().Debug("shard region: ignoring ShardHome on a member that is gone",
				slog.String("type", r.typeName), slog.String("shard", shard), slog.String("region", ref.String()))
			return
		}
	}
	if cur, ok := r.regionByShard[shard]; ok && r.isSelf(ctx, cur) && !isSelf {
		if pid, hosting := r.shards[shard]; hosting {
			// Should not happen: the coordinator moves a shard only after
			// its hand-off. Akka throws, which restarts the region and stops
			// all its shards; the coordinator is the authority, so this
			// region stops its copy of the shard and follows it.
			ctx.Logger().Error("shard region: coordinator names another home for a shard this region hosts; stopping the local shard",
				slog.String("type", r.typeName), slog.String("shard", shard), slog.String("other", ref.String()))
			delete(r.shards, shard)
			r.handingOff[pid.Id] = true
			ctx.Stop(pid)
		}
	}
	if isSelf && r.gracefulShutdown {
		if _, running := r.shards[shard]; !running {
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
	if isSelf {
		if _, err := r.getShard(ctx, shard); err != nil {
			ctx.Logger().Error("shard region: cannot start shard", slog.String("shard", shard), slog.Any("error", err))
			return
		}
	}
	r.deliverBufferedMessages(ctx, shard)
}

func (r *region) setHome(ctx actor.Context, shard string, ref *actor.PID) {
	if old, ok := r.regionByShard[shard]; ok {
		r.forgetHome(shard, old)
	}
	r.regionByShard[shard] = ref
	delete(r.handedOff, shard)
	key := coordinatoractor.RegionKey(ref)
	set, ok := r.regions[key]
	if !ok {
		set = map[string]struct{}{}
		r.regions[key] = set
		if !r.isSelf(ctx, ref) {
			ctx.Watch(ref)
		}
	}
	set[shard] = struct{}{}
}

func (r *region) forgetHome(shard string, ref *actor.PID) {
	delete(r.regionByShard, shard)
	key := coordinatoractor.RegionKey(ref)
	if set, ok := r.regions[key]; ok {
		delete(set, shard)
		if len(set) == 0 {
			delete(r.regions, key)
		}
	}
}

func (r *region) isSelf(ctx actor.Context, pid *actor.PID) bool {
	return pid != nil && pid.Equal(ctx.Self())
}

func (r *region) onHostShard(ctx actor.Context, shard string) {
	if shard == "" {
		return
	}
	if r.proxyOnly() {
		ctx.Logger().Warn("shard region proxy: ignoring HostShard", slog.String("type", r.typeName), slog.String("shard", shard))
		return
	}
	if r.gracefulShutdown {
		ctx.Logger().Debug("shard region: ignoring HostShard while shutting down", slog.String("type", r.typeName), slog.String("shard", shard))
		return
	}
	r.setHome(ctx, shard, ctx.Self())
	if _, err := r.getShard(ctx, shard); err != nil {
		ctx.Logger().Error("shard region: cannot start shard", slog.String("shard", shard), slog.Any("error", err))
		return
	}
	ctx.Respond(&messages.ShardStarted{Shard: shard})
	r.deliverBufferedMessages(ctx, shard)
}

// getShard returns the local shard child, starting it if needed.
func (r *region) getShard(ctx actor.Context, shard string) (*actor.PID, error) {
	if pid, ok := r.shards[shard]; ok {
		return pid, nil
	}
	if r.proxyOnly() {
		return nil, fmt.Errorf("shard region %s is a proxy and hosts no shards", r.typeName)
	}
	// The sequence number keeps the name unique while an earlier child of
	// the same shard is still stopping after a hand-off; EntityName escapes
	// '$', so the suffix cannot collide with another shard's name.
	r.shardSeq++
	pid, err := ctx.SpawnNamed(shardactor.Props(r.typeName, shard, r.entityProps, r.settings.Shard),
		fmt.Sprintf("%s$%d", shardactor.EntityName(shard), r.shardSeq))
	if err != nil {
		return nil, fmt.Errorf("spawn shard %s: %w", shard, err)
	}
	r.shards[shard] = pid
	r.shardByChild[pid.Id] = shard
	r.shareEntityLimit(ctx)
	ctx.Logger().Debug("shard started", slog.String("type", r.typeName), slog.String("shard", shard))
	return pid, nil
}

func (r *region) onBeginHandOff(ctx actor.Context, shard string) {
	if ref, ok := r.regionByShard[shard]; ok {
		ctx.Logger().Debug("shard region: BeginHandOff", slog.String("type", r.typeName), slog.String("shard", shard))
		r.forgetHome(shard, ref)
	}
	// Request, not Respond: the worker matches the ack by its sender.
	if ctx.Sender() != nil {
		ctx.Request(ctx.Sender(), &messages.BeginHandOffAck{Shard: shard})
	}
}

func (r *region) onHandOff(ctx actor.Context, shard string) {
	ctx.Logger().Debug("shard region: HandOff", slog.String("type", r.typeName), slog.String("shard", shard))
	// Akka drops what it buffered for the shard between BeginHandOff and
	// now: those messages may have been forwarded by other regions, and
	// sending them on after the hand-off could reorder them.
	r.dropBuffer(ctx, shard, "messages buffered at the shard's old home during its hand-off are dropped to avoid reordering (Akka's rule)")
	r.handedOff[shard] = true
	if pid, ok := r.shards[shard]; ok {
		// The child leaves r.shards now: if the shard comes back here
		// before the old child has stopped, a new child (with a new name)
		// hosts it. Its entities cannot overlap the old ones: the
		// coordinator allocates the shard again only after ShardStopped,
		// which the old child sends once all its entities have stopped.
		delete(r.shards, shard)
		r.handingOff[pid.Id] = true
		ctx.Forward(pid)
		r.shareEntityLimit(ctx)
		return
	}
	ctx.Respond(&messages.ShardStopped{Shard: shard})
}

func (r *region) onTerminated(ctx actor.Context, who *actor.PID) {
	if who == nil {
		return
	}
	if r.coordinator != nil && who.Equal(r.coordinator) {
		r.coordinatorLost(ctx, "coordinator terminated")
		return
	}
	if who.Address == ctx.Self().Address {
		if shard, ok := r.shardByChild[who.Id]; ok {
			delete(r.shardByChild, who.Id)
			if r.handingOff[who.Id] {
				delete(r.handingOff, who.Id)
				r.tryCompleteGracefulShutdown(ctx)
				return
			}
			if cur, ok := r.shards[shard]; ok && cur.Equal(who) {
				delete(r.shards, shard)
				r.shareEntityLimit(ctx)
			}
			ctx.Logger().Warn("shard stopped unexpectedly; it starts again on its next message",
				slog.String("type", r.typeName), slog.String("shard", shard))
			if len(r.buffers[shard]) > 0 {
				if home, ok := r.regionByShard[shard]; ok && r.isSelf(ctx, home) {
					r.deliverBufferedMessages(ctx, shard)
				}
			}
			r.tryCompleteGracefulShutdown(ctx)
			return
		}
	}
	r.regionTerminated(ctx, who)
}

func (r *region) regionTerminated(ctx actor.Context, ref *actor.PID) {
	key := coordinatoractor.RegionKey(ref)
	set, ok := r.regions[key]
	if !ok {
		return
	}
	ctx.Logger().Debug("shard region: other region terminated", slog.String("type", r.typeName), slog.String("region", key),
		slog.Int("shards", len(set)))
	for shard := range set {
		delete(r.regionByShard, shard)
	}
	delete(r.regions, key)
}

// --- membership ---

func (r *region) handleMembership(ctx actor.Context) bool {
	switch msg := ctx.Message().(type) {
	case *membership.CurrentClusterState:
		r.members = map[string]membership.Member{}
		for _, m := range msg.Members {
			r.members[m.Address] = m
		}
		if r.coordinator == nil {
			r.register(ctx)
		}
	case membership.MemberUp:
		r.members[msg.Member.Address] = msg.Member
	case membership.MemberLeft:
		r.members[msg.Member.Address] = msg.Member
	case membership.MemberRemoved:
		r.onMemberRemoved(ctx, msg)
	default:
		return false
	}
	r.stopLocallyIfNobodyToTakeOver(ctx)
	return true
}

func (r *region) onMemberRemoved(ctx actor.Context, msg membership.MemberRemoved) {
	if cur, ok := r.members[msg.Member.Address]; ok && cur.ID == msg.Member.ID {
		delete(r.members, msg.Member.Address)
	}
	if msg.Member.Address == ctx.Self().Address {
		if self := r.cluster.Self(); self.ID == msg.Member.ID || self.ID == "" {
			r.selfRemoved(ctx)
			return
		}
	}
	for _, ref := range r.regionByShard {
		if ref.Address == msg.Member.Address && !r.isSelf(ctx, ref) {
			r.regionTerminated(ctx, ref)
		}
	}
	if r.coordinator != nil && r.coordinator.Address == msg.Member.Address {
		r.coordinatorLost(ctx, "its member was removed")
	}
}

// selfRemoved: this member was removed (a crash as the others see it, or
// its own TTL fencing). The others reallocate its shards at once, so it
// must stop hosting them now.
func (r *region) selfRemoved(ctx actor.Context) {
	ctx.Logger().Warn("shard region: this member was removed; stopping every shard it hosts",
		slog.String("type", r.typeName), slog.Int("shards", len(r.shards)))
	for shard, pid := range r.shards {
		r.handingOff[pid.Id] = true
		delete(r.shards, shard)
		ctx.Stop(pid)
	}
	for shard, ref := range r.regionByShard {
		r.forgetHome(shard, ref)
	}
	if r.coordinator != nil {
		ctx.Unwatch(r.coordinator)
		r.coordinator = nil
	}
}

// --- graceful shutdown ---

func (r *region) onGracefulShutdown(ctx actor.Context) {
	if !r.gracefulShutdown {
		ctx.Logger().Info("shard region: graceful shutdown starting", slog.String("type", r.typeName),
			slog.Int("shards", len(r.shards)))
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
	ctx.Logger().Info("shard region: no other member of the role is up to take the shards (the cluster is shutting down); stopping them here",
		slog.String("type", r.typeName), slog.Int("shards", len(r.shards)))
	for shard, pid := range r.shards {
		delete(r.shards, shard)
		r.handingOff[pid.Id] = true
		ctx.Request(pid, &messages.HandOff{Shard: shard})
	}
	for _, shard := range slices.Clone(r.bufferOrder) {
		r.dropBuffer(ctx, shard, clusterShuttingDown)
	}
	r.tryCompleteGracefulShutdown(ctx)
}

const clusterShuttingDown = "the cluster is shutting down: no member of the role is left up to host the shard"

func (r *region) tryCompleteGracefulShutdown(ctx actor.Context) {
	if r.gracefulShutdown && len(r.shards) == 0 && len(r.handingOff) == 0 && r.buffered == 0 {
		ctx.Logger().Info("shard region: graceful shutdown complete", slog.String("type", r.typeName))
		ctx.Stop(ctx.Self())
	}
}

func (r *region) onStopping(ctx actor.Context) {
	r.cluster.Unsubscribe(ctx.Self())
	if r.cancelRetry != nil {
		r.cancelRetry()
	}
	for _, shard := range slices.Clone(r.bufferOrder) {
		r.dropBuffer(ctx, shard, "shard region stopped with the message still buffered")
	}
}

// --- user messages ---

func (r *region) onEnvelope(ctx actor.Context, env *messages.ShardingEnvelope) {
	id := env.GetEntityId()
	if id == "" {
		r.drop(ctx, env, "ShardingEnvelope with an empty entity_id")
		return
	}
	shard := r.extractor.ShardID(id)
	if shard == "" {
		r.drop(ctx, env, fmt.Sprintf("the extractor gives no shard for entity %q", id))
		return
	}
	if env.GetShardId() != "" && env.GetShardId() != shard {
		r.drop(ctx, env, fmt.Sprintf("ShardingEnvelope names shard %q but this node's extractor maps entity %q to shard %q: the extractors of the nodes differ",
			env.GetShardId(), id, shard))
		return
	}
	if _, known := r.regionByShard[shard]; !known && env.GetShardId() != "" && r.handedOff[shard] {
		// Forwarded by another region before it heard of the hand-off, and
		// arriving after it: that region has sent its sender's later
		// messages to the new home already, so sending this one on could
		// overtake them. Dropped, as Akka drops what the old home buffered.
		r.drop(ctx, env, fmt.Sprintf("message for entity %q forwarded to the shard's old home after its hand-off; dropped to avoid reordering", id))
		// Learning the new home ends this rule for the shard.
		if r.coordinator != nil {
			ctx.Request(r.coordinator, &messages.GetShardHome{Shard: shard})
		}
		return
	}
	m, err := UnpackEnvelope(env)
	if err != nil {
		r.drop(ctx, env, err.Error())
		return
	}
	r.deliverMessage(ctx, shard, bufferedMessage{entityID: id, message: m, sender: ctx.Sender()})
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
	if shard == "" {
		r.drop(ctx, msg, fmt.Sprintf("the extractor gives no shard for entity %q", id))
		return
	}
	if r.proxyOnly() {
		if _, ok := m.(proto.Message); !ok {
			r.drop(ctx, msg, fmt.Sprintf("%T is not a protobuf message, and a proxy can only send to other nodes", m))
			return
		}
	}
	r.deliverMessage(ctx, shard, bufferedMessage{entityID: id, message: m, sender: ctx.Sender()})
}

func (r *region) onStartEntity(ctx actor.Context, msg *messages.StartEntity) {
	if msg.GetEntityId() == "" {
		r.drop(ctx, msg, "StartEntity with an empty entity_id")
		return
	}
	shard := r.extractor.ShardID(msg.GetEntityId())
	r.deliverMessage(ctx, shard, bufferedMessage{entityID: msg.GetEntityId(), message: msg, sender: ctx.Sender()})
}

// deliverMessage is Akka's deliverMessage: to the known home, else into
// the shard's buffer (asking the coordinator when the buffer opens).
func (r *region) deliverMessage(ctx actor.Context, shard string, m bufferedMessage) {
	if len(r.buffers[shard]) > 0 {
		// Older messages wait for the home: keep the order.
		r.buffer(ctx, shard, m)
		return
	}
	home, ok := r.regionByShard[shard]
	if !ok {
		r.buffer(ctx, shard, m)
		if r.coordinator != nil {
			ctx.Request(r.coordinator, &messages.GetShardHome{Shard: shard})
		}
		return
	}
	if r.isSelf(ctx, home) {
		if _, running := r.shards[shard]; !running && r.gracefulShutdown {
			r.buffer(ctx, shard, m) // see receiveShardHome
			return
		}
		pid, err := r.getShard(ctx, shard)
		if err != nil {
			r.drop(ctx, m.message, err.Error())
			return
		}
		r.sendToShard(ctx, pid, shard, m)
		return
	}
	r.sendToRegion(ctx, home, shard, m)
}

func (r *region) sendToShard(ctx actor.Context, pid *actor.PID, shard string, m bufferedMessage) {
	if se, ok := m.message.(*messages.StartEntity); ok {
		ctx.RequestWithCustomSender(pid, se, m.sender)
		return
	}
	if m.sender == nil {
		// No envelope to allocate when nobody waits for an answer.
		ctx.Send(pid, &shardactor.Deliver{EntityID: m.entityID, Message: m.message})
		return
	}
	ctx.RequestWithCustomSender(pid, &shardactor.Deliver{EntityID: m.entityID, Message: m.message}, m.sender)
}

// sendToRegion forwards to another node's region. The payload travels in a
// ShardingEnvelope (google.protobuf.Any): protoactor-go's remote crashes on
// a top-level type the receiver does not know, while an unknown Any payload
// is only an error that the receiving region reports.
func (r *region) sendToRegion(ctx actor.Context, home *actor.PID, shard string, m bufferedMessage) {
	if se, ok := m.message.(*messages.StartEntity); ok {
		ctx.RequestWithCustomSender(home, se, m.sender)
		return
	}
	pm, ok := m.message.(proto.Message)
	if !ok {
		r.drop(ctx, m.message, fmt.Sprintf("%T is not a protobuf message, so it cannot reach entity %q on %s", m.message, m.entityID, home.Address))
		return
	}
	payload, err := anypb.New(pm)
	if err != nil {
		r.drop(ctx, m.message, fmt.Sprintf("cannot encode %T for entity %q: %v", m.message, m.entityID, err))
		return
	}
	ctx.RequestWithCustomSender(home, &messages.ShardingEnvelope{EntityId: m.entityID, Message: payload, ShardId: shard}, m.sender)
}

func (r *region) buffer(ctx actor.Context, shard string, m bufferedMessage) {
	if r.stoppingLocally {
		r.drop(ctx, m.message, fmt.Sprintf("shard %s, entity %q: %s", shard, m.entityID, clusterShuttingDown))
		return
	}
	if r.buffered >= r.settings.BufferSize {
		r.drop(ctx, m.message, fmt.Sprintf("Buffer is full, dropping message (shard %s, buffer size %d)", shard, r.settings.BufferSize))
		return
	}
	if _, open := r.buffers[shard]; !open {
		r.bufferOrder = append(r.bufferOrder, shard)
	}
	r.buffers[shard] = append(r.buffers[shard], m)
	r.buffered++
	if step := r.settings.BufferSize / 10; step > 0 && r.buffered%step == 0 {
		ctx.Logger().Warn("shard region buffer usage", slog.String("type", r.typeName), slog.Int("buffered", r.buffered),
			slog.Int("buffer-size", r.settings.BufferSize))
	}
}

func (r *region) takeBuffer(shard string) []bufferedMessage {
	msgs := r.buffers[shard]
	delete(r.buffers, shard)
	r.bufferOrder = slices.DeleteFunc(r.bufferOrder, func(s string) bool { return s == shard })
	r.buffered -= len(msgs)
	return msgs
}

func (r *region) deliverBufferedMessages(ctx actor.Context, shard string) {
	msgs := r.takeBuffer(shard)
	for _, m := range msgs {
		r.deliverMessage(ctx, shard, m)
	}
	r.tryCompleteGracefulShutdown(ctx)
}

func (r *region) dropBuffer(ctx actor.Context, shard, reason string) {
	for _, m := range r.takeBuffer(shard) {
		deadletter.Publish(ctx.ActorSystem(), ctx.Self(), m.message, m.sender,
			fmt.Sprintf("shard region %s: shard %s, entity %q: %s", r.typeName, shard, m.entityID, reason))
	}
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

// onGetShardRegionStats answers with the entity count of every local shard.
func (r *region) onGetShardRegionStats(ctx actor.Context) {
	r.queryShards(ctx, &shardactor.GetShardStats{}, func(answers []shardAnswer) proto.Message {
		out := &messages.ShardRegionStats{Stats: map[string]int32{}}
		for _, a := range answers {
			if st, ok := a.answer.(*shardactor.ShardStats); ok {
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
	r.queryShards(ctx, &shardactor.GetCurrentShardState{}, func(answers []shardAnswer) proto.Message {
		out := &messages.CurrentShardRegionState{}
		for _, a := range answers {
			if st, ok := a.answer.(*shardactor.CurrentShardState); ok {
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
	shards := r.localShards()
	root := ctx.ActorSystem().Root
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

func (r *region) localShards() []shardRef {
	out := make([]shardRef, 0, len(r.shards))
	for s, pid := range r.shards {
		out = append(out, shardRef{shard: s, pid: pid})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].shard < out[j].shard })
	return out
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
	share := ShardLimit(r.activeEntityLimit, len(r.shards))
	for _, pid := range r.shards {
		ctx.Send(pid, &shardactor.SetActiveEntityLimit{Limit: share})
	}
}
