package membership

import "context"

// Provider is the backend of a Cluster: where members register and how the
// current members are read. Implementations: membership/local (in-process)
// and membership/consul.
type Provider interface {
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
