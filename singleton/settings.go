// Package singleton is Akka's Cluster Singleton for proto.actor: a
// ClusterSingletonManager on every member (of a role) runs the singleton
// actor on the oldest member only, and hands it over when that member leaves
// or crashes; a ClusterSingletonProxy on any node routes messages to wherever
// the singleton runs, buffering while it is unknown. With a lease
// (WithLease, Akka's use-lease) the singleton also runs only while
// its member holds the lease, and reads the lease's fencing token with
// FencingToken.
package singleton

import (
	"time"

	"github.com/protoshard/protoshard/internal/backoff"
	"github.com/protoshard/protoshard/lease"
)

// settings of a ClusterSingletonManager, with Akka's names and defaults
// (akka.cluster.singleton); Options set them. A zero field takes its
// default (withDefaults), so tests can give only the fields they need.
type settings struct {
	// SingletonName is the child name of the singleton under its manager.
	// Default "singleton".
	SingletonName string
	// Role: the singleton runs on the oldest member with this role; "" means
	// any member.
	Role string
	// HandOverRetryInterval is the interval of HandOverToMe / TakeOverFromMe
	// retries. Default 1s.
	HandOverRetryInterval time.Duration
	// MinNumberOfHandOverRetries is the least number of hand-over retries
	// before the manager gives up. Default 15.
	MinNumberOfHandOverRetries int
	// RemovalMargin is how long a new oldest waits after the previous oldest
	// was removed by failure detection (not a graceful leave) before it
	// starts the singleton, so that the removed node has noticed its own
	// removal and stopped its singleton (Akka's down-removal-margin). Zero
	// (the default) takes the cluster's margin: membership.Config's
	// DownRemovalMargin, else the provider's failure detection timeout
	// (Consul: the check TTL; in-process membership: none). Negative: no
	// margin. A longer margin means a slower failover after a crash; a
	// margin shorter than the failure detection timeout lets a node that is
	// only cut off run its singleton next to the new one (unless a lease,
	// UseLease, stops it).
	RemovalMargin time.Duration
	// TerminationMessage is sent to the singleton to stop it at hand-over.
	// nil (the default) poisons it (Akka's PoisonPill).
	TerminationMessage any
	// BufferSize bounds the proxied messages a manager holds while it has no
	// running singleton to give them to (becoming oldest, acquiring the
	// lease, handing over). When full the oldest is dropped (logged, dead
	// letter). Default 1000.
	BufferSize int
	// UseLease is Akka's use-lease: with a lease provider, the manager that
	// would start the singleton first acquires the lease named "singleton-" + its name
	// (state AcquiringLease), runs the singleton only while it holds it,
	// stops it at once when the lease is lost, and releases the lease once
	// the singleton has terminated after a hand-over or a removal. The
	// singleton reads the holding's fencing token with FencingToken. Every
	// manager of the singleton must use the same provider (the same
	// lease.MemoryLeases in one process, or lease/consul leases on the same
	// Consul). nil (the default): no lease.
	UseLease lease.Provider
	// LeaseRetryInterval is Akka's lease-retry-interval: how long after a
	// failed acquisition the manager tries again. Default 5s.
	LeaseRetryInterval time.Duration
	// SingletonRestartMinBackoff is the first delay after which the oldest
	// starts the singleton again when it terminated on its own (it stopped
	// itself, or failed more often than its supervisor restarts it in
	// place) and no hand-over, leave or removal asked it to stop; further
	// stops soon after a start double the delay up to
	// SingletonRestartMaxBackoff, as Akka's BackoffSupervisor. A restarted
	// singleton runs under the lease holding of the one before it (the same
	// fencing token) while that holding lasts. Default 1s. Negative: never
	// start it again (Akka's ClusterSingletonManager: the singleton stays
	// stopped until the next oldest takes over). A start refused because
	// this node's membership is stale (it may have been removed without
	// knowing it yet) is tried again after this back-off too (after the
	// default when negative), until the node's removal cancels it.
	SingletonRestartMinBackoff time.Duration
	// SingletonRestartMaxBackoff caps the restart back-off (before jitter).
	// Default 30s; below the minimum: the minimum.
	SingletonRestartMaxBackoff time.Duration
	// SingletonRestartRandomFactor stretches each restart delay by a random
	// fraction up to it (Akka's random-factor). Default 0.2; negative: none.
	SingletonRestartRandomFactor float64
	// SingletonRestartResetAfter is how long a singleton must have run for
	// its next stop to wait the minimum again (Akka's AutoReset). Zero (the
	// default): SingletonRestartMinBackoff, as Akka.
	SingletonRestartResetAfter time.Duration
}

// leaseName is the name of the lease a singleton's managers share:
// "singleton-" and the manager's name (Akka: "<system>-singleton-<path>").
func leaseName(managerName string) string { return "singleton-" + managerName }

// defaultSettings returns Akka's defaults.
func defaultSettings() settings {
	return settings{
		SingletonName:              "singleton",
		HandOverRetryInterval:      time.Second,
		MinNumberOfHandOverRetries: 15,
		BufferSize:                 1000,
		LeaseRetryInterval:         5 * time.Second,

		SingletonRestartMinBackoff:   time.Second,
		SingletonRestartMaxBackoff:   30 * time.Second,
		SingletonRestartRandomFactor: 0.2,
	}
}

func (s settings) withDefaults() settings {
	d := defaultSettings()
	if s.SingletonName == "" {
		s.SingletonName = d.SingletonName
	}
	if s.HandOverRetryInterval <= 0 {
		s.HandOverRetryInterval = d.HandOverRetryInterval
	}
	if s.MinNumberOfHandOverRetries <= 0 {
		s.MinNumberOfHandOverRetries = d.MinNumberOfHandOverRetries
	}
	if s.BufferSize <= 0 {
		s.BufferSize = d.BufferSize
	}
	if s.LeaseRetryInterval <= 0 {
		s.LeaseRetryInterval = d.LeaseRetryInterval
	}
	if s.SingletonRestartMinBackoff == 0 {
		s.SingletonRestartMinBackoff = d.SingletonRestartMinBackoff
	}
	if s.SingletonRestartMaxBackoff <= 0 {
		s.SingletonRestartMaxBackoff = d.SingletonRestartMaxBackoff
	}
	switch {
	case s.SingletonRestartRandomFactor == 0:
		s.SingletonRestartRandomFactor = d.SingletonRestartRandomFactor
	case s.SingletonRestartRandomFactor < 0:
		s.SingletonRestartRandomFactor = 0
	}
	return s
}

// singletonRestartBackoff is the restart back-off of the settings (after
// withDefaults); ok is false when the singleton is never started again
// after it stopped on its own. Then the back-off starts from the default
// minimum: a start refused while this node's membership is stale waits it
// all the same.
func (s settings) singletonRestartBackoff() (b backoff.Series, ok bool) {
	minBackoff := s.SingletonRestartMinBackoff
	ok = minBackoff >= 0
	if !ok {
		minBackoff = defaultSettings().SingletonRestartMinBackoff
	}
	return backoff.Series{
		Exponential: backoff.Exponential{Min: minBackoff, Max: s.SingletonRestartMaxBackoff,
			RandomFactor: s.SingletonRestartRandomFactor},
		ResetAfter: s.SingletonRestartResetAfter,
	}, ok
}

// proxySettings of a ClusterSingletonProxy, with Akka's names and
// defaults; Options set them.
type proxySettings struct {
	// SingletonName must match the manager's. Default "singleton".
	SingletonName string
	// Role must match the manager's.
	Role string
	// SingletonIdentificationInterval is how often the proxy asks the oldest
	// member's manager for the singleton until it is found. Default 1s. The
	// proxy also asks whenever the oldest changes, and a manager that is
	// about to run the singleton (taking over, or not started yet) answers
	// those that asked again once it runs, so the interval is only the
	// fallback.
	SingletonIdentificationInterval time.Duration
	// BufferSize bounds the messages held while the singleton is unknown;
	// when full the oldest is dropped (logged, dead letter). Default 1000,
	// at most 10000; a negative value disables buffering (Akka's 0).
	BufferSize int
}

// maxProxyBufferSize is Akka's upper bound of the proxy buffer.
const maxProxyBufferSize = 10000

// defaultProxySettings returns Akka's defaults.
func defaultProxySettings() proxySettings {
	return proxySettings{
		SingletonName:                   "singleton",
		SingletonIdentificationInterval: time.Second,
		BufferSize:                      1000,
	}
}

func (s proxySettings) withDefaults() proxySettings {
	d := defaultProxySettings()
	if s.SingletonName == "" {
		s.SingletonName = d.SingletonName
	}
	if s.SingletonIdentificationInterval <= 0 {
		s.SingletonIdentificationInterval = d.SingletonIdentificationInterval
	}
	switch {
	case s.BufferSize == 0:
		s.BufferSize = d.BufferSize
	case s.BufferSize < 0:
		s.BufferSize = 0
	case s.BufferSize > maxProxyBufferSize:
		s.BufferSize = maxProxyBufferSize
	}
	return s
}
