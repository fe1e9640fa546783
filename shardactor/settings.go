package shardactor

import (
	"time"
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
	HandOffStopMessage any
}

// DefaultSettings returns Akka's defaults.
func DefaultSettings() Settings {
	return Settings{HandOffTimeout: 60 * time.Second}
}

func (s Settings) withDefaults() Settings {
	if s.HandOffTimeout <= 0 {
		s.HandOffTimeout = DefaultSettings().HandOffTimeout
	}
	return s
}

// handOffWarningAfter is Akka's HandOffStopper.StopTimeoutWarningAfter.
const handOffWarningAfter = 5 * time.Second

// entityHandOffTimeout is when the entities still running at hand-off are
// stopped by force: max(HandOffTimeout-5s, 1s), as in Akka. The 5 s margin
// lets the shard answer ShardStopped before the RebalanceWorker, which waits
// HandOffTimeout in all, gives up.
func (s Settings) entityHandOffTimeout() time.Duration {
	return max(s.HandOffTimeout-handOffWarningAfter, time.Second)
}

// maxBufferedMessages bounds the messages a shard holds for its passivating
// entities, all entities together (Akka's buffer-size default). Beyond it a
// message is dropped with a dead-letter event.
const maxBufferedMessages = 100000
