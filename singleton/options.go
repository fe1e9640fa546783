package singleton

import (
	"errors"
	"time"

	"github.com/protoshard/protoshard/internal/option"
	"github.com/protoshard/protoshard/lease"
)

// Option configures StartManager and StartProxy, with Akka's names and
// defaults (akka.cluster.singleton and akka.cluster.singleton-proxy).
// Options of the manager only are ignored by StartProxy and the other way
// round, so one list can serve both: the singleton name and the role of
// a proxy must match its managers'.
type Option func(*options) error

// options is what a list of Options sets: the manager's settings and the
// proxy's.
type options struct {
	manager settings
	proxy   proxySettings
}

// ErrInvalidOption: an Option was given a value it does not accept.
var ErrInvalidOption = errors.New("singleton: invalid option")

func invalidOption(name, format string, args ...any) error {
	return option.Invalid(ErrInvalidOption, name, format, args...)
}

// applyOptions applies opts over the defaults.
func applyOptions(opts []Option) (options, error) {
	o := options{manager: defaultSettings(), proxy: defaultProxySettings()}
	return o, option.Apply(&o, opts, ErrInvalidOption)
}

// WithSingletonName sets the child name of the singleton under its
// manager (Akka's singleton-name; manager and proxy). Default "singleton".
func WithSingletonName(name string) Option {
	return func(o *options) error {
		if name == "" {
			return invalidOption("WithSingletonName", "empty name")
		}
		o.manager.SingletonName, o.proxy.SingletonName = name, name
		return nil
	}
}

// WithRole runs the singleton on the oldest member with role (Akka's
// role; manager and proxy). Default "": the oldest of every member.
func WithRole(role string) Option {
	return func(o *options) error {
		o.manager.Role, o.proxy.Role = role, role
		return nil
	}
}

// WithHandOverRetryInterval sets the interval of HandOverToMe and
// TakeOverFromMe retries (Akka's hand-over-retry-interval; manager).
// Default 1s.
func WithHandOverRetryInterval(d time.Duration) Option {
	return func(o *options) error {
		o.manager.HandOverRetryInterval = d
		return option.Positive(ErrInvalidOption, "WithHandOverRetryInterval", d)
	}
}

// WithMinNumberOfHandOverRetries sets the least number of hand-over
// retries before the manager gives up (Akka's
// min-number-of-hand-over-retries; manager). Default 15.
func WithMinNumberOfHandOverRetries(n int) Option {
	return func(o *options) error {
		o.manager.MinNumberOfHandOverRetries = n
		return option.AtLeastOne(ErrInvalidOption, "WithMinNumberOfHandOverRetries", n)
	}
}

// WithRemovalMargin sets how long a new oldest waits after the previous
// oldest was removed by failure detection (not a graceful leave) before it
// starts the singleton, so that the removed node has noticed its own
// removal and stopped its singleton (Akka's down-removal-margin; manager).
// Default: the cluster's margin (membership.Config's DownRemovalMargin,
// else the provider's failure detection timeout: Consul's check TTL;
// in-process membership: none).
// Zero: no margin. A longer margin means a slower failover after a crash;
// a margin shorter than the failure detection timeout lets a node that is
// only cut off run its singleton next to the new one (unless a lease,
// WithLease, stops it).
func WithRemovalMargin(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return invalidOption("WithRemovalMargin", "%v is negative", d)
		}
		o.manager.RemovalMargin = d
		if d == 0 {
			o.manager.RemovalMargin = -1 // settings' "no margin"
		}
		return nil
	}
}

// WithTerminationMessage sets the message sent to the singleton to stop it
// at hand-over (Akka's terminationMessage; manager). Default: the
// singleton is poisoned (Akka's PoisonPill).
func WithTerminationMessage(msg any) Option {
	return func(o *options) error {
		if msg == nil {
			return invalidOption("WithTerminationMessage", "nil message")
		}
		o.manager.TerminationMessage = msg
		return nil
	}
}

// WithManagerBufferSize bounds the proxied messages a manager holds while
// it has no running singleton to give them to (becoming oldest, acquiring
// the lease, handing over); when full the oldest is dropped (logged, dead
// letter). Manager only. Default 1000.
func WithManagerBufferSize(n int) Option {
	return func(o *options) error {
		o.manager.BufferSize = n
		return option.AtLeastOne(ErrInvalidOption, "WithManagerBufferSize", n)
	}
}

// WithLease is Akka's use-lease (manager): the manager that would start
// the singleton first acquires the lease named "singleton-" + the manager's name from leases
// (state AcquiringLease), runs the singleton only while it holds it,
// stops it at once when the lease is lost, and releases the lease once
// the singleton has terminated after a hand-over or a removal. The
// singleton reads the holding's fencing token with FencingToken. Every
// manager of the singleton must use the same provider (the same
// lease.MemoryLeases in one process, or lease/consul leases on the same
// Consul). Default: no lease.
func WithLease(leases lease.Provider) Option {
	return func(o *options) error {
		if leases == nil {
			return invalidOption("WithLease", "nil provider")
		}
		o.manager.UseLease = leases
		return nil
	}
}

// WithLeaseRetryInterval sets how long after a failed acquisition the
// manager tries again (Akka's lease-retry-interval; manager). Default 5s.
func WithLeaseRetryInterval(d time.Duration) Option {
	return func(o *options) error {
		o.manager.LeaseRetryInterval = d
		return option.Positive(ErrInvalidOption, "WithLeaseRetryInterval", d)
	}
}

// WithSingletonRestartBackoff sets when the oldest starts the singleton
// again after it terminated on its own (it stopped itself, or failed more
// often than its supervisor restarts it in place) and no hand-over, leave
// or removal asked it to stop (manager): after minBackoff, doubled for
// further stops soon after a start up to maxBackoff, each delay stretched
// by a random fraction up to randomFactor (Akka's BackoffSupervisor
// minBackoff, maxBackoff, randomFactor). A restarted singleton runs under
// the lease holding of the one before it (the same fencing token) while
// that holding lasts. Defaults 1s, 30s and 0.2. A start refused because
// this node's membership is stale (it may have been removed without
// knowing it yet) is tried again after this back-off too.
func WithSingletonRestartBackoff(minBackoff, maxBackoff time.Duration, randomFactor float64) Option {
	return func(o *options) error {
		switch {
		case minBackoff <= 0:
			return invalidOption("WithSingletonRestartBackoff", "minBackoff %v is not positive", minBackoff)
		case maxBackoff < minBackoff:
			return invalidOption("WithSingletonRestartBackoff", "maxBackoff %v is below minBackoff %v", maxBackoff, minBackoff)
		case randomFactor < 0:
			return invalidOption("WithSingletonRestartBackoff", "randomFactor %v is negative", randomFactor)
		}
		o.manager.SingletonRestartMinBackoff = minBackoff
		o.manager.SingletonRestartMaxBackoff = maxBackoff
		o.manager.SingletonRestartRandomFactor = randomFactor
		if randomFactor == 0 {
			o.manager.SingletonRestartRandomFactor = -1 // settings' "none"
		}
		return nil
	}
}

// WithoutSingletonRestart keeps Akka's ClusterSingletonManager behaviour
// (manager): a singleton that terminated on its own stays stopped until
// the next oldest takes over. Default: it is started again
// (WithSingletonRestartBackoff).
func WithoutSingletonRestart() Option {
	return func(o *options) error {
		o.manager.SingletonRestartMinBackoff = -1
		return nil
	}
}

// WithSingletonRestartResetAfter sets how long a singleton must have run
// for its next stop to wait the minimum back-off again (Akka's AutoReset;
// manager). Default: the minimum back-off, as Akka.
func WithSingletonRestartResetAfter(d time.Duration) Option {
	return func(o *options) error {
		o.manager.SingletonRestartResetAfter = d
		return option.Positive(ErrInvalidOption, "WithSingletonRestartResetAfter", d)
	}
}

// WithSingletonIdentificationInterval sets how often a proxy asks the
// oldest member's manager for the singleton until it is found (Akka's
// singleton-identification-interval; proxy). Default 1s. The proxy also
// asks whenever the oldest changes, and a manager that is about to run
// the singleton answers those that asked again once it runs, so the
// interval is only the fallback.
func WithSingletonIdentificationInterval(d time.Duration) Option {
	return func(o *options) error {
		o.proxy.SingletonIdentificationInterval = d
		return option.Positive(ErrInvalidOption, "WithSingletonIdentificationInterval", d)
	}
}

// WithBufferSize bounds the messages a proxy holds while the singleton is
// unknown; when full the oldest is dropped (logged, dead letter). Akka's
// buffer-size (proxy): 0 disables buffering, at most 10000 (Akka's bound).
// Default 1000.
func WithBufferSize(n int) Option {
	return func(o *options) error {
		if n < 0 || n > maxProxyBufferSize {
			return invalidOption("WithBufferSize", "%d is outside 0..%d", n, maxProxyBufferSize)
		}
		o.proxy.BufferSize = n
		if n == 0 {
			o.proxy.BufferSize = -1 // proxySettings' "no buffer"
		}
		return nil
	}
}
