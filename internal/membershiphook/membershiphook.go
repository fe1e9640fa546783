// Package membershiphook reaches what a membership.Cluster offers the
// library alone (sharding, singletons, management, tests): its removal
// records, its down-removal margin, whether it is stale, its leave phases,
// the values shared by in-process members. Package membership sets Of in
// its init; this package cannot name membership.Cluster, which imports it.
//
// It also names the optional interfaces a membership.Provider may
// implement, which the Cluster looks for.
package membershiphook

import (
	"context"
	"log/slog"
	"time"
)

// Cluster is the library's view of a *membership.Cluster.
type Cluster interface {
	// CheckQuarantine reports whether the node keeps removed members out
	// at the remote layer: nil when membership.Config.Quarantine is set and
	// its RemoteOption is in the remote config it went into, else an error
	// wrapping membership.ErrNoQuarantine that says what is missing.
	CheckQuarantine() error
	// SharedValue returns the value stored under key for every node of
	// this process that shares the member list, creating it with create
	// first if there is none. ok is false when the provider's members may
	// run in other processes (it is not an InProcessProvider).
	SharedValue(key string, create func() any) (value any, ok bool)
	// SelfRemoval returns the last removal of the node's own member, if it
	// was removed (and possibly joined again since).
	SelfRemoval() (Removal, bool)
	// Removal returns what the node saw of the removal of member id; ok is
	// false for a member it never saw removed, or forgot.
	Removal(id string) (Removal, bool)
	// DownRemovalMargin is how long singletons and shards of a member
	// removed without a graceful leave wait before they start elsewhere
	// (membership.Config.DownRemovalMargin).
	DownRemovalMargin() time.Duration
	// Stale reports whether the node must not act as a member right now,
	// although it joined once: removed and not joined again, or not
	// confirmed within the provider's failure detection timeout.
	Stale() bool
	// RegisterLeaveHookIn adds a hook that a graceful Leave runs in phase.
	RegisterLeaveHookIn(phase LeavePhase, name string, fn func(ctx context.Context) error)
	// HasConfiguredRole reports whether the node joins (or joined) with
	// role: unlike Self().HasRole it answers before the join too.
	HasConfiguredRole(role string) bool
}

// Of returns the library's view of c, a *membership.Cluster; set by
// package membership.
var Of func(c any) Cluster

// Removal is what a node saw of a member's removal.
type Removal struct {
	// At is when the node saw the member removed.
	At time.Time
	// Graceful: the member left (membership.MemberRemoved.Graceful).
	Graceful bool
}

// LeavePhase orders the leave hooks, as Akka's coordinated shutdown orders
// its phases: every hook of a phase runs (concurrently) before any of the
// next phase starts.
type LeavePhase int

const (
	// LeavePhaseShardingShutdownRegion is Akka's
	// cluster-sharding-shutdown-region: regions hand their shards off
	// before the member is marked Leaving, while the coordinator still
	// runs where it ran, so it can finish every hand-off it began.
	LeavePhaseShardingShutdownRegion LeavePhase = iota
	// LeavePhaseExiting is Akka's cluster-exiting, once the member is
	// marked Leaving: singletons (the coordinators among them) hand over.
	// membership.Cluster.RegisterLeaveHook's phase.
	LeavePhaseExiting
)

// LoggingProvider is implemented by a provider that logs. NewCluster hands
// it the actor system's logger, so that its lines go where the rest of the
// node's go. A logger the provider was configured with explicitly wins.
type LoggingProvider interface {
	// UseLogger makes logger the provider's logger, unless it was
	// configured with one. Safe to call while the provider runs.
	UseLogger(logger *slog.Logger)
}

// InProcessProvider is implemented by a provider whose members all run in
// this process (membership/local). What it shares is seen by every node
// of the same member list: sharding keeps its default coordinator state
// store there, so that the zero-set-up default is safe.
type InProcessProvider interface {
	// SharedValue returns the value stored under key for the whole member
	// list, storing create's result first if there is none.
	SharedValue(key string, create func() any) any
}

// FailureDetector is implemented by a provider that removes a member some
// time after it stops giving signs of life (Consul: the TTL check). A
// member cut off from the others stops trusting its own membership about
// as long after its last sign of life; that interval is what a
// down-removal margin must cover.
type FailureDetector interface {
	// FailureDetectionTimeout is how long a member may stay silent before
	// the others remove it, and before it fences itself.
	FailureDetectionTimeout() time.Duration
}

// Confirmer is a FailureDetector whose member confirms its own
// registration periodically (Consul: the TTL refresh). A member that has
// not confirmed it for the FailureDetectionTimeout may have been removed
// by the others already, although it cannot have heard of it.
type Confirmer interface {
	FailureDetector
	// LastConfirmed returns when the member last confirmed its
	// registration (a time with a monotonic reading); false while there is
	// none.
	LastConfirmed() (time.Time, bool)
}

// RegistrationLinger is implemented by a provider under which a removed
// member's registration may still be reported live for a while after the
// others saw it removed (Consul: a TTL refresh handled late passes its
// check again, until Consul deletes the registration). A Cluster
// remembers removed members, and its Quarantine their actor systems and
// addresses, for many times that long.
type RegistrationLinger interface {
	// RegistrationLinger bounds how long after its removal a member's
	// registration may still be reported live.
	RegistrationLinger() time.Duration
}
