package actorsharding

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/internal/shardingconfig"
	"github.com/protoshard/protoshard/lease"
	"github.com/protoshard/protoshard/shardactor"
	"github.com/protoshard/protoshard/singleton"
)

// Option sets one of an entity type's sharding settings, with Akka's names
// and defaults (akka.cluster.sharding), on StartRegion and StartProxy.
type Option func(*shardingconfig.Settings)

// WithRole sets Akka's role: regions host shards only on members with
// this role; "" (the default) means every member. The coordinator runs on
// the oldest member with it.
func WithRole(role string) Option { return func(s *shardingconfig.Settings) { s.Role = role } }

// WithBufferSize sets Akka's buffer-size: how many messages a region holds
// for shards whose home is unknown. When full, a message is dropped with a
// warning and a dead-letter event. Default 100000.
func WithBufferSize(n int) Option { return func(s *shardingconfig.Settings) { s.BufferSize = n } }

// WithMaxMessageSize sets the largest encoded ShardingEnvelope (the message
// for an entity, its type name and the entity ID) that a region sends to a
// region on another node. A larger one is dropped at the sending region
// with a dead-letter event whose Err is deadletter.ErrMessageTooLarge:
// sent, it would exceed the receiving gRPC server's limit, which closes the
// stream and loses the messages after it. Default: gRPC's 4 MiB receive
// limit less 64 KiB for proto.actor's envelope. Raise it only with the
// receivers' gRPC limit (grpc.MaxRecvMsgSize in remote.WithServerOptions;
// see WithRemoteOptions).
func WithMaxMessageSize(bytes int) Option {
	return func(s *shardingconfig.Settings) { s.MaxMessageSize = bytes }
}

// WithRetryInterval sets Akka's retry-interval: Register and GetShardHome
// are resent at this interval until answered. Default 2s. A region without
// a coordinator (it started, lost its coordinator, or the oldest member
// changed) registers at once, and again after a delay that doubles from
// max(100ms, the interval/8) up to it, as Akka's region; the
// coordinator's singleton proxy finds a coordinator that starts later as it
// starts.
func WithRetryInterval(d time.Duration) Option {
	return func(s *shardingconfig.Settings) { s.RetryInterval = d }
}

// WithHandOffTimeout sets the hand-off timeout of the coordinator's
// rebalance workers and of the shards (Akka's handoff-timeout).
func WithHandOffTimeout(d time.Duration) Option {
	return func(s *shardingconfig.Settings) { s.Coordinator.HandOffTimeout = d; s.Shard.HandOffTimeout = d }
}

// WithHandOffStopMessage sets the message sent to each entity when its
// shard is handed off (default: poison).
func WithHandOffStopMessage(msg any) Option {
	return func(s *shardingconfig.Settings) { s.Shard.HandOffStopMessage = msg }
}

// WithShardStartTimeout sets Akka's shard-start-timeout.
func WithShardStartTimeout(d time.Duration) Option {
	return func(s *shardingconfig.Settings) { s.Coordinator.ShardStartTimeout = d }
}

// WithCoordinatorFailureBackoff sets Akka's coordinator-failure-backoff:
// after the coordinator stopped (a failed state write, or another
// coordinator claimed the state), a new one starts after this pause,
// doubling up to five times it. Default 5s.
func WithCoordinatorFailureBackoff(d time.Duration) Option {
	return func(s *shardingconfig.Settings) { s.Coordinator.CoordinatorFailureBackoff = d }
}

// WithShardLease is Akka's sharding use-lease: each shard acquires a lease
// from leases (named shardactor.LeaseName(type, shard)) before it starts
// any entity, and stops with its entities when the lease is lost. Every
// node of the type needs the same provider (lease/consul over one Consul,
// or one lease.MemoryLeases in one process).
func WithShardLease(leases lease.Provider) Option {
	return func(s *shardingconfig.Settings) { s.Shard.UseLease = leases }
}

// WithShardLeaseRetryInterval sets Akka's sharding lease-retry-interval:
// how long a shard that could not acquire its lease (WithShardLease) waits
// before it tries again. Default 5s, Akka's; with lease/consulcas, whose
// contender takes over within seconds, about 1s keeps the retry from
// adding to a failover.
func WithShardLeaseRetryInterval(d time.Duration) Option {
	return func(s *shardingconfig.Settings) { s.Shard.LeaseRetryInterval = d }
}

// WithShardFailureBackoff sets Akka's shard-failure-backoff: with
// remember-entities, a shard that stopped unexpectedly (its store refused
// a write for good, its lease was lost) starts again after it. Default 10s.
func WithShardFailureBackoff(d time.Duration) Option {
	return func(s *shardingconfig.Settings) { s.Shard.ShardFailureBackoff = d }
}

// WithRebalanceInterval sets Akka's rebalance-interval.
func WithRebalanceInterval(d time.Duration) Option {
	return func(s *shardingconfig.Settings) { s.Coordinator.RebalanceInterval = d }
}

// WithMinNrOfMembers sets Akka's min-nr-of-members: no shard is allocated
// before this many regions registered.
func WithMinNrOfMembers(n int) Option {
	return func(s *shardingconfig.Settings) { s.Coordinator.MinNrOfMembers = n }
}

// WithLeastShardAllocationStrategy sets the default strategy's
// rebalance-absolute-limit and rebalance-relative-limit.
func WithLeastShardAllocationStrategy(absoluteLimit int, relativeLimit float64) Option {
	return func(s *shardingconfig.Settings) {
		s.AllocationStrategy = coordinatoractor.NewLeastShardAllocationStrategy(absoluteLimit, relativeLimit)
	}
}

// WithAllocationStrategy sets a custom allocation strategy.
func WithAllocationStrategy(st coordinatoractor.ShardAllocationStrategy) Option {
	return func(s *shardingconfig.Settings) { s.AllocationStrategy = st }
}

// WithStateStore sets where the coordinator keeps its state across
// coordinator moves. It must be shared by every node of the entity type: a
// consulstore.StateStore, or (nodes in one process) one
// coordinatoractor.MemoryStore. Default, with in-process membership
// (membership/local): one MemoryStore per entity type shared by the
// registry's nodes. With any other membership there is no default:
// StartRegion and StartProxy fail with ErrNoStateStore, because a store of
// one node would let a coordinator that moves to another process start
// from an empty state and allocate a shard that still runs.
func WithStateStore(st coordinatoractor.StateStore) Option {
	return func(s *shardingconfig.Settings) { s.StateStore = st }
}

// WithCoordinatorSingleton adds options of the cluster singleton manager
// that runs the coordinator (Akka's coordinator-singleton): hand-over retry
// interval, removal margin (with Consul membership at least the TTL), a
// lease. Default: singleton's defaults. Its role is always the sharding
// role and its singleton name always "singleton", as Akka's.
func WithCoordinatorSingleton(opts ...singleton.Option) Option {
	return func(s *shardingconfig.Settings) { s.Singleton.Options = append(s.Singleton.Options, opts...) }
}

// WithShardRegionQueryTimeout sets Akka's shard-region-query-timeout: it
// bounds the answers to GetShardRegionState, GetShardRegionStats and
// GetClusterShardingStats. Default 3s.
func WithShardRegionQueryTimeout(d time.Duration) Option {
	return func(s *shardingconfig.Settings) {
		s.ShardRegionQueryTimeout = d
		s.Coordinator.ShardRegionQueryTimeout = d
	}
}

// WithRememberEntities switches remember-entities on, with store keeping the
// entity IDs (shared by every node of the type: a
// consulstore.RememberEntitiesStore, or for nodes in one process one
// shardactor.MemoryRememberEntitiesStore). A nil store means a memory store
// of this node only, which does not survive the node.
func WithRememberEntities(store shardactor.RememberEntitiesStore) Option {
	return func(s *shardingconfig.Settings) {
		s.RememberEntities = true
		s.Shard.RememberEntitiesStore = store
	}
}

// WithPassivationIdleTimeout sets Akka's passivation idle timeout (default
// 120s); a negative value switches idle passivation off. It is off with
// remember-entities regardless.
func WithPassivationIdleTimeout(d time.Duration) Option {
	return func(s *shardingconfig.Settings) { s.Shard.PassivationIdleTimeout = d }
}

// WithActiveEntityLimit sets Akka's passivation active-entity-limit of each
// region (0: none), divided evenly among the region's shards, and the
// replacement policy (shardactor.LeastRecentlyUsedPolicy or
// shardactor.SegmentedLeastRecentlyUsedPolicy; "" for the default).
func WithActiveEntityLimit(limit int, policy string) Option {
	return func(s *shardingconfig.Settings) {
		s.Shard.ActiveEntityLimit = limit
		s.Shard.ReplacementPolicy = policy
	}
}

// WithEntityRestartBackoff sets Akka's entity-restart-backoff (default 10s).
func WithEntityRestartBackoff(d time.Duration) Option {
	return func(s *shardingconfig.Settings) { s.Shard.EntityRestartBackoff = d }
}

// WithEntityRecoveryConstantRate sets Akka's entity-recovery-strategy to
// "constant": n remembered entities started every frequency.
func WithEntityRecoveryConstantRate(n int, frequency time.Duration) Option {
	return func(s *shardingconfig.Settings) {
		s.Shard.EntityRecoveryStrategy = shardactor.EntityRecoveryConstant
		s.Shard.EntityRecoveryConstantNumberOfEntities = n
		s.Shard.EntityRecoveryConstantFrequency = frequency
	}
}

// WithEntitySupervisorStrategy sets what happens when an entity fails
// (the shard's supervisor strategy; default: proto.actor's restart).
func WithEntitySupervisorStrategy(st actor.SupervisorStrategy) Option {
	return func(s *shardingconfig.Settings) { s.Shard.EntitySupervisorStrategy = st }
}

// WithGracefulShutdownTimeout bounds the wait of a node's membership leave
// for the graceful shutdown of this type's region. Default: the hand-off
// timeout plus 10s.
func WithGracefulShutdownTimeout(d time.Duration) Option {
	return func(s *shardingconfig.Settings) { s.GracefulShutdownTimeout = d }
}

// WithWaitingForStateTimeout sets Akka's waiting-for-state-timeout: it
// bounds a read of the coordinator's state store and of a shard's
// remembered entities (a read that fails or times out is tried again
// after a back-off). Default 2s.
func WithWaitingForStateTimeout(d time.Duration) Option {
	return func(s *shardingconfig.Settings) {
		s.Coordinator.WaitingForStateTimeout = d
		s.Shard.WaitingForStateTimeout = d
	}
}

// WithUpdatingStateTimeout sets Akka's updating-state-timeout: it bounds a
// write of the coordinator's state store and of a shard's remembered
// entities. Default 5s.
func WithUpdatingStateTimeout(d time.Duration) Option {
	return func(s *shardingconfig.Settings) {
		s.Coordinator.UpdatingStateTimeout = d
		s.Shard.UpdatingStateTimeout = d
	}
}

// WithCoordinatorStashCapacity bounds the messages the coordinator keeps
// while it reads its state (repeats of one request count once); past it a
// message is dropped with a dead-letter event, and its region asks again
// on its next retry. Default 100000.
func WithCoordinatorStashCapacity(n int) Option {
	return func(s *shardingconfig.Settings) { s.Coordinator.StashCapacity = n }
}

// WithRegisterWaitTimeout sets how long a coordinator that has just
// started waits for the regions of the live members to register before it
// allocates a shard its state does not place (a region that hosts the
// shard already says so when it registers, and is adopted as its home).
// Default: twice the retry interval.
func WithRegisterWaitTimeout(d time.Duration) Option {
	return func(s *shardingconfig.Settings) { s.Coordinator.RegisterWaitTimeout = d }
}
