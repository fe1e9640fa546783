package membership

import "context"

// Provider is the backend of a Cluster: where members register and how the
// current members are read. Implementations: membership/local (in-process)
// and membership/consul.
//
// A Cluster also uses these methods where its provider has them:
//
//   - UseLogger(*slog.Logger): NewCluster hands a provider that logs the
//     actor system's logger (a logger the provider was configured with
//     explicitly wins).
//   - FailureDetectionTimeout() time.Duration: the provider removes a
//     member that stays silent this long (Consul: the TTL). It is the
//     default Config.DownRemovalMargin.
//   - LastConfirmed() (time.Time, bool), with FailureDetectionTimeout: when
//     the member last confirmed its own registration (a time with a
//     monotonic reading; Consul: the TTL refresh). A member that has not
//     confirmed it for the timeout may have been removed by the others
//     without having heard of it: it stops acting as a member meanwhile.
//   - RegistrationLinger() time.Duration: how long after its removal a
//     member's registration may still be reported live (Consul: a refresh
//     handled late). The Cluster remembers removed members, and its
//     Quarantine their actor systems and addresses, for many times that
//     long.
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
