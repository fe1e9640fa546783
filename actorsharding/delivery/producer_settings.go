package delivery

import "time"

// ProducerSettings are Pekko's reliable-delivery.sharding.producer-controller
// settings for one producer. A zero or negative field takes Pekko's default.
type ProducerSettings struct {
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
}

// defaultProducerSettings are Pekko's reference.conf values.
func defaultProducerSettings() ProducerSettings {
	return ProducerSettings{
		BufferSize:                        1000,
		CleanupUnusedAfter:                120 * time.Second,
		ResendFirstUnconfirmedIdleTimeout: 10 * time.Second,
		ResendFirstInterval:               time.Second,
	}
}

func (s ProducerSettings) withDefaults() ProducerSettings {
	d := defaultProducerSettings()
	if s.BufferSize <= 0 {
		s.BufferSize = d.BufferSize
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
	return s
}
