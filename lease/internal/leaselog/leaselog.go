// Package leaselog picks the logger of a lease, the one rule of the lease
// implementations (lease/consul, lease/caslease).
package leaselog

import "log/slog"

// Choose is the logger a lease logs to: the provider's configured one,
// else the one its user gave (the actor system's, through
// lease.LoggingProvider), else slog.Default().
func Choose(configured, given *slog.Logger) *slog.Logger {
	switch {
	case configured != nil:
		return configured
	case given != nil:
		return given
	default:
		return slog.Default()
	}
}
