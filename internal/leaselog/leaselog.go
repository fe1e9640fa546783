// Package leaselog gives a lease of this module (lease/consul,
// lease/caslease) its logger: the one its provider was configured with,
// else the logger of the actor system of the singleton or shard that holds
// it, else slog.Default(). The cluster singleton and the shards create
// their leases with NewLease, so that a lease logs where the rest of its
// node does, and a provider shared by the nodes of one process logs each
// lease under its own node.
package leaselog

import (
	"log/slog"

	"github.com/protoshard/protoshard/lease"
)

// Log is a lease's logger, with the lease's name and owner, and whether
// its provider configured it.
type Log struct {
	*slog.Logger
	configured bool
	attrs      []any
}

// New returns the logger of the lease leaseName held by ownerName:
// configured, or slog.Default() until Use hands it another.
func New(configured *slog.Logger, component, leaseName, ownerName string) Log {
	l := Log{configured: configured != nil, attrs: []any{
		slog.String("component", component), slog.String("lease", leaseName), slog.String("owner", ownerName),
	}}
	if configured == nil {
		configured = slog.Default()
	}
	l.Logger = configured.With(l.attrs...)
	return l
}

// Use makes the lease log to logger unless its provider configured one.
func (l *Log) Use(logger *slog.Logger) {
	if !l.configured && logger != nil {
		l.Logger = logger.With(l.attrs...)
	}
}

// user is a lease of this module: it logs to the logger its holder gives.
type user interface {
	// UseLogger is Log.Use on the lease's log; it is called before the
	// lease is used.
	UseLogger(logger *slog.Logger)
}

// NewLease returns p's new holder of the lease leaseName for ownerName;
// if it is a lease of this module, it logs to logger (unless p was
// configured with a logger of its own).
func NewLease(p lease.Provider, leaseName, ownerName string, logger *slog.Logger) (lease.Lease, error) {
	l, err := p.NewLease(leaseName, ownerName)
	if err != nil {
		return nil, err
	}
	if u, ok := l.(user); ok {
		u.UseLogger(logger)
	}
	return l, nil
}
