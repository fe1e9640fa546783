package membership

import (
	"context"
	"log/slog"
	"time"
)

// Provider is the backend of a Cluster: where members register and how the
// current members are read. Implementations: membership/local (in-process)
// and membership/consul.
type Provider interface {
	// Name is the name of the cluster the provider's members form
	// (Consul: the service name they register as; in-process: the
	// registry's name). It scopes what the cluster keeps outside its
	// nodes, such as its keys in Consul (see Cluster.Name), so clusters
	// that share a Consul must have different names. Never empty.
	Name() string
	// Register adds self (ID, Address, Roles) and returns it with its Age.
	Register(ctx context.Context, self Member) (Member, error)
	// SetLeaving marks the registered member as Leaving.
	SetLeaving(ctx context.Context) error
	// Deregister removes the registered member.
	Deregister(ctx context.Context) error
	// Watch calls onChange with the full set of live members (self included,
	// while registered) each time it may have changed, from one goroutine,
	// until ctx is done. It returns when ctx is done.
	Watch(ctx context.Context, onChange func([]Member))
	// Close stops background work (such as TTL refreshes) without
	// deregistering: to the others it looks like a crash.
	Close()
}

// LoggingProvider is implemented by a Provider that logs. NewCluster hands
// it the actor system's logger, so that its lines go where the rest of the
// node's go, under the same level and attributes. A logger the provider
// was configured with explicitly wins.
type LoggingProvider interface {
	Provider
	// UseLogger makes logger the provider's logger, unless it was
	// configured with one. Safe to call while the provider runs.
	UseLogger(logger *slog.Logger)
}

// InProcessProvider is implemented by a Provider whose members all run in
// this process (membership/local). What it shares is seen by every node
// of the same member list. Sharding uses it for a coordinator state store
// that all those nodes read, so that the zero-set-up default is safe.
type InProcessProvider interface {
	Provider
	// SharedValue returns the value stored under key for the whole member
	// list, storing create's result first if there is none.
	SharedValue(key string, create func() any) any
}

// FailureDetector is implemented by a Provider that removes a member some
// time after it stops giving signs of life (Consul: the TTL check). A member
// cut off from the others stops trusting its own membership about as long
// after its last sign of life; that interval is what a DownRemovalMargin
// must cover (see Cluster.DownRemovalMargin).
type FailureDetector interface {
	// FailureDetectionTimeout is how long a member may stay silent before
	// the others remove it, and before it fences itself.
	FailureDetectionTimeout() time.Duration
}

// Confirmer is a FailureDetector whose member confirms its own
// registration periodically (Consul: the TTL refresh). A member that has
// not confirmed it for the FailureDetectionTimeout may have been removed
// by the others already, although it cannot have heard of it: paused, its
// timers and mailboxes run on when it resumes, before its own check does.
type Confirmer interface {
	FailureDetector
	// LastConfirmed returns when the member last confirmed its
	// registration (a time with a monotonic reading); false while there is
	// none.
	LastConfirmed() (time.Time, bool)
}

// RegistrationLinger is implemented by a Provider under which a removed
// member's registration may still be reported live for a while after the
// others saw it removed (Consul: a TTL refresh sent before the member
// fenced itself and handled late passes its check again, until Consul
// deletes the registration). A Cluster remembers removed members, and
// its Quarantine their actor systems and addresses, for many times that
// long (see Cluster.Removal).
type RegistrationLinger interface {
	// RegistrationLinger bounds how long after its removal a member's
	// registration may still be reported live.
	RegistrationLinger() time.Duration
}
