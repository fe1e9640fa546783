package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/internal/deadletters"
	"github.com/protoshard/protoshard/internal/guard"
	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/internal/metrics"
	"github.com/protoshard/protoshard/internal/rebalance"
	"github.com/protoshard/protoshard/internal/throttle"
	"github.com/protoshard/protoshard/internal/ticker"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
	"go.opentelemetry.io/otel/trace/noop"
)

// State names of the coordinator; they appear in logs.
const (
	StateWaitingForState = "waitingForState"
	StateActive          = "active"
	// StateStopped: a store write failed; the coordinator is stopping.
	StateStopped = "stopped"
)

// Props returns the props of a ShardCoordinator for typeName. It is meant
// to run as a cluster singleton (see actorsharding); cluster gives it the
// members, to accept registrations from live members only and to notice
// regions whose member was removed.
func Props(typeName string, cluster *membership.Cluster, settings Settings, strategy coordinatoractor.ShardAllocationStrategy, store coordinatoractor.StateStore) *actor.Props {
	settings = settings.WithDefaults()
	if settings.Tracer == nil {
		settings.Tracer = noop.NewTracerProvider().Tracer("")
	}
	if strategy == nil {
		strategy = coordinatoractor.NewLeastShardAllocationStrategy(coordinatoractor.DefaultRebalanceAbsoluteLimit, coordinatoractor.DefaultRebalanceRelativeLimit)
	}
	if store == nil {
		store = coordinatoractor.NewMemoryStore()
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
	}, guard.WithMailbox(), guard.WithSizeLimit(guard.DefaultMaxMessageSize))
}

// coordinator is Akka's ShardCoordinator. Every change of its State is an
// event applied by State.Apply and written to the store (check-and-set)
// before anyone is told about it, so a coordinator that takes over never
// contradicts what its predecessor announced.
//
// The writes run off the actor, one at a time (see stateWrites): the
// coordinator applies an event at once and goes on with its mail; the
// events of the messages it handles while a write is in flight go to the
// store together in the next one, and the replies that depend on them go
// out once it succeeded. A thousand shards to allocate after a crash take
// a few writes, not a thousand.
//
// Fencing: at its start it claims the stored state (writes it back, with
// what it decided on it since the read), and the version it claimed is
// its epoch, carried by every command it and its rebalance workers send; regions obey only the coordinator they
// registered with, at its epoch. A write that fails, a version conflict
// above all (another coordinator has claimed the state: this one is
// stale), stops it for good; its supervisor starts a fresh one after the
// back-off, which claims the state under a new epoch.
type coordinator struct {
	typeName string
	cluster  *membership.Cluster
	settings Settings
	strategy coordinatoractor.ShardAllocationStrategy
	store    coordinatoractor.StateStore

	behavior  actor.Behavior
	stateName string
	// writes holds the state and its writes to the store; state points at
	// writes.state, the state the coordinator decides on, which is ahead
	// of the store by the events not yet written.
	writes     stateWrites
	state      *State
	epoch      uint64 // the version claimed at start
	timers     *scheduler.TimerScheduler
	cancelTick scheduler.CancelFunc

	// stash holds what arrived while waitingForState; handled on active,
	// before any newer message.
	stash stash
	// early holds the registrations of members not live yet (see
	// holdEarly); handled once they are.
	early stash
	// replaying: the stash is being handled; its events go to the store in
	// one write, after it.
	replaying bool

	// handOffs: the hand-offs in progress and who waits for them.
	handOffs handOffs
	// rebalance follows the rebalance in progress, for its log lines.
	rebalance rebalanceSummary
	metrics   *metrics.Type
	// forwards: shards handed off whose old home still forwards what it
	// held; their new home is told only to the old home meanwhile.
	forwards forwardHolds
	// regions: the members, their registrations, graceful shutdowns
	// and removal margins.
	regions regionBook
	// hostShards: the HostShard messages not yet acknowledged.
	hostShards hostShardResends
	// refusals rate-limits the log of refused registrations: a refused
	// region registers again at every retry interval.
	refusals *throttle.Limiter
	// log is the actor system's logger with the type name.
	log *slog.Logger
}

// Internal messages.
type (
	registerWaitOver     struct{}
	rebalanceTick        struct{}
	removalMarginElapsed struct{}
	resendShardHost      struct {
		shard  string
		region *actor.PID
	}
	forwardTimedOut struct {
		shard string
		gen   uint64
	}
)

// Receive handles what every state handles alike (start, membership,
// lifecycle), then the current state.
func (c *coordinator) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); ok {
		c.start(ctx)
		return
	}
	switch {
	case c.handleMembership(ctx):
	case isLifecycle(ctx.Message()):
		c.handleLifecycle(ctx)
	default:
		c.behavior.Receive(ctx)
	}
	c.startWrite(ctx)
}

func (c *coordinator) start(ctx actor.Context) {
	c.timers = scheduler.NewTimerScheduler(ctx)
	c.log = ctx.Logger().With(slog.String("type", c.typeName))
	c.regions = newRegionBook()
	c.handOffs = newHandOffs()
	c.forwards = newForwardHolds()
	c.metrics = metrics.For(ctx.ActorSystem()).Type(c.typeName)
	c.hostShards = newHostShardResends()
	c.refusals = throttle.New(refusalLogInterval)
	c.state = &c.writes.state
	c.stash = newStash(c.settings.StashCapacity)
	c.early = newStash(c.settings.StashCapacity)
	c.cluster.Subscribe(ctx.Self())
	c.become(ctx, StateWaitingForState, c.waitingForState)
	c.load(ctx)
}

func (c *coordinator) become(ctx actor.Context, name string, b actor.ReceiveFunc) {
	if c.stateName != name {
		c.log.Debug("shard coordinator state change", slog.String("from", c.stateName), slog.String("to", name))
	}
	c.stateName = name
	c.behavior.Become(b)
}

// waitingForState is Akka's waitingForState: until the stored state is
// read, everything but membership is stashed.
func (c *coordinator) waitingForState(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *stateLoaded:
		c.onStateLoaded(ctx, msg)
	case *stateWritten:
		c.onStateWritten(ctx, msg)
	case reloadState:
		c.load(ctx)
	case *GetCoordinatorState, *messages.GetShardCoordinatorState:
		c.answerState(ctx)
	default:
		repeat, err := c.stash.add(msg, ctx.Sender(), time.Now())
		switch {
		case err != nil:
			c.reject(ctx, msg, fmt.Sprintf("waiting for its state: %v", err))
		case repeat:
			c.log.Debug("shard coordinator: a repeated request replaces the one stashed", slog.String("message", fmt.Sprintf("%T", msg)))
		}
	}
}

func (c *coordinator) activate(ctx actor.Context) {
	c.log.Debug("shard coordinator recovered its state", slog.Int("regions", len(c.state.Regions)), slog.Int("proxies", len(c.state.Proxies)),
		slog.Int("shards", len(c.state.Shards)), slog.Uint64("version", c.writes.version))
	c.become(ctx, StateActive, c.active)
	c.regions.activatedAt = time.Now()
	// Live regions are watched, so that a crash is noticed; those of
	// members that are gone are terminated (once their removal margin has
	// passed).
	c.watchRegions(ctx)
	c.terminateGoneMembers(ctx)
	// Unplaced shards wait for the regions of live members to register
	// (see unregisteredMembers), and after a re-join for the removal
	// margin (see rejoinHold); this timer ends the wait.
	c.timers.SendOnce(max(c.settings.RegisterWaitTimeout, c.rejoinHold()), ctx.Self(), registerWaitOver{})
	if c.cancelTick == nil {
		c.cancelTick = ticker.SendRepeatedly(ctx, c.settings.RebalanceInterval, c.settings.RebalanceInterval, ctx.Self(), rebalanceTick{})
	}
	// The stash is handled now, in the order it came and before any newer
	// message (proto.actor cannot put it back at the front of the
	// mailbox): a region's Register goes before its later requests.
	c.handleAgain(ctx, c.stash.take())
	c.allocateShardHomesForRememberEntities(ctx)
}

// handleAgain handles messages put aside, in order; their events go to
// the store in one write, after them. The current message is gone after
// it (proto.actor's Context.Receive clears it).
func (c *coordinator) handleAgain(ctx actor.Context, put []stashed) {
	c.replaying = true
	for _, s := range put {
		ctx.Receive(&actor.MessageEnvelope{Message: s.message, Sender: s.sender})
	}
	c.replaying = false
}

// watchRegions watches the registered regions and proxies of live
// members, so that their termination is noticed.
func (c *coordinator) watchRegions(ctx actor.Context) {
	for _, pid := range c.regions.liveRegistrants(c.state) {
		ctx.Watch(pid)
	}
}

// allocateShardHomesForRememberEntities (Akka's name) allocates every shard
// that lost its home, so that its remembered entities start again without
// waiting for a message. A no-op without remember-entities.
func (c *coordinator) allocateShardHomesForRememberEntities(ctx actor.Context) {
	if !c.state.RememberEntities || c.stateName != StateActive || !c.hasAllRegionsRegistered() {
		return
	}
	for _, s := range rememberedToAllocate(c.state, &c.handOffs) {
		if c.stateName != StateActive {
			return
		}
		c.onGetShardHome(ctx, s, nil)
	}
}

// stopped: the coordinator stopped itself after a store failure; what
// still arrives before it is gone is dropped (regions retry).
func (c *coordinator) stopped(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *stateLoaded, *stateWritten, reloadState, rebalanceTick, resendShardHost, removalMarginElapsed, registerWaitOver,
		*actor.Terminated, *messages.RebalanceDone, *actor.DeadLetterResponse:
	default:
		c.reject(ctx, msg, "the coordinator is stopping after a store failure")
	}
}

// reject drops a message the coordinator will not act on, with a
// dead-letter event that says why.
func (c *coordinator) reject(ctx actor.Context, msg any, why string) {
	c.drop(ctx, msg, ctx.Sender(), why)
}

// drop drops msg from sender with a dead-letter event that says why.
func (c *coordinator) drop(ctx actor.Context, msg any, sender *actor.PID, why string) {
	deadletters.Publish(ctx.ActorSystem(), ctx.Self(), msg, sender, fmt.Sprintf("shard coordinator %s: %s", c.typeName, why))
}

// active is Akka's ShardCoordinator.active.
func (c *coordinator) active(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *messages.Register:
		c.onRegistration(ctx, msg)
	case *messages.RegisterProxy:
		c.onRegistration(ctx, msg)
	case *messages.GetShardHome:
		if err := checkShard("GetShardHome", msg.GetShard()); err != nil {
			c.reject(ctx, msg, err.Error())
			return
		}
		if ctx.Sender() == nil {
			c.reject(ctx, msg, "GetShardHome without a sender to answer")
			return
		}
		c.onGetShardHome(ctx, msg.GetShard(), ctx.Sender())
	case *messages.ShardStarted:
		if c.hostShards.started(c.state, msg.GetShard(), ctx.Sender()) {
			return
		}
		c.log.Debug("shard coordinator: ShardStarted from a region that does not host the shard", slog.String("shard", msg.GetShard()), slog.Any("sender", ctx.Sender()))
	case resendShardHost:
		if r := c.hostShards.due(c.state, msg.shard, msg.region, c.handOffs.busy(msg.shard)); r != nil {
			c.log.Debug("shard coordinator: resending HostShard", slog.String("shard", msg.shard), slog.String("region", RegionKey(r)))
			c.sendHostShard(ctx, msg.shard, r)
		}
	case rebalanceTick:
		c.onRebalanceTick(ctx)
		c.handleEarly(ctx)
	case removalMarginElapsed:
		c.terminateGoneMembers(ctx)
	case registerWaitOver:
		c.allocateShardHomesForRememberEntities(ctx)
	case *messages.RebalanceDone:
		started, known, err := c.handOffs.done(msg.GetShard(), ctx.Sender())
		if err != nil {
			c.reject(ctx, msg, err.Error())
			return
		}
		c.onRebalanceDone(ctx, msg.GetShard(), msg.GetOk(), started, known)
	case *messages.HandOffForwarded:
		c.onHandOffForwarded(ctx, msg)
	case forwardTimedOut:
		if waiting, ok := c.forwards.timedOut(msg.shard, msg.gen); ok {
			c.log.Warn("shard coordinator: the shard's old home did not report forwarding its messages in time; telling the others its new home", slog.String("shard", msg.shard))
			c.answerHeld(ctx, msg.shard, waiting)
		}
	case *messages.GracefulShutdownReq:
		if c.fromRegion(ctx, "GracefulShutdownReq", msg, msg.GetShardRegion()) {
			c.onGracefulShutdownReq(ctx, msg.GetShardRegion())
		}
	case *messages.RegionStopped:
		if c.fromRegion(ctx, "RegionStopped", msg, msg.GetShardRegion()) {
			c.regionTerminated(ctx, msg.GetShardRegion(), "it stopped")
		}
	case *actor.Terminated:
		switch terminationOf(c.state, msg) {
		case terminationConnectionLost: // its shards wait for its member's removal
			c.log.Debug("shard coordinator: lost the connection to a region; waiting for its member's removal", slog.String("region", RegionKey(msg.Who)))
		case terminationRegion:
			c.regionTerminated(ctx, msg.Who, "terminated")
		case terminationProxy:
			c.proxyTerminated(ctx, msg.Who)
		}
	case *messages.GetCurrentRegions:
		ctx.Respond(&messages.CurrentRegions{Addresses: regionAddresses(c.writes.durable)})
	case *messages.GetClusterShardingStats:
		if requester := ctx.Sender(); requester != nil {
			askShardingStats(guard.Root(ctx.ActorSystem(), guard.DefaultMaxMessageSize), sortedEntries(c.writes.durable.Regions),
				statsTimeout(msg, c.settings.ShardRegionQueryTimeout), requester)
		}
	case *GetCoordinatorState, *messages.GetShardCoordinatorState:
		c.answerState(ctx)
	case *stateWritten:
		c.onStateWritten(ctx, msg)
	case reloadState, *stateLoaded:
		// A late answer of an earlier load; the state is current.
	case *actor.DeadLetterResponse:
		// proto.actor's answer to a message sent to a region that is gone
		// (its Terminated or removal follows).
		c.log.Debug("shard coordinator: a message reached no one", slog.Any("target", msg.Target))
	case nil:
		c.reject(ctx, msg, "nil message")
	default:
		c.reject(ctx, msg, fmt.Sprintf("unexpected message %T", msg))
	}
}

// hasAllRegionsRegistered is Akka's min-nr-of-members check: once enough
// regions have registered it holds for good.
func (c *coordinator) hasAllRegionsRegistered() bool {
	return c.regions.hasAllRegionsRegistered(len(c.state.Regions), c.settings.MinNrOfMembers)
}

// onGetShardHome answers where shard lives, allocating it first if needed.
// A nil requester allocates without answering (remember-entities).
func (c *coordinator) onGetShardHome(ctx actor.Context, shard string, requester *actor.PID) {
	d := shardHome(shardHomeInput{state: c.state, handOffs: &c.handOffs, forwards: &c.forwards, regions: &c.regions,
		minNrOfMembers: c.settings.MinNrOfMembers, role: c.settings.Role, registerWait: c.settings.RegisterWaitTimeout,
		now: time.Now(), rejoinHold: c.rejoinHold}, shard, requester)
	switch d.step {
	case homeKnown:
		if requester != nil {
			c.replyShardHome(ctx, shard, d.region, requester)
		}
		return
	case homeAllocate:
	default:
		// Answered once the hand-off is done or the old home has
		// forwarded, or ignored (the requester asks again), said why.
		if d.why != "" {
			c.log.Debug(d.why, append([]any{slog.String("shard", shard)}, d.attrs...)...)
		}
		return
	}
	region := c.strategy.AllocateShard(requester, shard, d.regions)
	if !usableHome(c.state, &c.regions, region) {
		c.log.Warn("shard coordinator: allocation strategy chose an unusable region; the request will be retried", slog.String("shard", shard), slog.Any("region", region))
		return
	}
	allocated := func(ctx actor.Context) {
		if !isHome(c.state, shard, region) {
			return // its region terminated since; the requester asks again
		}
		c.log.Debug("shard allocated", slog.String("shard", shard), slog.String("region", RegionKey(region)))
		c.metrics.Allocated()
		c.sendHostShard(ctx, shard, region)
		if requester != nil {
			c.tellShardHome(ctx, requester, shard, region)
		}
	}
	notAllocated := c.shardHomeRefused(shard, requester)
	event := ShardHomeAllocated{Shard: shard, Region: region}
	if err := c.update(update{event: event, key: shardHomeKey(shard, requester), then: allocated, refused: notAllocated}); err != nil {
		if errors.Is(err, errEventRejected) {
			notAllocated(ctx, err)
		}
	}
}

// replyShardHome tells requester that region hosts shard: at once when
// that is written (Pekko also answers GetShardHome for an allocated shard
// while an update is in progress), else once it is.
func (c *coordinator) replyShardHome(ctx actor.Context, shard string, region, requester *actor.PID) {
	reply := func(ctx actor.Context) {
		if isHome(c.state, shard, region) {
			c.tellShardHome(ctx, requester, shard, region)
		}
	}
	if c.writes.settled(shard) {
		reply(ctx)
		return
	}
	c.whenWritten(ctx, shardHomeKey(shard, requester), reply, c.shardHomeRefused(shard, requester))
}

// shardHomeRefused drops requester's GetShardHome for shard, with the
// reason, when its allocation is rejected or never written. The region
// asks again on its next retry; each time it is told.
func (c *coordinator) shardHomeRefused(shard string, requester *actor.PID) func(actor.Context, error) {
	return func(ctx actor.Context, err error) {
		if requester != nil {
			c.drop(ctx, &messages.GetShardHome{Shard: shard}, requester, fmt.Sprintf("shard %s cannot be allocated: %v", shard, err))
		}
	}
}

// rejoinHold is how long a coordinator on a node that joined again after
// it was removed still holds allocations its state does not place: the
// members of the cluster it was removed from may not have noticed their
// own removal yet (a Consul agent that lost its data removes everybody at
// once) and still run those shards, and their removal margin must pass
// first, as for any removed member (see removalWait).
func (c *coordinator) rejoinHold() time.Duration {
	rm, seen := membershiphook.Of(c.cluster).SelfRemoval()
	return removalWait(rm, seen, membershiphook.Of(c.cluster).DownRemovalMargin(), time.Now())
}

// tellShardHome tells to that region hosts shard, at this coordinator's
// epoch.
func (c *coordinator) tellShardHome(ctx actor.Context, to *actor.PID, shard string, region *actor.PID) {
	ctx.Request(to, &messages.ShardHome{Shard: shard, Ref: region, Epoch: c.epoch})
}

func (c *coordinator) sendHostShard(ctx actor.Context, shard string, region *actor.PID) {
	// Request: the region answers ShardStarted to the sender.
	ctx.Request(region, &messages.HostShard{Shard: shard, Epoch: c.epoch, ForwardingOldHome: c.forwards.oldHome(shard)})
	c.hostShards.sent(shard, c.timers.SendOnce(c.settings.ShardStartTimeout, ctx.Self(), resendShardHost{shard: shard, region: region}))
}

func (c *coordinator) onRebalanceTick(ctx actor.Context) {
	if !c.regions.canRebalance(c.state, c.settings.MinNrOfMembers) {
		return
	}
	shards := c.strategy.Rebalance(c.regions.allocations(c.state, false), c.handOffs.inProgress())
	moves := rebalanceMoves(shards, c.state, &c.handOffs, c.writes.settled)
	roundCtx, round := c.startRound(len(moves))
	for _, m := range moves {
		c.log.Debug("shard coordinator: rebalancing shard", slog.String("shard", m.shard), slog.String("from", RegionKey(m.from)))
		c.startHandOff(roundCtx, ctx, m.shard, m.from, true)
	}
	c.roundEnded(round, len(moves), len(shards) == 0)
}

// startHandOff starts shard's hand-off from region from; parent is the
// context of its span's parent (a rebalance round's).
func (c *coordinator) startHandOff(parent context.Context, ctx actor.Context, shard string, from *actor.PID, isRebalance bool) {
	c.hostShards.stop(shard)
	regions := handOffRecipients(c.state)
	span := c.startHandOffSpan(parent, shard, from, isRebalance)
	old, replaced, err := c.handOffs.begin(shard, handOffStart{at: time.Now(), rebalance: isRebalance, span: span})
	if err != nil {
		// The callers start only hand-offs of shards not in hand-off.
		c.log.Error("shard coordinator: hand-off not started", slog.Any("error", err))
		span.End()
		return
	}
	if replaced {
		old.span.End()
	}
	c.handOffs.assign(shard, ctx.Spawn(rebalance.Props(shard, from, c.settings.HandOffTimeout, regions, isRebalance, c.epoch)))
}

func (c *coordinator) onRebalanceDone(ctx actor.Context, shard string, ok bool, started handOffStart, known bool) {
	if known {
		c.handOffEnded(started, ok)
	}
	oldHome, _ := c.state.RegionOf(shard)
	if ok {
		c.log.Debug("shard coordinator: shard handed off", slog.String("shard", shard))
		if _, allocated := c.state.Shards[shard]; allocated {
			if err := c.update(update{event: ShardHomeDeallocated{Shard: shard}}); errors.Is(err, errStopped) {
				return
			}
		}
		c.hostShards.stop(shard)
	} else {
		c.log.Warn("shard coordinator: shard hand-off did not complete in time; it stays where it was", slog.String("shard", shard))
	}
	answerNow, gen := c.handOffs.ended(shard, ok, oldHome, &c.forwards)
	if gen != 0 {
		c.timers.SendOnce(c.settings.HandOffTimeout, ctx.Self(), forwardTimedOut{shard: shard, gen: gen})
	}
	c.answerHeld(ctx, shard, answerNow)
	c.allocateShardHomesForRememberEntities(ctx)
}

// onHandOffForwarded: a shard's old home has forwarded what it held for
// the shard, relayed by the new home's region behind those messages (or
// sent directly when there was nothing to forward). The others may learn
// the new home now.
func (c *coordinator) onHandOffForwarded(ctx actor.Context, msg *messages.HandOffForwarded) {
	shard, oldHome := msg.GetShard(), msg.GetOldHome()
	if err := checkShard("HandOffForwarded", shard); err != nil {
		c.reject(ctx, msg, err.Error())
		return
	}
	if sender := ctx.Sender(); sender == nil || !c.state.IsRegion(sender) || oldHome == nil || !c.state.IsRegion(oldHome) {
		c.reject(ctx, msg, fmt.Sprintf("HandOffForwarded for shard %q from %v about old home %v: both must be registered regions", shard, sender, oldHome))
		return
	}
	waiting := c.forwards.forwarded(shard, oldHome, c.handOffs.busy(shard))
	ctx.Request(oldHome, &messages.HandOffForwardedAck{Shard: shard})
	c.answerHeld(ctx, shard, waiting)
}

// answerHeld answers GetShardHome requests for shard that waited.
func (c *coordinator) answerHeld(ctx actor.Context, shard string, waiting []*actor.PID) {
	for _, r := range waiting {
		if c.stateName != StateActive {
			return
		}
		c.onGetShardHome(ctx, shard, r)
	}
}

// fromRegion checks msg, which region sends about itself (see
// checkFromRegion): it reports whether to act on it, and else rejects it
// or (from a region no longer registered) ignores it.
func (c *coordinator) fromRegion(ctx actor.Context, what string, msg any, region *actor.PID) bool {
	err := checkFromRegion(what, region, ctx.Sender(), *c.state)
	switch {
	case errors.Is(err, errUnknownRegion):
		c.log.Debug("shard coordinator: ignored", slog.String("state", c.stateName), slog.Any("reason", err))
	case err != nil:
		c.reject(ctx, msg, err.Error())
	}
	return err == nil
}

func (c *coordinator) onGracefulShutdownReq(ctx actor.Context, region *actor.PID) {
	key := RegionKey(region)
	if c.regions.gracefulShutdown(key) {
		c.log.Debug("shard coordinator: graceful shutdown of region", slog.String("region", key))
	}
	for _, shard := range c.handOffs.gracefulShutdownShards(c.state, key, c.writes.settled) {
		c.startHandOff(context.Background(), ctx, shard, region, false)
	}
}

// regionTerminated removes a region that stopped, left or crashed. It
// returns false when the store write failed.
func (c *coordinator) regionTerminated(ctx actor.Context, region *actor.PID, why string) bool {
	c.tellWorkersGone(ctx, region)
	key := RegionKey(region)
	r, ok := c.state.Regions[key]
	if !ok {
		return true
	}
	c.log.Log(context.Background(), c.regions.terminationLevel(key, len(r.Shards)), "shard region terminated; its shards are deallocated",
		slog.String("region", key), slog.String("why", why), slog.Int("shards", len(r.Shards)))
	if err := c.update(update{event: ShardRegionTerminated{Region: region}}); err != nil {
		return !errors.Is(err, errStopped)
	}
	ctx.Unwatch(r.PID)
	for _, shard := range r.Shards {
		c.hostShards.stop(shard)
	}
	c.regions.terminated(key)
	for shard, waiting := range c.forwards.regionGone(region) {
		c.answerHeld(ctx, shard, waiting)
	}
	c.allocateShardHomesForRememberEntities(ctx)
	return true
}

// tellWorkersGone tells every rebalance worker that region (or a proxy)
// is gone: it waits for no answer of it any more.
func (c *coordinator) tellWorkersGone(ctx actor.Context, region *actor.PID) {
	for _, w := range c.handOffs.workerPIDs() {
		ctx.Send(w, &rebalance.RegionTerminated{Region: region})
	}
}

func (c *coordinator) proxyTerminated(ctx actor.Context, proxy *actor.PID) {
	c.tellWorkersGone(ctx, proxy)
	if !c.state.IsProxy(proxy) {
		return
	}
	if err := c.update(update{event: ShardRegionProxyTerminated{Proxy: proxy}}); err == nil {
		ctx.Unwatch(proxy)
	}
}

// handleMembership keeps the member view and terminates the regions and
// proxies of removed members. It reports whether the message was one.
func (c *coordinator) handleMembership(ctx actor.Context) bool {
	handled, checkGone := c.regions.membershipEvent(ctx.Message())
	if checkGone {
		c.terminateGoneMembers(ctx)
	}
	if handled {
		c.handleEarly(ctx)
	}
	return handled
}

// terminateGoneMembers terminates the regions and proxies of members that
// are no longer live, once their removal margin has passed (see
// regionBook.goneMembers).
func (c *coordinator) terminateGoneMembers(ctx actor.Context) {
	if c.stateName != StateActive {
		return // done on activation
	}
	for _, step := range c.regions.goneMembers(c.state, membershiphook.Of(c.cluster).Removal, membershiphook.Of(c.cluster).DownRemovalMargin(), time.Now()) {
		switch {
		case step.wait > 0:
			c.log.Info("shard coordinator: a region's member was removed without leaving; its shards move after the removal margin", slog.String("region", RegionKey(step.region)), slog.Duration("wait", step.wait))
			c.timers.SendOnce(step.wait, ctx.Self(), removalMarginElapsed{})
		case step.region != nil:
			if !c.regionTerminated(ctx, step.region, "its member was removed") {
				return
			}
		default:
			c.proxyTerminated(ctx, step.proxy)
		}
	}
}

func (c *coordinator) current() *CurrentCoordinatorState {
	return currentState(c.stateName, &c.writes, c.epoch, &c.handOffs)
}

// answerState answers a GetCoordinatorState or GetShardCoordinatorState.
func (c *coordinator) answerState(ctx actor.Context) {
	if _, ok := ctx.Message().(*GetCoordinatorState); ok {
		ctx.Respond(c.current())
		return
	}
	ctx.Respond(stateAnswer(c.current(), ctx.Self(), c.cluster.Self().ID))
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
		c.hostShards.stopAll()
		c.dropUnwritten(ctx, errStopped)
		endUnfinished(c.handOffs.unfinished())
		c.log.Debug("shard coordinator stopping", slog.String("state", c.stateName))
	}
}
