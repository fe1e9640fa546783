package coordinatoractor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/rebalanceworker"
)

// State names of the coordinator; they appear in logs.
const (
	StateWaitingForState = "waitingForState"
	StateActive          = "active"
)

// GetCoordinatorState asks a coordinator for a copy of its State; the
// answer is a *CurrentCoordinatorState. Local only (tests, diagnostics).
type GetCoordinatorState struct{}

// CurrentCoordinatorState answers GetCoordinatorState.
type CurrentCoordinatorState struct {
	Name                string   // StateWaitingForState or StateActive
	State               State    // the coordinator's state, as last written to the store
	Version             uint64   // the store's version of that state (Consul: its ModifyIndex)
	RebalanceInProgress []string // shards being handed off now
}

// Props returns the props of a ShardCoordinator for typeName. It is meant
// to run as a cluster singleton (see actorsharding); cluster gives it the
// members, to accept registrations from live members only and to notice
// regions whose member was removed.
func Props(typeName string, cluster *membership.Cluster, settings Settings, strategy ShardAllocationStrategy, store StateStore) *actor.Props {
	settings = settings.WithDefaults()
	if strategy == nil {
		strategy = NewLeastShardAllocationStrategy(DefaultRebalanceAbsoluteLimit, DefaultRebalanceRelativeLimit)
	}
	if store == nil {
		store = NewMemoryStore()
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &coordinator{
			behavior: actor.NewBehavior(),
			typeName: typeName,
			cluster:  cluster,
			settings: settings,
			strategy: strategy,
			store:    store,
		}
	})
}

// coordinator is Akka's ShardCoordinator. Every change of its State is an
// event applied by State.Apply and written to the store (check-and-set)
// before anyone is told about it, so a coordinator that takes over never
// contradicts what its predecessor announced.
type coordinator struct {
	typeName string
	cluster  *membership.Cluster
	settings Settings
	strategy ShardAllocationStrategy
	store    StateStore

	behavior   actor.Behavior
	stateName  string
	state      State
	version    uint64
	members    map[string]membership.Member // by member id
	timers     *scheduler.TimerScheduler
	cancelTick scheduler.CancelFunc

	// stash holds what arrived while waitingForState; replayed on active.
	stash []stashed

	allRegionsRegistered bool
	// rebalanceInProgress: shard -> the GetShardHome senders waiting for it.
	rebalanceInProgress map[string][]*actor.PID
	rebalanceWorkers    map[string]*actor.PID // shard -> worker
	// gracefulShutdownInProgress: regions (by key) handing off all shards.
	gracefulShutdownInProgress map[string]bool
	// unAckedHostShards: shard -> cancel of its HostShard resend timer.
	unAckedHostShards map[string]scheduler.CancelFunc
}

type stashed struct {
	message any
	sender  *actor.PID
}

// Internal messages.
type (
	stateLoaded struct {
		state   State
		version uint64
		err     error
	}
	reloadState     struct{}
	rebalanceTick   struct{}
	resendShardHost struct {
		shard  string
		region *actor.PID
	}
)

// Receive handles what every state handles alike (start, membership,
// lifecycle), then the current state.
func (c *coordinator) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); ok {
		c.start(ctx)
		return
	}
	if c.handleMembership(ctx) {
		return
	}
	if isLifecycle(ctx.Message()) {
		c.handleLifecycle(ctx)
		return
	}
	c.behavior.Receive(ctx)
}

func (c *coordinator) start(ctx actor.Context) {
	c.timers = scheduler.NewTimerScheduler(ctx)
	c.members = map[string]membership.Member{}
	c.rebalanceInProgress = map[string][]*actor.PID{}
	c.rebalanceWorkers = map[string]*actor.PID{}
	c.gracefulShutdownInProgress = map[string]bool{}
	c.unAckedHostShards = map[string]scheduler.CancelFunc{}
	c.cluster.Subscribe(ctx.Self())
	c.become(ctx, StateWaitingForState, c.waitingForState)
	c.load(ctx)
}

func (c *coordinator) become(ctx actor.Context, name string, b actor.ReceiveFunc) {
	if c.stateName != name {
		ctx.Logger().Info("shard coordinator state change", slog.String("type", c.typeName),
			slog.String("from", c.stateName), slog.String("to", name))
	}
	c.stateName = name
	c.behavior.Become(b)
}

// load reads the state off the actor's goroutine: a Consul read may take
// a while, and the coordinator must keep taking (stashing) messages.
func (c *coordinator) load(ctx actor.Context) {
	self := ctx.Self()
	root := ctx.ActorSystem().Root
	timeout := c.settings.WaitingForStateTimeout
	store := c.store
	go func() {
		lctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		st, v, err := store.Load(lctx)
		root.Send(self, &stateLoaded{state: st, version: v, err: err})
	}()
}

// waitingForState is Akka's waitingForState: until the stored state is read
// and claimed, everything but membership is stashed.
func (c *coordinator) waitingForState(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *stateLoaded:
		if msg.err != nil {
			ctx.Logger().Warn("shard coordinator: cannot read its state; retrying",
				slog.String("type", c.typeName), slog.Any("error", msg.err),
				slog.Duration("backoff", c.settings.CoordinatorFailureBackoff))
			c.timers.SendOnce(c.settings.CoordinatorFailureBackoff, ctx.Self(), reloadState{})
			return
		}
		c.version = msg.version
		c.state = msg.state.Clone()
		c.state.RememberEntities = c.settings.RememberEntities
		if !c.state.RememberEntities {
			c.state.Unallocated = map[string]struct{}{}
		}
		// Writing the state back at once claims it: a stale coordinator
		// that still runs elsewhere fails its next check-and-set.
		if err := c.save(ctx, c.state); err != nil {
			c.storeFailed(ctx, err)
			return
		}
		c.activate(ctx)
	case reloadState:
		c.load(ctx)
	case *GetCoordinatorState:
		ctx.Respond(c.current())
	default:
		c.stash = append(c.stash, stashed{message: msg, sender: ctx.Sender()})
	}
}

func (c *coordinator) activate(ctx actor.Context) {
	ctx.Logger().Info("shard coordinator recovered its state", slog.String("type", c.typeName),
		slog.Int("regions", len(c.state.Regions)), slog.Int("proxies", len(c.state.Proxies)),
		slog.Int("shards", len(c.state.Shards)), slog.Uint64("version", c.version))
	c.become(ctx, StateActive, c.active)
	// Regions of members that are gone are terminated now; the rest are
	// watched, so that a later crash is noticed too.
	for _, r := range sortedEntries(c.state.Regions) {
		if !c.isLiveMember(r.MemberID) {
			c.regionTerminated(ctx, r.PID, "its member is gone")
			continue
		}
		ctx.Watch(r.PID)
	}
	for _, p := range sortedEntries(c.state.Proxies) {
		if !c.isLiveMember(p.MemberID) {
			c.proxyTerminated(ctx, p.PID)
			continue
		}
		ctx.Watch(p.PID)
	}
	if c.stateName != StateActive {
		return // a store write failed meanwhile
	}
	if c.cancelTick == nil {
		c.cancelTick = c.timers.SendRepeatedly(c.settings.RebalanceInterval, c.settings.RebalanceInterval, ctx.Self(), rebalanceTick{})
	}
	stash := c.stash
	c.stash = nil
	for _, s := range stash {
		ctx.RequestWithCustomSender(ctx.Self(), s.message, s.sender)
	}
	c.allocateShardHomesForRememberEntities(ctx)
}

// allocateShardHomesForRememberEntities (Akka's name) allocates every shard
// that lost its home, so that its remembered entities start again without
// waiting for a message. A no-op without remember-entities.
func (c *coordinator) allocateShardHomesForRememberEntities(ctx actor.Context) {
	if !c.state.RememberEntities || c.stateName != StateActive || !c.hasAllRegionsRegistered() {
		return
	}
	shards := make([]string, 0, len(c.state.Unallocated))
	for s := range c.state.Unallocated {
		shards = append(shards, s)
	}
	sort.Strings(shards)
	for _, s := range shards {
		if c.stateName != StateActive {
			return
		}
		if _, busy := c.rebalanceInProgress[s]; busy {
			continue
		}
		c.onGetShardHome(ctx, s, nil)
	}
}

// storeFailed: the state in the store is not what this coordinator thinks
// (a newer coordinator wrote it) or the store is unreachable. Either way
// the only safe state is the stored one: read it again after the backoff.
func (c *coordinator) storeFailed(ctx actor.Context, err error) {
	level := slog.LevelWarn
	if errors.Is(err, ErrVersionConflict) {
		level = slog.LevelError
	}
	ctx.Logger().Log(context.Background(), level, "shard coordinator: state write failed; reading the state again",
		slog.String("type", c.typeName), slog.Any("error", err), slog.Duration("backoff", c.settings.CoordinatorFailureBackoff))
	for shard, cancel := range c.unAckedHostShards {
		cancel()
		delete(c.unAckedHostShards, shard)
	}
	for shard, w := range c.rebalanceWorkers {
		ctx.Stop(w)
		delete(c.rebalanceWorkers, shard)
	}
	c.rebalanceInProgress = map[string][]*actor.PID{}
	c.become(ctx, StateWaitingForState, c.waitingForState)
	c.timers.SendOnce(c.settings.CoordinatorFailureBackoff, ctx.Self(), reloadState{})
}

// update applies e, writes the new state and only then adopts it. It
// reports whether the coordinator may go on (false: it is waiting for its
// state again and the caller must stop handling the message).
func (c *coordinator) update(ctx actor.Context, e Event) bool {
	next, err := c.state.Apply(e)
	if err != nil {
		ctx.Logger().Warn("shard coordinator: event does not apply; ignored",
			slog.String("type", c.typeName), slog.Any("error", err))
		return true
	}
	if err := c.save(ctx, next); err != nil {
		c.storeFailed(ctx, fmt.Errorf("%v: %w", e, err))
		return false
	}
	c.state = next
	ctx.Logger().Debug("shard coordinator event", slog.String("type", c.typeName), slog.String("event", e.String()))
	return true
}

func (c *coordinator) save(ctx actor.Context, st State) error {
	sctx, cancel := context.WithTimeout(context.Background(), c.settings.UpdatingStateTimeout)
	defer cancel()
	v, err := c.store.Save(sctx, st, c.version)
	if err != nil {
		return err
	}
	c.version = v
	return nil
}

// active is Akka's ShardCoordinator.active.
func (c *coordinator) active(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *messages.Register:
		c.onRegister(ctx, msg)
	case *messages.RegisterProxy:
		c.onRegisterProxy(ctx, msg)
	case *messages.GetShardHome:
		c.onGetShardHome(ctx, msg.GetShard(), ctx.Sender())
	case *messages.ShardStarted:
		c.cancelHostShardTimer(msg.GetShard())
	case resendShardHost:
		delete(c.unAckedHostShards, msg.shard)
		if _, busy := c.rebalanceInProgress[msg.shard]; busy {
			// A HostShard now would restart the shard being handed off.
			return
		}
		if r, ok := c.state.RegionOf(msg.shard); ok && RegionKey(r) == RegionKey(msg.region) {
			ctx.Logger().Info("shard coordinator: resending HostShard", slog.String("type", c.typeName),
				slog.String("shard", msg.shard), slog.String("region", RegionKey(r)))
			c.sendHostShard(ctx, msg.shard, r)
		}
	case rebalanceTick:
		c.onRebalanceTick(ctx)
	case *messages.RebalanceDone:
		c.onRebalanceDone(ctx, msg.GetShard(), msg.GetOk())
	case *messages.GracefulShutdownReq:
		c.onGracefulShutdownReq(ctx, msg.GetShardRegion())
	case *messages.RegionStopped:
		if r := msg.GetShardRegion(); r != nil && c.state.IsRegion(r) {
			c.regionTerminated(ctx, r, "it stopped")
		}
	case *actor.Terminated:
		if msg.Why == actor.TerminatedReason_AddressTerminated {
			// Only the connection dropped: the node may still run the
			// region's entities (a partition, a pause). Its shards move
			// when membership removes the member (MemberRemoved), as Akka
			// waits for downing; moving them now could run an entity twice.
			ctx.Logger().Info("shard coordinator: lost the connection to a region; waiting for its member's removal",
				slog.String("type", c.typeName), slog.String("region", RegionKey(msg.Who)))
			return
		}
		switch {
		case c.state.IsRegion(msg.Who):
			c.regionTerminated(ctx, msg.Who, "terminated")
		case c.state.IsProxy(msg.Who):
			c.proxyTerminated(ctx, msg.Who)
		}
	case *messages.GetCurrentRegions:
		ctx.Respond(&messages.CurrentRegions{Addresses: c.regionAddresses()})
	case *messages.GetClusterShardingStats:
		c.onGetClusterShardingStats(ctx, msg)
	case *GetCoordinatorState:
		ctx.Respond(c.current())
	case reloadState, *stateLoaded:
		// A late answer of an earlier load; the state is current.
	case *actor.DeadLetterResponse:
		// proto.actor's answer to a message sent to a region that is gone
		// (its Terminated or removal follows).
		ctx.Logger().Debug("shard coordinator: a message reached no one", slog.String("type", c.typeName), slog.Any("target", msg.Target))
	default:
		ctx.Logger().Warn("shard coordinator: unexpected message", slog.String("type", c.typeName),
			slog.String("message", fmt.Sprintf("%T", msg)), slog.Any("sender", ctx.Sender()))
	}
}

func (c *coordinator) onRegister(ctx actor.Context, msg *messages.Register) {
	region := msg.GetShardRegion()
	if region == nil {
		return
	}
	if !c.isLiveMember(msg.GetMemberId()) {
		ctx.Logger().Debug("shard coordinator: ignoring Register from a non-member",
			slog.String("type", c.typeName), slog.String("region", RegionKey(region)), slog.String("member", msg.GetMemberId()))
		return
	}
	if old, ok := c.state.Regions[RegionKey(region)]; ok && old.MemberID != msg.GetMemberId() {
		// Same PID, new incarnation: the old one is gone.
		if !c.regionTerminated(ctx, old.PID, "re-registered by a new member incarnation") {
			return
		}
	}
	if !c.state.IsRegion(region) {
		if !c.update(ctx, ShardRegionRegistered{Region: region, MemberID: msg.GetMemberId()}) {
			return
		}
		ctx.Watch(region)
		ctx.Logger().Info("shard region registered", slog.String("type", c.typeName), slog.String("region", RegionKey(region)))
	}
	c.hasAllRegionsRegistered()
	ctx.Send(region, &messages.RegisterAck{Coordinator: ctx.Self()})
	ctx.Send(region, c.shardHomes())
	c.allocateShardHomesForRememberEntities(ctx)
}

func (c *coordinator) onRegisterProxy(ctx actor.Context, msg *messages.RegisterProxy) {
	proxy := msg.GetShardRegionProxy()
	if proxy == nil {
		return
	}
	if !c.isLiveMember(msg.GetMemberId()) {
		return
	}
	if old, ok := c.state.Proxies[RegionKey(proxy)]; ok && old.MemberID != msg.GetMemberId() {
		c.proxyTerminated(ctx, old.PID)
	}
	if !c.state.IsProxy(proxy) {
		if !c.update(ctx, ShardRegionProxyRegistered{Proxy: proxy, MemberID: msg.GetMemberId()}) {
			return
		}
		ctx.Watch(proxy)
	}
	ctx.Send(proxy, &messages.RegisterAck{Coordinator: ctx.Self()})
	ctx.Send(proxy, c.shardHomes())
}

func (c *coordinator) shardHomes() *messages.ShardHomes {
	out := &messages.ShardHomes{}
	for _, r := range sortedEntries(c.state.Regions) {
		if len(r.Shards) > 0 {
			out.Homes = append(out.Homes, &messages.ShardHomesEntry{Region: r.PID, Shards: slices.Clone(r.Shards)})
		}
	}
	return out
}

// hasAllRegionsRegistered is Akka's min-nr-of-members check: once enough
// regions have registered it holds for good.
func (c *coordinator) hasAllRegionsRegistered() bool {
	if !c.allRegionsRegistered {
		c.allRegionsRegistered = len(c.state.Regions) >= c.settings.MinNrOfMembers
	}
	return c.allRegionsRegistered
}

// onGetShardHome answers where shard lives, allocating it first if needed.
// A nil requester allocates without answering (remember-entities).
func (c *coordinator) onGetShardHome(ctx actor.Context, shard string, requester *actor.PID) {
	if shard == "" {
		return
	}
	if waiting, ok := c.rebalanceInProgress[shard]; ok {
		// Answered when the hand-off is done (RebalanceDone).
		if requester != nil {
			c.rebalanceInProgress[shard] = appendPID(waiting, requester)
		}
		return
	}
	if !c.hasAllRegionsRegistered() {
		ctx.Logger().Debug("shard coordinator: GetShardHome ignored, not all regions registered yet",
			slog.String("type", c.typeName), slog.String("shard", shard),
			slog.Int("registered", len(c.state.Regions)), slog.Int("min-nr-of-members", c.settings.MinNrOfMembers))
		return
	}
	if region, ok := c.state.RegionOf(shard); ok {
		if requester != nil {
			ctx.Send(requester, &messages.ShardHome{Shard: shard, Ref: region})
		}
		return
	}
	active := c.regionAllocations(true)
	if len(active) == 0 {
		ctx.Logger().Debug("shard coordinator: no region to allocate to", slog.String("type", c.typeName), slog.String("shard", shard))
		return
	}
	region := c.strategy.AllocateShard(requester, shard, active)
	if region == nil || !c.state.IsRegion(region) || c.gracefulShutdownInProgress[RegionKey(region)] {
		ctx.Logger().Warn("shard coordinator: allocation strategy chose an unusable region; the request will be retried",
			slog.String("type", c.typeName), slog.String("shard", shard), slog.Any("region", region))
		return
	}
	if !c.update(ctx, ShardHomeAllocated{Shard: shard, Region: region}) {
		return
	}
	ctx.Logger().Debug("shard allocated", slog.String("type", c.typeName), slog.String("shard", shard), slog.String("region", RegionKey(region)))
	c.sendHostShard(ctx, shard, region)
	if requester != nil {
		ctx.Send(requester, &messages.ShardHome{Shard: shard, Ref: region})
	}
}

func (c *coordinator) sendHostShard(ctx actor.Context, shard string, region *actor.PID) {
	// Request: the region answers ShardStarted to the sender.
	ctx.Request(region, &messages.HostShard{Shard: shard})
	c.cancelHostShardTimer(shard)
	c.unAckedHostShards[shard] = c.timers.SendOnce(c.settings.ShardStartTimeout, ctx.Self(), resendShardHost{shard: shard, region: region})
}

// cancelHostShardTimer stops resending HostShard for shard.
func (c *coordinator) cancelHostShardTimer(shard string) {
	if cancel, ok := c.unAckedHostShards[shard]; ok {
		cancel()
		delete(c.unAckedHostShards, shard)
	}
}

func (c *coordinator) onRebalanceTick(ctx actor.Context) {
	if len(c.state.Regions) == 0 || !c.hasAllRegionsRegistered() {
		return
	}
	inProgress := make(map[string]struct{}, len(c.rebalanceInProgress))
	for s := range c.rebalanceInProgress {
		inProgress[s] = struct{}{}
	}
	shards := c.strategy.Rebalance(c.regionAllocations(false), inProgress)
	for _, shard := range shards {
		if _, busy := c.rebalanceInProgress[shard]; busy {
			continue
		}
		from, ok := c.state.RegionOf(shard)
		if !ok {
			continue
		}
		ctx.Logger().Info("shard coordinator: rebalancing shard", slog.String("type", c.typeName),
			slog.String("shard", shard), slog.String("from", RegionKey(from)))
		c.startHandOff(ctx, shard, from, true)
	}
}

func (c *coordinator) startHandOff(ctx actor.Context, shard string, from *actor.PID, isRebalance bool) {
	c.rebalanceInProgress[shard] = nil
	c.cancelHostShardTimer(shard)
	var regions []*actor.PID
	for _, r := range sortedEntries(c.state.Regions) {
		regions = append(regions, r.PID)
	}
	for _, p := range sortedEntries(c.state.Proxies) {
		regions = append(regions, p.PID)
	}
	w := ctx.Spawn(rebalanceworker.Props(shard, from, c.settings.HandOffTimeout, regions, isRebalance))
	c.rebalanceWorkers[shard] = w
}

func (c *coordinator) onRebalanceDone(ctx actor.Context, shard string, ok bool) {
	delete(c.rebalanceWorkers, shard)
	if ok {
		ctx.Logger().Info("shard coordinator: shard handed off", slog.String("type", c.typeName), slog.String("shard", shard))
		if _, allocated := c.state.Shards[shard]; allocated {
			if !c.update(ctx, ShardHomeDeallocated{Shard: shard}) {
				return
			}
		}
		c.cancelHostShardTimer(shard)
	} else {
		ctx.Logger().Warn("shard coordinator: shard hand-off did not complete in time; it stays where it was",
			slog.String("type", c.typeName), slog.String("shard", shard))
	}
	c.clearRebalanceInProgress(ctx, shard)
	c.allocateShardHomesForRememberEntities(ctx)
}

// clearRebalanceInProgress answers the GetShardHome requests held back
// during the hand-off, by handling them again now.
func (c *coordinator) clearRebalanceInProgress(ctx actor.Context, shard string) {
	waiting, ok := c.rebalanceInProgress[shard]
	if !ok {
		return
	}
	delete(c.rebalanceInProgress, shard)
	for _, r := range waiting {
		if c.stateName != StateActive {
			return
		}
		c.onGetShardHome(ctx, shard, r)
	}
}

func (c *coordinator) onGracefulShutdownReq(ctx actor.Context, region *actor.PID) {
	if region == nil || !c.state.IsRegion(region) {
		return
	}
	key := RegionKey(region)
	if !c.gracefulShutdownInProgress[key] {
		ctx.Logger().Info("shard coordinator: graceful shutdown of region", slog.String("type", c.typeName), slog.String("region", key))
	}
	c.gracefulShutdownInProgress[key] = true
	for _, shard := range c.state.Regions[key].Shards {
		if _, busy := c.rebalanceInProgress[shard]; busy {
			continue
		}
		c.startHandOff(ctx, shard, region, false)
	}
}

// regionTerminated removes a region that stopped, left or crashed. It
// returns false when the store write failed.
func (c *coordinator) regionTerminated(ctx actor.Context, region *actor.PID, why string) bool {
	for _, w := range c.rebalanceWorkers {
		ctx.Send(w, &rebalanceworker.RegionTerminated{Region: region})
	}
	key := RegionKey(region)
	r, ok := c.state.Regions[key]
	if !ok {
		return true
	}
	ctx.Logger().Info("shard region terminated; its shards are deallocated", slog.String("type", c.typeName),
		slog.String("region", key), slog.String("why", why), slog.Int("shards", len(r.Shards)))
	if !c.update(ctx, ShardRegionTerminated{Region: region}) {
		return false
	}
	ctx.Unwatch(r.PID)
	for _, shard := range r.Shards {
		c.cancelHostShardTimer(shard)
	}
	delete(c.gracefulShutdownInProgress, key)
	c.allocateShardHomesForRememberEntities(ctx)
	return true
}

func (c *coordinator) proxyTerminated(ctx actor.Context, proxy *actor.PID) {
	for _, w := range c.rebalanceWorkers {
		ctx.Send(w, &rebalanceworker.RegionTerminated{Region: proxy})
	}
	if !c.state.IsProxy(proxy) {
		return
	}
	if c.update(ctx, ShardRegionProxyTerminated{Proxy: proxy}) {
		ctx.Unwatch(proxy)
	}
}

// handleMembership keeps the member view and terminates the regions and
// proxies of removed members. It reports whether the message was one.
func (c *coordinator) handleMembership(ctx actor.Context) bool {
	switch msg := ctx.Message().(type) {
	case *membership.CurrentClusterState:
		c.members = map[string]membership.Member{}
		for _, m := range msg.Members {
			c.members[m.ID] = m
		}
		c.terminateGoneMembers(ctx)
	case membership.MemberUp:
		c.members[msg.Member.ID] = msg.Member
	case membership.MemberLeft:
		c.members[msg.Member.ID] = msg.Member
	case membership.MemberRemoved:
		delete(c.members, msg.Member.ID)
		c.terminateGoneMembers(ctx)
	default:
		return false
	}
	return true
}

func (c *coordinator) terminateGoneMembers(ctx actor.Context) {
	if c.stateName != StateActive {
		return // done on activation
	}
	for _, r := range sortedEntries(c.state.Regions) {
		if !c.isLiveMember(r.MemberID) {
			if !c.regionTerminated(ctx, r.PID, "its member was removed") {
				return
			}
		}
	}
	for _, p := range sortedEntries(c.state.Proxies) {
		if !c.isLiveMember(p.MemberID) {
			c.proxyTerminated(ctx, p.PID)
		}
	}
}

func (c *coordinator) isLiveMember(id string) bool {
	_, ok := c.members[id]
	return ok && id != ""
}

// regionAllocations lists the regions for the strategy. Akka passes only
// regions that are not shutting down to allocateShard, and every region to
// rebalance.
func (c *coordinator) regionAllocations(forAllocation bool) []RegionAllocation {
	var out []RegionAllocation
	for _, r := range sortedEntries(c.state.Regions) {
		m, ok := c.members[r.MemberID]
		if !ok {
			continue
		}
		if forAllocation && c.gracefulShutdownInProgress[RegionKey(r.PID)] {
			continue
		}
		out = append(out, RegionAllocation{Region: r.PID, Member: m, Shards: slices.Clone(r.Shards)})
	}
	return out
}

func (c *coordinator) regionAddresses() []string {
	var out []string
	for _, r := range c.state.Regions {
		out = append(out, r.PID.Address)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// onGetClusterShardingStats asks every region for its stats off the actor:
// the answer waits for the slowest region, up to the timeout. A region that
// does not answer is listed with every shard the coordinator allocated to it
// as failed.
func (c *coordinator) onGetClusterShardingStats(ctx actor.Context, msg *messages.GetClusterShardingStats) {
	timeout := time.Duration(msg.GetTimeoutMillis()) * time.Millisecond
	if timeout <= 0 {
		timeout = c.settings.ShardRegionQueryTimeout
	}
	requester := ctx.Sender()
	if requester == nil {
		return
	}
	root := ctx.ActorSystem().Root
	regions := sortedEntries(c.state.Regions)
	go func() {
		type answer struct {
			addr  string
			stats *messages.ShardRegionStats
		}
		answers := make(chan answer, len(regions))
		for _, r := range regions {
			go func(r RegionEntry) {
				res, err := root.RequestFuture(r.PID, &messages.GetShardRegionStats{}, timeout).Result()
				st, ok := res.(*messages.ShardRegionStats)
				if err != nil || !ok {
					st = &messages.ShardRegionStats{Stats: map[string]int32{}, Failed: slices.Clone(r.Shards)}
				}
				answers <- answer{addr: r.PID.Address, stats: st}
			}(r)
		}
		out := &messages.ClusterShardingStats{Regions: map[string]*messages.ShardRegionStats{}}
		for range regions {
			a := <-answers
			out.Regions[a.addr] = a.stats
		}
		root.Send(requester, out)
	}()
}

func (c *coordinator) current() *CurrentCoordinatorState {
	var inProgress []string
	for s := range c.rebalanceInProgress {
		inProgress = append(inProgress, s)
	}
	sort.Strings(inProgress)
	st := c.state
	if st.Regions == nil {
		st = NewState(false)
	}
	return &CurrentCoordinatorState{Name: c.stateName, State: st.Clone(), Version: c.version, RebalanceInProgress: inProgress}
}

func isLifecycle(msg any) bool {
	switch msg.(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting, *actor.ReceiveTimeout:
		return true
	}
	return false
}

func (c *coordinator) handleLifecycle(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Stopping); ok {
		c.cluster.Unsubscribe(ctx.Self())
		if c.cancelTick != nil {
			c.cancelTick()
		}
		for _, cancel := range c.unAckedHostShards {
			cancel()
		}
		ctx.Logger().Info("shard coordinator stopping", slog.String("type", c.typeName), slog.String("state", c.stateName))
	}
}

func sortedEntries(m map[string]RegionEntry) []RegionEntry {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]RegionEntry, 0, len(keys))
	for _, k := range keys {
		out = append(out, m[k])
	}
	return out
}

func appendPID(list []*actor.PID, pid *actor.PID) []*actor.PID {
	for _, p := range list {
		if RegionKey(p) == RegionKey(pid) {
			return list
		}
	}
	return append(list, pid)
}
