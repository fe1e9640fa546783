package delivery

import (
	"errors"
	"time"

	"github.com/protoshard/protoshard/internal/option"
)

// ErrInvalidOption: a ProducerOption or ConsumerOption was given a value it
// does not accept.
var ErrInvalidOption = errors.New("delivery: invalid option")

func positiveDuration(name string, d time.Duration) error {
	return option.Positive(ErrInvalidOption, name, d)
}

func positiveInt(name string, n int) error { return option.AtLeastOne(ErrInvalidOption, name, n) }

// ProducerOption configures StartShardingProducerController, with Pekko's
// names and defaults (pekko.reliable-delivery.sharding.producer-controller).
type ProducerOption func(*producerSettings) error

// WithBufferSize bounds the messages accepted but not yet sent because
// their entity has no demand, summed over all entities (Pekko's
// buffer-size). Default 1000.
func WithBufferSize(n int) ProducerOption {
	return func(s *producerSettings) error {
		s.BufferSize = n
		return positiveInt("WithBufferSize", n)
	}
}

// WithCleanupUnusedAfter forgets an entity with nothing unconfirmed or
// buffered after d unused (Pekko's cleanup-unused-after); its next message
// starts a new numbering. Default 120s.
func WithCleanupUnusedAfter(d time.Duration) ProducerOption {
	return func(s *producerSettings) error {
		s.CleanupUnusedAfter = d
		return positiveDuration("WithCleanupUnusedAfter", d)
	}
}

// WithResendFirstUnconfirmedIdleTimeout resends the oldest unconfirmed
// message of an entity idle for d (Pekko's
// resend-first-unconfirmed-idle-timeout), which wakes up an entity that
// stopped; checked every half of it. Default 10s.
func WithResendFirstUnconfirmedIdleTimeout(d time.Duration) ProducerOption {
	return func(s *producerSettings) error {
		s.ResendFirstUnconfirmedIdleTimeout = d
		return positiveDuration("WithResendFirstUnconfirmedIdleTimeout", d)
	}
}

// WithResendFirstInterval resends the first message of a numbering every
// d until it is confirmed (Pekko's durable-queue.resend-first-interval).
// Default 1s.
func WithResendFirstInterval(d time.Duration) ProducerOption {
	return func(s *producerSettings) error {
		s.ResendFirstInterval = d
		return positiveDuration("WithResendFirstInterval", d)
	}
}

// WithMaxMessageSize bounds a message as sent to its entity: its encoded
// SequencedMessage, with room for the ShardingEnvelope that carries it to
// another node. A larger message could never arrive (the region drops
// it), so Send refuses it with ErrMessageTooLarge. Keep it at the
// region's (actorsharding.WithMaxMessageSize). Default: the same, 4 MiB
// less 64 KiB.
func WithMaxMessageSize(bytes int) ProducerOption {
	return func(s *producerSettings) error {
		s.MaxMessageSize = bytes
		return positiveInt("WithMaxMessageSize", bytes)
	}
}

// WithDurableQueue keeps what the controller accepted in q until the
// entities confirmed it (Pekko's durableQueueBehavior), so that a
// controller started again with it (after a stop or a crash) loses
// nothing: Send returns once the message is stored. The controller claims
// the queue when it starts (a second controller with the same queue fails
// with ErrQueueFenced, or fences the first) and closes it when it stops.
// Default: none, and what is unconfirmed when the controller stops is
// lost.
func WithDurableQueue(q DurableProducerQueue) ProducerOption {
	return func(s *producerSettings) error {
		s.DurableQueue = q
		return option.NotNil(ErrInvalidOption, "WithDurableQueue", "queue", q)
	}
}

// WithDurableQueueRequestTimeout bounds each call to the durable queue
// (Pekko's durable-queue.request-timeout). Default 3s.
func WithDurableQueueRequestTimeout(d time.Duration) ProducerOption {
	return func(s *producerSettings) error {
		s.DurableQueueRequestTimeout = d
		return positiveDuration("WithDurableQueueRequestTimeout", d)
	}
}

// WithDurableQueueRetryAttempts is how often a call to the durable queue
// is tried, with a back-off from 100ms to 3s between tries, before the
// controller stops with ErrQueueFailed (Pekko's
// durable-queue.retry-attempts). Default 10.
func WithDurableQueueRetryAttempts(n int) ProducerOption {
	return func(s *producerSettings) error {
		s.DurableQueueRetryAttempts = n
		return positiveInt("WithDurableQueueRetryAttempts", n)
	}
}

// ConsumerOption configures NewShardingConsumerController, with Pekko's
// names and defaults (pekko.reliable-delivery.consumer-controller).
type ConsumerOption func(*consumerSettings) error

// WithFlowControlWindow is how many messages a producer may send ahead of
// the last confirmed one (Pekko's flow-control-window). More demand is
// requested when half of it is used, and at most this many messages are
// stashed per producer while one is being processed. Default 50.
func WithFlowControlWindow(n int) ConsumerOption {
	return func(s *consumerSettings) error {
		s.FlowControlWindow = n
		return positiveInt("WithFlowControlWindow", n)
	}
}

// WithResendIntervalMin is the first interval of the retry of a lost
// Request or Resend (Pekko's resend-interval-min); it grows while nothing
// arrives. Default 2s.
func WithResendIntervalMin(d time.Duration) ConsumerOption {
	return func(s *consumerSettings) error {
		s.ResendIntervalMin = d
		return positiveDuration("WithResendIntervalMin", d)
	}
}

// WithResendIntervalMax bounds that interval (Pekko's
// resend-interval-max). Default 30s; below the minimum: the minimum.
func WithResendIntervalMax(d time.Duration) ConsumerOption {
	return func(s *consumerSettings) error {
		s.ResendIntervalMax = d
		return positiveDuration("WithResendIntervalMax", d)
	}
}

// WithOnlyFlowControl: lost messages are not resent, a gap is accepted and
// the producer keeps nothing for resending (Pekko's only-flow-control).
// Default false.
func WithOnlyFlowControl(only bool) ConsumerOption {
	return func(s *consumerSettings) error {
		s.OnlyFlowControl = only
		return nil
	}
}

// WithProgressRetention forgets a producer silent for d with nothing
// waiting, with its stored progress, since the entity watches no
// producer. Default 1h, as Pekko's event-sourced durable queue
// cleanup-unused-after.
func WithProgressRetention(d time.Duration) ConsumerOption {
	return func(s *consumerSettings) error {
		s.ProgressRetention = d
		return positiveDuration("WithProgressRetention", d)
	}
}
