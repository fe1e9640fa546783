// Package shardingconfig holds the settings of one entity type's
// sharding, which actorsharding's options set.
package shardingconfig

import (
	"time"

	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/internal/coordinator"
	"github.com/protoshard/protoshard/internal/guard"
	"github.com/protoshard/protoshard/internal/shard"
	"github.com/protoshard/protoshard/shardactor"
	"github.com/protoshard/protoshard/singleton"
)

// Settings of one entity type's sharding, with Akka's names and defaults
// (akka.cluster.sharding). It composes the settings of the actors it
// starts. Users change it with actorsharding's options; it is internal so
// that the options are the one way to set it, while shardeddaemonprocess
// can still read what its options resolve to.
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
	Coordinator coordinator.Settings
	// Shard configures the Shard actors (handoff-timeout, the hand-off stop
	// message).
	Shard shardactor.Settings
	// Singleton configures the cluster singleton that runs the coordinator
	// (actorsharding.WithCoordinatorSingleton).
	Singleton CoordinatorSingleton
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
	// StartRegion and StartProxy fail with actorsharding.ErrNoStateStore, because a store
	// of one node would let a coordinator that moves to another process
	// start from an empty state and allocate a shard that still runs.
	StateStore coordinatoractor.StateStore
}

// Default returns Akka's defaults.
func Default() Settings {
	return Settings{
		BufferSize:              100000,
		RetryInterval:           2 * time.Second,
		ShardRegionQueryTimeout: 3 * time.Second,
		MaxMessageSize:          guard.DefaultMaxMessageSize,
		Coordinator:             coordinator.DefaultSettings(),
		Shard:                   shard.DefaultSettings(),
	}
}

// WithDefaults fills what is unset with the defaults, and passes the
// entity type's settings down to the coordinator's and the shards'.
func (s Settings) WithDefaults() Settings {
	d := Default()
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

// HomeIdleTimeout is how long a region keeps the home of a shard on
// another node that none of its messages went to: the passivation idle
// timeout (the shard's entities there are passivated by then, unless
// others used them), or its default when idle passivation is off, and
// minHomeIdleTimeout at least.
func (s Settings) HomeIdleTimeout() time.Duration {
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

// CoordinatorSingleton is the cluster singleton that runs the
// coordinator: the managers' options (its name is always
// CoordinatorSingletonName).
type CoordinatorSingleton struct {
	Options []singleton.Option
}

// CoordinatorSingletonName is Akka's: the coordinator's singleton is
// always named "singleton".
const CoordinatorSingletonName = "singleton"

// EndpointWriterQueueSize is the initial size, in messages, of the queue
// of the remote actorsharding.Join starts to each node it sends to.
// proto.actor's default, 1,000,000 slots, is a 16 MB ring per peer from
// its first message on: 800 MB of heap on a node of a 51-node cluster,
// which the garbage collector scans at every cycle and the process touches
// as the ring wraps. The ring doubles whenever it is full, without bound
// and without losing a message, and never shrinks, so the initial size
// only saves the first doublings: 4096 slots (64 KB) hold four of the
// remote's batches (1000 messages by default) before the first, and a peer
// that needs more grows its own queue to its own peak.
const EndpointWriterQueueSize = 4096
