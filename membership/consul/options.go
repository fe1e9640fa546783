package consul

import (
	"errors"
	"log/slog"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/internal/option"
)

// Option configures New.
type Option func(*config) error

// ErrInvalidOption: an Option was given a value it does not accept.
var ErrInvalidOption = errors.New("consul membership: invalid option")

// WithClient sets the Consul API client. Default:
// api.NewClient(api.DefaultConfig()), which honours CONSUL_HTTP_ADDR,
// CONSUL_HTTP_TOKEN and the like.
func WithClient(client *api.Client) Option {
	return func(c *config) error {
		c.Client = client
		return option.NotNil(ErrInvalidOption, "WithClient", "client", client)
	}
}

// WithServiceName sets the Consul service every member registers as;
// members of one cluster share it. It is also the cluster's name
// (membership.Cluster.Name), under which the cluster's keys in Consul
// live: give every cluster that shares a Consul its own. Default
// DefaultServiceName.
func WithServiceName(name string) Option {
	return func(c *config) error {
		if name == "" {
			return option.Invalid(ErrInvalidOption, "WithServiceName", "empty name")
		}
		c.ServiceName = name
		return nil
	}
}

// WithTTL sets the health check TTL: a member that does not refresh it for
// this long turns critical and is removed by the others. At least 1s.
// Default 5s.
func WithTTL(d time.Duration) Option {
	return func(c *config) error {
		c.TTL = d
		return option.Positive(ErrInvalidOption, "WithTTL", d)
	}
}

// WithRefreshInterval sets how often the TTL is refreshed; it must be
// below the TTL. Default a third of the TTL.
func WithRefreshInterval(d time.Duration) Option {
	return func(c *config) error {
		c.RefreshInterval = d
		return option.Positive(ErrInvalidOption, "WithRefreshInterval", d)
	}
}

// WithDeregisterCriticalServiceAfter makes Consul delete a registration
// whose check stayed critical for d (a crashed member's leftovers).
// Default and minimum 1m (Consul's own minimum).
func WithDeregisterCriticalServiceAfter(d time.Duration) Option {
	return func(c *config) error {
		if d < minDeregisterAfter {
			return option.Invalid(ErrInvalidOption, "WithDeregisterCriticalServiceAfter", "%v is below Consul's minimum %v", d, minDeregisterAfter)
		}
		c.DeregisterCriticalServiceAfter = d
		return nil
	}
}

// WithRetryBackoff sets the first delay after a failed watch query; it
// doubles up to 10s. Default 500ms.
func WithRetryBackoff(d time.Duration) Option {
	return func(c *config) error {
		c.RetryBackoff = d
		return option.Positive(ErrInvalidOption, "WithRetryBackoff", d)
	}
}

// WithLogger sets the provider's logger. Default: the logger of the actor
// system whose membership.Cluster uses the provider (see
// membership.Provider), slog.Default() before that.
func WithLogger(logger *slog.Logger) Option {
	return func(c *config) error {
		c.Logger = logger
		return option.NotNil(ErrInvalidOption, "WithLogger", "logger", logger)
	}
}
