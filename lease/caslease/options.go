package caslease

import (
	"errors"
	"log/slog"
	"time"

	"github.com/protoshard/protoshard/internal/option"
)

// Option configures NewProvider.
type Option func(*config) error

// ErrInvalidOption: an Option was given a value it does not accept.
var ErrInvalidOption = errors.New("cas lease: invalid option")

func positive(name string, d time.Duration) error { return option.Positive(ErrInvalidOption, name, d) }

// WithKeyPrefix is prepended to the lease name to make the record's key.
// Default "".
func WithKeyPrefix(prefix string) Option {
	return func(c *config) error {
		c.KeyPrefix = prefix
		return nil
	}
}

// WithDuration: a record left unchanged for d (plus drift and margin) may
// be taken over. Default 5s.
func WithDuration(d time.Duration) Option {
	return func(c *config) error {
		c.Duration = d
		return positive("WithDuration", d)
	}
}

// WithRenewInterval sets how often the holder rewrites the record. It must
// leave a renewal before the holder gives up: interval < duration × (1 −
// drift) − safety margin. Default 1s.
func WithRenewInterval(d time.Duration) Option {
	return func(c *config) error {
		c.RenewInterval = d
		return positive("WithRenewInterval", d)
	}
}

// WithSafetyMargin sets the holder's time to stop what the lease protects
// before anybody can take over (see the package documentation). Default
// 1s.
func WithSafetyMargin(d time.Duration) Option {
	return func(c *config) error {
		c.SafetyMargin = d
		return positive("WithSafetyMargin", d)
	}
}

// WithOperationTimeout bounds each request to the store (Akka's
// lease-operation-timeout). Default 1s.
func WithOperationTimeout(d time.Duration) Option {
	return func(c *config) error {
		c.OperationTimeout = d
		return positive("WithOperationTimeout", d)
	}
}

// WithDrift sets the bound ρ on any node's clock-rate error, 0 ≤ ρ < 0.5.
// Default 0.01.
func WithDrift(rho float64) Option {
	return func(c *config) error {
		if rho < 0 || rho >= 0.5 {
			return option.Invalid(ErrInvalidOption, "WithDrift", "%v is outside 0 ≤ ρ < 0.5", rho)
		}
		c.Drift = rho
		if rho == 0 {
			c.Drift = -1 // fill's "none"
		}
		return nil
	}
}

// WithLogger sets the logger of the leases. Default: the logger of the
// actor system of the singleton or shard that holds the lease, else
// slog.Default().
func WithLogger(logger *slog.Logger) Option {
	return func(c *config) error {
		c.Logger = logger
		return option.NotNil(ErrInvalidOption, "WithLogger", "logger", logger)
	}
}
