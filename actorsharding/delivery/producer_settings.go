package delivery

import (
	"time"

	"github.com/protoshard/protoshard/internal/backoff"
	"github.com/protoshard/protoshard/internal/guard"
)

// producerSettings are Pekko's reliable-delivery.sharding.producer-controller
// settings for one producer; ProducerOptions set them. A zero or negative
// field takes Pekko's default (withDefaults).
type producerSettings struct {
	// BufferSize bounds the messages accepted but not yet sent because their
	// entity has no demand, summed over all entities (default 1000).
	BufferSize int
	// CleanupUnusedAfter forgets an entity with nothing unconfirmed or
	// buffered after this long unused (default 120s); its next message
	// starts a new numbering.
	CleanupUnusedAfter time.Duration
	// ResendFirstUnconfirmedIdleTimeout resends the oldest unconfirmed
	// message of an entity idle for this long (default 10s), which wakes up
	// an entity that stopped; checked every half of it.
	ResendFirstUnconfirmedIdleTimeout time.Duration
	// ResendFirstInterval resends the first message of a numbering until
	// it is confirmed (default 1s; Pekko's durable-queue.resend-first-interval).
	ResendFirstInterval time.Duration
	// MaxMessageSize bounds a message as sent to its entity: its encoded
	// SequencedMessage, with room for the ShardingEnvelope that carries it
	// to another node. A larger message could never arrive (the region
	// drops it), so Send refuses it with ErrMessageTooLarge. Keep it at the
	// region's MaxMessageSize (default: the same, 4 MiB less 64 KiB).
	MaxMessageSize int
	// DurableQueue keeps what the controller accepted until the entities
	// confirmed it, so that a controller started again with it (after a
	// stop or a crash) loses nothing: Send returns once the message is
	// stored. nil: none, and what is unconfirmed when the controller stops
	// is lost. The controller claims the queue when it starts (a second
	// controller with the same queue fails with ErrQueueFenced, or fences
	// the first) and closes it when it stops.
	DurableQueue DurableProducerQueue
	// DurableQueueRequestTimeout bounds each call to the durable queue
	// (default 3s).
	DurableQueueRequestTimeout time.Duration
	// DurableQueueRetryAttempts is how often a call to the durable queue
	// is tried, with a back-off from 100ms to 3s between tries, before the
	// controller stops with ErrQueueFailed (default 10).
	DurableQueueRetryAttempts int
}

// defaultProducerSettings are Pekko's reference.conf values.
func defaultProducerSettings() producerSettings {
	return producerSettings{
		BufferSize:                        1000,
		CleanupUnusedAfter:                120 * time.Second,
		ResendFirstUnconfirmedIdleTimeout: 10 * time.Second,
		ResendFirstInterval:               time.Second,
		DurableQueueRequestTimeout:        3 * time.Second,
		DurableQueueRetryAttempts:         10,
		MaxMessageSize:                    guard.DefaultMaxMessageSize,
	}
}

// queueRetry is Akka's durable-queue retry: DurableQueueRetryAttempts
// tries, with a back-off between them.
func (s producerSettings) queueRetry() queueRetry {
	return queueRetry{
		Exponential: backoff.Exponential{Min: 100 * time.Millisecond, Max: 3 * time.Second, RandomFactor: 0.2},
		attempts:    s.DurableQueueRetryAttempts,
	}
}

func (s producerSettings) withDefaults() producerSettings {
	d := defaultProducerSettings()
	if s.BufferSize <= 0 {
		s.BufferSize = d.BufferSize
	}
	if s.MaxMessageSize <= 0 {
		s.MaxMessageSize = d.MaxMessageSize
	}
	if s.CleanupUnusedAfter <= 0 {
		s.CleanupUnusedAfter = d.CleanupUnusedAfter
	}
	if s.ResendFirstUnconfirmedIdleTimeout <= 0 {
		s.ResendFirstUnconfirmedIdleTimeout = d.ResendFirstUnconfirmedIdleTimeout
	}
	if s.ResendFirstInterval <= 0 {
		s.ResendFirstInterval = d.ResendFirstInterval
	}
	if s.DurableQueueRequestTimeout <= 0 {
		s.DurableQueueRequestTimeout = d.DurableQueueRequestTimeout
	}
	if s.DurableQueueRetryAttempts <= 0 {
		s.DurableQueueRetryAttempts = d.DurableQueueRetryAttempts
	}
	return s
}
