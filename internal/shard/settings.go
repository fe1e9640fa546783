package shard

import (
	"time"

	"github.com/protoshard/protoshard/internal/handoff"
	"github.com/protoshard/protoshard/shardactor"
)

// DefaultSettings returns Akka's defaults of a shard's settings.
func DefaultSettings() shardactor.Settings {
	return shardactor.Settings{
		HandOffTimeout:         handoff.Timeout,
		PassivationIdleTimeout: 120 * time.Second,
		ReplacementPolicy:      shardactor.LeastRecentlyUsedPolicy,

		EntityRecoveryStrategy:                 shardactor.EntityRecoveryAll,
		EntityRecoveryConstantNumberOfEntities: 5,
		EntityRecoveryConstantFrequency:        100 * time.Millisecond,
		EntityRestartBackoff:                   10 * time.Second,
		RetryInterval:                          2 * time.Second,
		WaitingForStateTimeout:                 2 * time.Second,
		UpdatingStateTimeout:                   5 * time.Second,
		ShardFailureBackoff:                    10 * time.Second,
		LeaseRetryInterval:                     5 * time.Second,
	}
}

// WithDefaults returns s with its zero fields set to their defaults, as
// the shard uses them (its region reads ShardFailureBackoff from it).
func WithDefaults(s shardactor.Settings) shardactor.Settings {
	d := DefaultSettings()
	if s.HandOffTimeout <= 0 {
		s.HandOffTimeout = d.HandOffTimeout
	}
	if s.PassivationIdleTimeout == 0 {
		s.PassivationIdleTimeout = d.PassivationIdleTimeout
	}
	if s.ActiveEntityLimit < 0 {
		s.ActiveEntityLimit = 0
	}
	if s.ReplacementPolicy == "" {
		s.ReplacementPolicy = d.ReplacementPolicy
	}
	if s.EntityRecoveryStrategy != shardactor.EntityRecoveryConstant {
		s.EntityRecoveryStrategy = shardactor.EntityRecoveryAll
	}
	if s.EntityRecoveryConstantNumberOfEntities <= 0 {
		s.EntityRecoveryConstantNumberOfEntities = d.EntityRecoveryConstantNumberOfEntities
	}
	if s.EntityRecoveryConstantFrequency <= 0 {
		s.EntityRecoveryConstantFrequency = d.EntityRecoveryConstantFrequency
	}
	if s.EntityRestartBackoff <= 0 {
		s.EntityRestartBackoff = d.EntityRestartBackoff
	}
	if s.RetryInterval <= 0 {
		s.RetryInterval = d.RetryInterval
	}
	if s.WaitingForStateTimeout <= 0 {
		s.WaitingForStateTimeout = d.WaitingForStateTimeout
	}
	if s.UpdatingStateTimeout <= 0 {
		s.UpdatingStateTimeout = d.UpdatingStateTimeout
	}
	if s.ShardFailureBackoff <= 0 {
		s.ShardFailureBackoff = d.ShardFailureBackoff
	}
	if s.LeaseRetryInterval <= 0 {
		s.LeaseRetryInterval = d.LeaseRetryInterval
	}
	return s
}

// storeWaitAttempts: a message waits for the remember-entities store for
// at most this many UpdatingStateTimeouts (a write, and retries).
const storeWaitAttempts = 3

// storeWaitBound is how long a message may wait for the remember-entities
// store before it is dropped.
func storeWaitBound(s shardactor.Settings) time.Duration {
	return storeWaitAttempts * s.UpdatingStateTimeout
}

// idlePassivation tells whether idle entities are passivated.
func idlePassivation(s shardactor.Settings) bool {
	return s.PassivationIdleTimeout > 0 && !s.RememberEntities
}

// handOffWarningAfter is Akka's HandOffStopper.StopTimeoutWarningAfter.
const handOffWarningAfter = 5 * time.Second

// entityHandOffTimeout is when the entities still running at hand-off are
// stopped by force: max(HandOffTimeout-5s, 1s), as in Akka. The 5 s margin
// lets the shard answer ShardStopped before the RebalanceWorker, which waits
// HandOffTimeout in all, gives up.
func entityHandOffTimeout(s shardactor.Settings) time.Duration {
	return max(s.HandOffTimeout-handOffWarningAfter, time.Second)
}

// maxBufferedMessages bounds the messages a shard holds for its passivating
// entities, all entities together (Akka's buffer-size default). Beyond it a
// message is dropped with a dead-letter event.
const maxBufferedMessages = 100000
