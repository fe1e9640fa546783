package consul

import (
	"errors"
	"log/slog"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/internal/option"
)

// Option configures NewProvider, with Akka's names and defaults
// (akka.coordination.lease) where Akka has them.
type Option func(*config) error

// ErrInvalidOption: an Option was given a value it does not accept.
var ErrInvalidOption = errors.New("consul lease: invalid option")

func positive(name string, d time.Duration) error { return option.Positive(ErrInvalidOption, name, d) }

// WithClient sets the Consul API client. Default:
// api.NewClient(api.DefaultConfig()), which honours CONSUL_HTTP_ADDR,
// CONSUL_HTTP_TOKEN and the like.
func WithClient(client *api.Client) Option {
	return func(c *config) error {
		c.Client = client
		return option.NotNil(ErrInvalidOption, "WithClient", "client", client)
	}
}

// WithHeartbeatTimeout sets the session TTL (Akka's heartbeat-timeout):
// how long a crashed holder keeps the lease from others. At least
// MinSessionTTL. Default 120s.
func WithHeartbeatTimeout(d time.Duration) Option {
	return func(c *config) error {
		c.HeartbeatTimeout = d
		return positive("WithHeartbeatTimeout", d)
	}
}

// WithHeartbeatInterval sets how often the session is renewed (Akka's
// heartbeat-interval). Default a tenth of the heartbeat timeout.
func WithHeartbeatInterval(d time.Duration) Option {
	return func(c *config) error {
		c.HeartbeatInterval = d
		return positive("WithHeartbeatInterval", d)
	}
}

// WithOperationTimeout bounds each request to Consul (Akka's
// lease-operation-timeout). Default 5s.
func WithOperationTimeout(d time.Duration) Option {
	return func(c *config) error {
		c.OperationTimeout = d
		return positive("WithOperationTimeout", d)
	}
}

// WithSafetyMargin sets how long before the TTL runs out, counted from the
// start of the last successful renewal, the holder declares the lease
// lost. It must leave room for a heartbeat: heartbeat interval <
// heartbeat timeout − margin. Default a fifth of the heartbeat timeout.
func WithSafetyMargin(d time.Duration) Option {
	return func(c *config) error {
		c.SafetyMargin = d
		return positive("WithSafetyMargin", d)
	}
}

// WithLockDelay sets how long Consul keeps the lock from others after the
// holder's session ended other than by Release: the holder's time to
// stop. It must cover a heartbeat interval plus the operation timeout, and
// Consul allows at most MaxLockDelay. It also delays the next holder after
// a crash: that one acquires between TTL + lock delay and 2×TTL + lock
// delay after the crashed holder's last renewal. Default the heartbeat
// timeout, at most MaxLockDelay.
func WithLockDelay(d time.Duration) Option {
	return func(c *config) error {
		c.LockDelay = d
		return positive("WithLockDelay", d)
	}
}

// WithLogger sets the logger of the leases. Default: the logger of the
// actor system of the singleton or shard that holds the lease,
// slog.Default() for a lease made otherwise.
func WithLogger(logger *slog.Logger) Option {
	return func(c *config) error {
		c.Logger = logger
		return option.NotNil(ErrInvalidOption, "WithLogger", "logger", logger)
	}
}
