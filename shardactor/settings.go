package shardactor

import (
	"net/url"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/lease"
)

// Settings configures a Shard, with Akka's names and defaults
// (akka.cluster.sharding).
type Settings struct {
	// HandOffTimeout is Akka's handoff-timeout: at hand-off, entities that
	// have not stopped after max(HandOffTimeout-5s, 1s) are stopped by
	// force. Default 60s; zero or negative means the default.
	HandOffTimeout time.Duration
	// HandOffStopMessage is sent to each entity at hand-off. nil (the
	// default) poisons the entities (Akka's PoisonPill): they stop after the
	// messages already in their mailbox.
	//
	// Automatic passivation (idle timeout, active-entity limit) sends it
	// too, as Akka does: the shard passivates the entity as if it had sent
	// Passivate with this stop message.
	HandOffStopMessage any
	// PassivationIdleTimeout is Akka's
	// passivation.default-idle-strategy.idle-entity.timeout: an entity that
	// has had no user message (shardproto.Deliver or StartEntity) for this long is
	// passivated. The shard checks every PassivationIdleTimeout/2 (Akka's
	// default interval), so an entity goes between 1 and 1.5 timeouts after
	// its last message. Default 120s (zero means the default); negative
	// switches idle passivation off.
	PassivationIdleTimeout time.Duration
	// ActiveEntityLimit is Akka's passivation active-entity-limit: beyond
	// it, the ReplacementPolicy chooses entities to passivate. 0 (the
	// default) or negative: no limit. Akka's limit is per region and each
	// shard gets its share; a shard starts with this whole value (as
	// Akka's shard, which starts as if it were its region's only one)
	// until its region sends it its share with shardproto.SetActiveEntityLimit.
	// Idle passivation applies alongside the limit unless switched off
	// (Akka's lru strategy with idle-entity).
	ActiveEntityLimit int
	// ReplacementPolicy chooses whom the active-entity limit passivates:
	// LeastRecentlyUsedPolicy ("least-recently-used", the default when "")
	// or SegmentedLeastRecentlyUsedPolicy
	// ("segmented-least-recently-used", levels 0.2/0.8). An unknown name
	// is logged as an error when the shard starts and the default is used
	// (starting a shard cannot fail).
	ReplacementPolicy string
	// RememberEntities is Akka's remember-entities. When true, automatic
	// passivation is off, idle and limit alike, as in Akka (its
	// PassivationStrategy is NoPassivationStrategy with remember-entities):
	// a remembered entity is meant to keep running, and passivating it
	// automatically would make it forgotten. Passivate from the entity
	// still works.
	RememberEntities bool
	// RememberEntitiesStore records the running entities when
	// RememberEntities is on. It must be shared by every node of the
	// entity type (a consulstore.RememberEntitiesStore, or for nodes in one
	// process one MemoryRememberEntitiesStore). Required with
	// RememberEntities: without one the shard remembers nothing and says so
	// in its log.
	RememberEntitiesStore RememberEntitiesStore
	// EntityRecoveryStrategy is how a shard that starts again starts its
	// remembered entities: EntityRecoveryAll (the default) at once, or
	// EntityRecoveryConstant, EntityRecoveryConstantNumberOfEntities every
	// EntityRecoveryConstantFrequency (Akka's entity-recovery-strategy).
	EntityRecoveryStrategy string
	// EntityRecoveryConstantNumberOfEntities: Akka's default 5.
	EntityRecoveryConstantNumberOfEntities int
	// EntityRecoveryConstantFrequency: Akka's default 100ms.
	EntityRecoveryConstantFrequency time.Duration
	// EntityRestartBackoff: a remembered entity that stops without
	// Passivate or a hand-off is started again after this pause (Akka's
	// entity-restart-backoff, default 10s). A message for it starts it at
	// once.
	EntityRestartBackoff time.Duration
	// EntitySupervisorStrategy decides what happens when an entity fails
	// (panics): the shard is the entities' parent, so this is the shard's
	// supervisor strategy. nil: proto.actor's default (restart the entity).
	EntitySupervisorStrategy actor.SupervisorStrategy
	// RetryInterval: StartEntity of a remembered entity is resent at this
	// interval until acknowledged (Akka's retry-interval, default 2s).
	RetryInterval time.Duration
	// WaitingForStateTimeout is Akka's waiting-for-state-timeout: it bounds
	// one read of the remembered entities when the shard starts. A read
	// that fails or times out is tried again after a back-off. Default 2s.
	WaitingForStateTimeout time.Duration
	// UpdatingStateTimeout is Akka's updating-state-timeout: it bounds one
	// write of the remember-entities store. A write that fails or times out
	// is tried again after a back-off (doubling from 1s, at most this
	// timeout), unless the store says it will never accept it (an error
	// that wraps ErrPermanent). A message that waits for the store (for its
	// entity to be remembered, or for the remembered entities to be read)
	// is dropped with a dead-letter event once it has waited three times
	// this timeout. Default 5s.
	UpdatingStateTimeout time.Duration
	// ShardFailureBackoff is Akka's shard-failure-backoff: with
	// remember-entities, a shard that stopped unexpectedly (its store
	// refused a read or write for good, or its lease was lost) is started
	// again by its region after this pause, with its remembered entities.
	// Default 10s.
	ShardFailureBackoff time.Duration
	// UseLease is Akka's sharding use-lease: with a lease provider, each
	// shard acquires the lease LeaseName(type, shard) before it starts any
	// entity (state acquiringLease; messages wait meanwhile), tries again
	// after LeaseRetryInterval when it cannot, and when the lease is lost
	// stops all its entities at once and itself, dropping what it holds
	// with dead-letter events. The shard releases the lease once it and
	// its entities have stopped (after a hand-off, too). Every node of the
	// entity type must use the same provider (one lease.MemoryLeases in
	// one process, or lease/consul on the same Consul). nil (the
	// default): no lease.
	UseLease lease.Provider
	// LeaseRetryInterval is Akka's lease-retry-interval: how long after a
	// failed acquisition the shard tries again. Default 5s.
	LeaseRetryInterval time.Duration
	// MemberStale, when set, tells whether this node may have been removed
	// from the cluster without knowing it yet (its membership is stale:
	// paused or cut off past its TTL). While it says so, the shard neither
	// starts an entity, on any path (a remembered entity's restart
	// back-off too: it is tried again after the back-off), nor hands one a
	// message: it drops them with a dead-letter event. The region sets it.
	MemberStale func() bool
}

// Entity recovery strategies (Akka's entity-recovery-strategy).
const (
	EntityRecoveryAll      = "all"
	EntityRecoveryConstant = "constant"
)

// Names of the replacement policies (Settings.ReplacementPolicy), as in
// Akka's passivation.strategy-defaults.replacement.policy.
const (
	// LeastRecentlyUsedPolicy passivates the least recently used entities:
	// the default.
	LeastRecentlyUsedPolicy = "least-recently-used"
	// SegmentedLeastRecentlyUsedPolicy passivates the least recently used
	// entities of the lowest segment first
	// (two segments, with the proportions 0.2 and 0.8).
	SegmentedLeastRecentlyUsedPolicy = "segmented-least-recently-used"
)

// LeaseName is the name of the lease of shard shardID of the entity type
// typeName: "shard-<type>-<shard>", each part path-escaped (a '/' would
// make a Consul key of several segments). Akka's name starts with the
// actor system's name as well; proto.actor's systems have no name shared
// by the nodes of a cluster, so it is left out (as singleton.LeaseName
// does).
func LeaseName(typeName, shardID string) string {
	return "shard-" + url.PathEscape(typeName) + "-" + url.PathEscape(shardID)
}
