package actorsharding

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/internal/guard"
	"github.com/protoshard/protoshard/internal/shard"
	"github.com/protoshard/protoshard/lease"
	"github.com/protoshard/protoshard/shardactor"
	"github.com/protoshard/protoshard/singleton"
)

// Settings of one entity type's sharding, with Akka's names and defaults
// (akka.cluster.sharding). It composes the settings of the actors it
// starts. Change it with Options.
type Settings struct {
	// Role: regions host shards only on members with this role; "" means
	// every member. The coordinator runs on the oldest member with it.
	Role string
	// BufferSize bounds the messages a region holds for shards whose home
	// is unknown. When full, a message is dropped with a warning and a
	// dead-letter event. Default 100000.
	BufferSize int
	// RetryInterval: Register and GetShardHome are resent at this interval
	// until answered. Default 2s. A region without a coordinator (it
	// started, lost its coordinator, or the oldest member changed)
	// registers at once, and again after a delay that doubles from
	// max(100ms, RetryInterval/8) up to it, as Akka's region; the
	// coordinator's singleton proxy finds a coordinator that starts later
	// as it starts.
	RetryInterval time.Duration
	// ShardRegionQueryTimeout bounds the answers to GetShardRegionState,
	// GetShardRegionStats and GetClusterShardingStats. Default 3s.
	ShardRegionQueryTimeout time.Duration
	// GracefulShutdownTimeout bounds the wait of a node's membership leave
	// for its regions' graceful shutdown. Default: the hand-off timeout
	// plus 10s.
	GracefulShutdownTimeout time.Duration
	// MaxMessageSize is the largest encoded ShardingEnvelope (the message
	// for an entity, its type name and the entity ID) that a region sends
	// to a region on another node. A larger one is dropped at the sending
	// region with a dead-letter event whose Err is
	// deadletter.ErrMessageTooLarge: sent, it would exceed the receiving
	// gRPC server's limit, which closes the stream and loses the messages
	// after it. Default: gRPC's 4 MiB receive limit less 64 KiB for
	// proto.actor's envelope. Raise it only with the receivers' gRPC limit
	// (grpc.MaxRecvMsgSize in remote.WithServerOptions; see
	// WithRemoteOptions).
	MaxMessageSize int
	// RememberEntities (Akka's remember-entities): every shard records its
	// running entities in the Shard settings' RememberEntitiesStore and
	// starts them again wherever it starts next (rebalance, crash, full
	// restart). Idle passivation is off with it (Akka's rule).
	RememberEntities bool
	// Coordinator configures the ShardCoordinator (rebalance-interval,
	// handoff-timeout, shard-start-timeout, min-nr-of-members...).
	Coordinator coordinatoractor.Settings
	// Shard configures the Shard actors (handoff-timeout, the hand-off stop
	// message).
	Shard shardactor.Settings
	// Singleton configures the cluster singleton that runs the coordinator
	// (WithCoordinatorSingleton).
	Singleton coordinatorSingleton
	// AllocationStrategy decides where shards go. Default: the
	// LeastShardAllocationStrategy with rebalance-absolute-limit 20 and
	// rebalance-relative-limit 0.1.
	AllocationStrategy coordinatoractor.ShardAllocationStrategy
	// StateStore keeps the coordinator's state across coordinator moves.
	// It must be shared by every node of the entity type: a
	// consulstore.StateStore, or (nodes in one process) one
	// coordinatoractor.MemoryStore. Default, with in-process membership
	// (membership/local): one MemoryStore per entity type shared by the
	// registry's nodes. With any other membership there is no default:
	// StartRegion and StartProxy fail with ErrNoStateStore, because a store
	// of one node would let a coordinator that moves to another process
	// start from an empty state and allocate a shard that still runs.
	StateStore coordinatoractor.StateStore
}

// DefaultSettings returns Akka's defaults.
func DefaultSettings() Settings {
	return Settings{
		BufferSize:              100000,
		RetryInterval:           2 * time.Second,
		ShardRegionQueryTimeout: 3 * time.Second,
		MaxMessageSize:          guard.DefaultMaxMessageSize,
		Coordinator:             coordinatoractor.DefaultSettings(),
		Shard:                   shard.DefaultSettings(),
	}
}

func (s Settings) withDefaults() Settings {
	d := DefaultSettings()
	if s.BufferSize <= 0 {
		s.BufferSize = d.BufferSize
	}
	if s.RetryInterval <= 0 {
		s.RetryInterval = d.RetryInterval
	}
	if s.ShardRegionQueryTimeout <= 0 {
		s.ShardRegionQueryTimeout = d.ShardRegionQueryTimeout
	}
	if s.MaxMessageSize <= 0 {
		s.MaxMessageSize = d.MaxMessageSize
	}
	s.Coordinator.Role = s.Role
	s.Coordinator.RememberEntities = s.RememberEntities
	s.Shard.RememberEntities = s.RememberEntities
	if s.Shard.RetryInterval <= 0 {
		s.Shard.RetryInterval = s.RetryInterval
	}
	if s.RememberEntities && s.Shard.RememberEntitiesStore == nil {
		s.Shard.RememberEntitiesStore = shardactor.NewMemoryRememberEntitiesStore()
	}
	if s.Coordinator.RegisterWaitTimeout <= 0 {
		// Regions register at the retry interval: two of them cover one
		// retry that was lost.
		s.Coordinator.RegisterWaitTimeout = 2 * s.RetryInterval
	}
	if s.Coordinator.ShardRegionQueryTimeout <= 0 {
		s.Coordinator.ShardRegionQueryTimeout = s.ShardRegionQueryTimeout
	}
	s.Coordinator = s.Coordinator.WithDefaults()
	if s.Shard.HandOffTimeout <= 0 {
		s.Shard.HandOffTimeout = s.Coordinator.HandOffTimeout
	}
	if s.GracefulShutdownTimeout <= 0 {
		s.GracefulShutdownTimeout = s.Coordinator.HandOffTimeout + 10*time.Second
	}
	if s.AllocationStrategy == nil {
		s.AllocationStrategy = coordinatoractor.NewLeastShardAllocationStrategy(
			coordinatoractor.DefaultRebalanceAbsoluteLimit, coordinatoractor.DefaultRebalanceRelativeLimit)
	}
	return s
}

// homeIdleTimeout is how long a region keeps the home of a shard on
// another node that none of its messages went to: the passivation idle
// timeout (the shard's entities there are passivated by then, unless
// others used them), or its default when idle passivation is off, and
// minHomeIdleTimeout at least.
func (s Settings) homeIdleTimeout() time.Duration {
	d := shard.WithDefaults(s.Shard).PassivationIdleTimeout
	if d <= 0 {
		d = shard.DefaultSettings().PassivationIdleTimeout
	}
	return max(d, minHomeIdleTimeout)
}

// minHomeIdleTimeout: a message a region sent to a home has reached it,
// or was dropped, well before this (proto.actor's endpoint writer gives up
// on a connection after five attempts two seconds apart). So when the
// region forgets a home it sent nothing to for this long, nothing is on
// its way there that a hand-off of the shard would have to let arrive
// first (the BeginHandOff relay of handOffs).
const minHomeIdleTimeout = 30 * time.Second

// Option changes Settings.
type Option func(*Settings)

// WithSettings replaces the settings as a whole; later options still apply.
func WithSettings(s Settings) Option { return func(o *Settings) { *o = s } }

// WithRole sets Settings.Role.
func WithRole(role string) Option { return func(s *Settings) { s.Role = role } }

// WithBufferSize sets Settings.BufferSize (Akka's buffer-size).
func WithBufferSize(n int) Option { return func(s *Settings) { s.BufferSize = n } }

// WithMaxMessageSize sets Settings.MaxMessageSize.
func WithMaxMessageSize(bytes int) Option { return func(s *Settings) { s.MaxMessageSize = bytes } }

// WithRetryInterval sets Settings.RetryInterval (Akka's retry-interval).
func WithRetryInterval(d time.Duration) Option { return func(s *Settings) { s.RetryInterval = d } }

// WithHandOffTimeout sets the hand-off timeout of the coordinator's
// rebalance workers and of the shards (Akka's handoff-timeout).
func WithHandOffTimeout(d time.Duration) Option {
	return func(s *Settings) { s.Coordinator.HandOffTimeout = d; s.Shard.HandOffTimeout = d }
}

// WithHandOffStopMessage sets the message sent to each entity when its
// shard is handed off (default: poison).
func WithHandOffStopMessage(msg any) Option {
	return func(s *Settings) { s.Shard.HandOffStopMessage = msg }
}

// WithShardStartTimeout sets Akka's shard-start-timeout.
func WithShardStartTimeout(d time.Duration) Option {
	return func(s *Settings) { s.Coordinator.ShardStartTimeout = d }
}

// WithCoordinatorFailureBackoff sets Akka's coordinator-failure-backoff:
// after the coordinator stopped (a failed state write, or another
// coordinator claimed the state), a new one starts after this pause,
// doubling up to five times it. Default 5s.
func WithCoordinatorFailureBackoff(d time.Duration) Option {
	return func(s *Settings) { s.Coordinator.CoordinatorFailureBackoff = d }
}

// WithShardLease is Akka's sharding use-lease: each shard acquires a lease
// from leases (named shardactor.LeaseName(type, shard)) before it starts
// any entity, and stops with its entities when the lease is lost. Every
// node of the type needs the same provider (lease/consul over one Consul,
// or one lease.MemoryLeases in one process).
func WithShardLease(leases lease.Provider) Option {
	return func(s *Settings) { s.Shard.UseLease = leases }
}

// WithShardLeaseRetryInterval sets Akka's sharding lease-retry-interval:
// how long a shard that could not acquire its lease (WithShardLease) waits
// before it tries again. Default 5s, Akka's; with lease/consulcas, whose
// contender takes over within seconds, about 1s keeps the retry from
// adding to a failover.
func WithShardLeaseRetryInterval(d time.Duration) Option {
	return func(s *Settings) { s.Shard.LeaseRetryInterval = d }
}

// WithShardFailureBackoff sets Akka's shard-failure-backoff: with
// remember-entities, a shard that stopped unexpectedly (its store refused
// a write for good, its lease was lost) starts again after it. Default 10s.
func WithShardFailureBackoff(d time.Duration) Option {
	return func(s *Settings) { s.Shard.ShardFailureBackoff = d }
}

// WithRebalanceInterval sets Akka's rebalance-interval.
func WithRebalanceInterval(d time.Duration) Option {
	return func(s *Settings) { s.Coordinator.RebalanceInterval = d }
}

// WithMinNrOfMembers sets Akka's min-nr-of-members: no shard is allocated
// before this many regions registered.
func WithMinNrOfMembers(n int) Option {
	return func(s *Settings) { s.Coordinator.MinNrOfMembers = n }
}

// WithLeastShardAllocationStrategy sets the default strategy's
// rebalance-absolute-limit and rebalance-relative-limit.
func WithLeastShardAllocationStrategy(absoluteLimit int, relativeLimit float64) Option {
	return func(s *Settings) {
		s.AllocationStrategy = coordinatoractor.NewLeastShardAllocationStrategy(absoluteLimit, relativeLimit)
	}
}

// WithAllocationStrategy sets a custom allocation strategy.
func WithAllocationStrategy(st coordinatoractor.ShardAllocationStrategy) Option {
	return func(s *Settings) { s.AllocationStrategy = st }
}

// WithStateStore sets where the coordinator keeps its state.
func WithStateStore(st coordinatoractor.StateStore) Option {
	return func(s *Settings) { s.StateStore = st }
}

// coordinatorSingleton is the cluster singleton that runs the
// coordinator: the managers' options (its name is always
// coordinatorSingletonName).
type coordinatorSingleton struct {
	Options []singleton.Option
}

// coordinatorSingletonName is Akka's: the coordinator's singleton is
// always named "singleton".
const coordinatorSingletonName = "singleton"

// WithCoordinatorSingleton adds options of the cluster singleton manager
// that runs the coordinator (Akka's coordinator-singleton): hand-over retry
// interval, removal margin (with Consul membership at least the TTL), a
// lease. Default: singleton's defaults. Its role is always the sharding
// role and its singleton name always "singleton", as Akka's.
func WithCoordinatorSingleton(opts ...singleton.Option) Option {
	return func(s *Settings) { s.Singleton.Options = append(s.Singleton.Options, opts...) }
}

// WithShardRegionQueryTimeout sets Akka's shard-region-query-timeout.
func WithShardRegionQueryTimeout(d time.Duration) Option {
	return func(s *Settings) { s.ShardRegionQueryTimeout = d; s.Coordinator.ShardRegionQueryTimeout = d }
}

// WithRememberEntities switches remember-entities on, with store keeping the
// entity IDs (shared by every node of the type: a
// consulstore.RememberEntitiesStore, or for nodes in one process one
// shardactor.MemoryRememberEntitiesStore). A nil store means a memory store
// of this node only, which does not survive the node.
func WithRememberEntities(store shardactor.RememberEntitiesStore) Option {
	return func(s *Settings) {
		s.RememberEntities = true
		s.Shard.RememberEntitiesStore = store
	}
}

// WithPassivationIdleTimeout sets Akka's passivation idle timeout (default
// 120s); a negative value switches idle passivation off. It is off with
// remember-entities regardless.
func WithPassivationIdleTimeout(d time.Duration) Option {
	return func(s *Settings) { s.Shard.PassivationIdleTimeout = d }
}

// WithActiveEntityLimit sets Akka's passivation active-entity-limit of each
// region (0: none), divided evenly among the region's shards, and the
// replacement policy (shardactor.LeastRecentlyUsedPolicy or
// shardactor.SegmentedLeastRecentlyUsedPolicy; "" for the default).
func WithActiveEntityLimit(limit int, policy string) Option {
	return func(s *Settings) { s.Shard.ActiveEntityLimit = limit; s.Shard.ReplacementPolicy = policy }
}

// WithEntityRestartBackoff sets Akka's entity-restart-backoff (default 10s).
func WithEntityRestartBackoff(d time.Duration) Option {
	return func(s *Settings) { s.Shard.EntityRestartBackoff = d }
}

// WithEntityRecoveryConstantRate sets Akka's entity-recovery-strategy to
// "constant": n remembered entities started every frequency.
func WithEntityRecoveryConstantRate(n int, frequency time.Duration) Option {
	return func(s *Settings) {
		s.Shard.EntityRecoveryStrategy = shardactor.EntityRecoveryConstant
		s.Shard.EntityRecoveryConstantNumberOfEntities = n
		s.Shard.EntityRecoveryConstantFrequency = frequency
	}
}

// WithEntitySupervisorStrategy sets what happens when an entity fails
// (the shard's supervisor strategy; default: proto.actor's restart).
func WithEntitySupervisorStrategy(st actor.SupervisorStrategy) Option {
	return func(s *Settings) { s.Shard.EntitySupervisorStrategy = st }
}
