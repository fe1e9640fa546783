package coordinator

import (
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/protoshard/protoshard/internal/handoff"
)

// Settings of the ShardCoordinator, with Akka's names and defaults
// (akka.cluster.sharding).
type Settings struct {
	// Role: regions run on members with this role ("" = every member);
	// the coordinator runs on the oldest of them.
	Role string
	// RebalanceInterval is the period of RebalanceTick. Default 10s.
	RebalanceInterval time.Duration
	// HandOffTimeout bounds one shard's hand-off (RebalanceWorker).
	// Default 60s.
	HandOffTimeout time.Duration
	// ShardStartTimeout: HostShard is resent at this interval until the
	// region answers ShardStarted. Default 10s.
	ShardStartTimeout time.Duration
	// MinNrOfMembers: no shard is allocated until this many regions have
	// registered (checked until it first holds, as Akka). Default 1.
	MinNrOfMembers int
	// WaitingForStateTimeout bounds a StateStore read. Default 2s.
	WaitingForStateTimeout time.Duration
	// UpdatingStateTimeout bounds a StateStore write. Default 5s.
	UpdatingStateTimeout time.Duration
	// CoordinatorFailureBackoff is the pause before a new coordinator
	// starts after the previous one stopped (its store write failed, or
	// another coordinator wrote the state), doubling up to five times it,
	// and before a failed read of the state is retried. Default 5s.
	CoordinatorFailureBackoff time.Duration
	// RegisterWaitTimeout bounds how long a coordinator that has just
	// started waits for the regions of the live members to register before
	// it allocates a shard its state does not place: a region that hosts
	// the shard already says so when it registers, and the coordinator
	// adopts it there instead of starting it a second time elsewhere (the
	// state store may have been wiped or restored from an old snapshot).
	// Shards the state places are answered at once. Default 4s (twice the
	// regions' retry-interval).
	RegisterWaitTimeout time.Duration
	// RememberEntities (Akka's remember-entities): a shard that lost its
	// home (hand-off, crash, graceful shutdown, full restart) is allocated
	// again at once, without waiting for a message, so that its shard can
	// start its remembered entities. Default off.
	RememberEntities bool
	// ShardRegionQueryTimeout bounds the regions' answers to
	// GetClusterShardingStats when the request names no timeout.
	// Default 3s.
	ShardRegionQueryTimeout time.Duration
	// StashCapacity bounds the messages the coordinator keeps while it
	// reads its state (repeats of one request count once); past
	// it a message is dropped with a dead-letter event, and its region
	// asks again on its next retry. Default 100000, as a region's
	// BufferSize.
	StashCapacity int
	// Tracer starts the spans of hand-offs and rebalance rounds. Default:
	// none (a no-op tracer); actorsharding sets its Sharding's.
	Tracer trace.Tracer
}

// DefaultSettings returns Akka's defaults.
func DefaultSettings() Settings {
	return Settings{
		RebalanceInterval:         10 * time.Second,
		HandOffTimeout:            handoff.Timeout,
		ShardStartTimeout:         10 * time.Second,
		MinNrOfMembers:            1,
		WaitingForStateTimeout:    2 * time.Second,
		UpdatingStateTimeout:      5 * time.Second,
		CoordinatorFailureBackoff: 5 * time.Second,
		RegisterWaitTimeout:       4 * time.Second,
		ShardRegionQueryTimeout:   3 * time.Second,
		StashCapacity:             100000,
	}
}

// WithDefaults returns s with every unset (zero or negative) field set to
// its default.
func (s Settings) WithDefaults() Settings {
	d := DefaultSettings()
	setDuration(&s.RebalanceInterval, d.RebalanceInterval)
	setDuration(&s.HandOffTimeout, d.HandOffTimeout)
	setDuration(&s.ShardStartTimeout, d.ShardStartTimeout)
	setDuration(&s.WaitingForStateTimeout, d.WaitingForStateTimeout)
	setDuration(&s.UpdatingStateTimeout, d.UpdatingStateTimeout)
	setDuration(&s.CoordinatorFailureBackoff, d.CoordinatorFailureBackoff)
	setDuration(&s.RegisterWaitTimeout, d.RegisterWaitTimeout)
	setDuration(&s.ShardRegionQueryTimeout, d.ShardRegionQueryTimeout)
	if s.MinNrOfMembers < 1 {
		s.MinNrOfMembers = d.MinNrOfMembers
	}
	if s.StashCapacity < 1 {
		s.StashCapacity = d.StashCapacity
	}
	return s
}

func setDuration(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}
