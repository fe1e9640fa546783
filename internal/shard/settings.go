package shard

import (
	"time"

	"github.com/protoshard/protoshard/shardactor"
)

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
