// Package consul is a lease.Lease on a Consul session and a KV lock, kept
// apart from package lease so that users of in-process leases do not link
// the Consul client.
//
// A holding is a session (TTL = HeartbeatTimeout, behavior "delete", no
// health checks) that has acquired the key
//
//	protoshard/<cluster name>/lease/<lease name>
//
// under the keys of the cluster named in NewProvider (the cluster's name
// escaped as one path segment, as every key of a cluster in Consul), so
// that two clusters' leases of the same name never exclude each other; the
// key's value is the owner name. The fencing token is the key's
// ModifyIndex right after the acquisition: a Raft index, so every later
// holding of the lease has a larger one.
//
// Why the holder knows of a loss before anybody else can take the lease:
//
//   - The holder renews the session every HeartbeatInterval and declares the
//     lease lost (the lease-lost callback) once HeartbeatTimeout −
//     SafetyMargin have passed since the start of its last successful
//     renewal, measured with the monotonic clock. Consul never expires a
//     session sooner than its TTL after it processed a renewal (in fact it
//     waits twice the TTL), and it processed that renewal after the holder
//     sent it. So a holder cut off from Consul, or whose agent died, reports
//     the loss at least SafetyMargin before its session can expire.
//   - When a session ends (expired, destroyed from outside, or by the holder
//     after a loss) Consul keeps its locks from everybody else for LockDelay.
//     That is the holder's time to stop what the lease protects, on top of
//     the margin. A destroyed session is noticed at the next heartbeat, so
//     LockDelay must cover HeartbeatInterval + OperationTimeout.
//   - The session has no health checks: Consul's default one (the agent's
//     serfHealth) would end the session as soon as the agent looks dead,
//     sooner than the TTL the holder counts on.
//   - A graceful Release unlocks and deletes the key in one transaction,
//     then destroys the session, which then holds nothing: the next holder
//     need not wait out the lock delay.
//
// What it does not cover: a Consul that loses its state (a dev agent
// restarted, a cluster restored from an old snapshot) forgets the lock and
// starts its indexes again, so tokens handed out after that can be smaller
// than earlier ones. A holder whose process is paused for longer than the
// margin plus the lock delay runs on when it wakes up, until its next
// heartbeat fails; the fencing token is what protects a resource then.
package consul

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/internal/consulkey"
	"github.com/protoshard/protoshard/internal/leaselog"
	"github.com/protoshard/protoshard/internal/option"
	"github.com/protoshard/protoshard/lease"
	"github.com/protoshard/protoshard/lease/internal/loss"
	"github.com/protoshard/protoshard/lease/internal/renewloop"
)

// Defaults and Consul's limits.
const (
	// MinSessionTTL is Consul's minimum session TTL (session_ttl_min), so
	// the least HeartbeatTimeout.
	MinSessionTTL = 10 * time.Second
	// MaxLockDelay is Consul's maximum lock delay; Consul lowers longer ones
	// to it.
	MaxLockDelay = 60 * time.Second
)

// timeoutSettings are Akka's lease TimeoutSettings (akka.coordination.lease).
type timeoutSettings struct {
	// HeartbeatInterval is how often the holder renews the lease (Akka's
	// heartbeat-interval). Default HeartbeatTimeout/10.
	HeartbeatInterval time.Duration
	// HeartbeatTimeout is how long a lease stays held without a heartbeat,
	// so how long a crashed holder keeps it from others (Akka's
	// heartbeat-timeout). Default 120s.
	HeartbeatTimeout time.Duration
	// OperationTimeout bounds one acquire, release or heartbeat against the
	// lease store (Akka's lease-operation-timeout). Default 5s.
	OperationTimeout time.Duration
}

// withDefaults fills in the zero fields with Akka's defaults
// (heartbeat-timeout 120s, lease-operation-timeout 5s); the interval
// defaults to a tenth of the (given or default) heartbeat timeout.
func (s timeoutSettings) withDefaults() timeoutSettings {
	if s.HeartbeatTimeout <= 0 {
		s.HeartbeatTimeout = 120 * time.Second
	}
	if s.HeartbeatInterval <= 0 {
		s.HeartbeatInterval = s.HeartbeatTimeout / 10
	}
	if s.OperationTimeout <= 0 {
		s.OperationTimeout = 5 * time.Second
	}
	return s
}

// config configures the Consul leases; Options set it. Zero fields take
// their defaults (withDefaults).
type config struct {
	// Client is the Consul API client. Nil: api.NewClient(api.DefaultConfig()),
	// which honours CONSUL_HTTP_ADDR, CONSUL_HTTP_TOKEN and the like.
	Client *api.Client
	// ClusterName is the name of the cluster whose leases these are
	// (membership.Cluster.Name: with membership/consul the service name).
	// Required: the locks live under the cluster's keys,
	// protoshard/<cluster>/lease/, and a default shared by every cluster
	// would let two clusters' singletons of the same name exclude each
	// other.
	ClusterName string
	// TimeoutSettings: HeartbeatTimeout is the session TTL (at least
	// MinSessionTTL; Akka's default 120s), HeartbeatInterval how often the
	// session is renewed (default a tenth of the TTL), OperationTimeout bounds
	// each request to Consul (default 5s).
	timeoutSettings
	// SafetyMargin is how long before the TTL runs out, counted from the
	// start of the last successful renewal, the holder declares the lease
	// lost. Default a fifth of HeartbeatTimeout; it must leave room for a
	// heartbeat: HeartbeatInterval < HeartbeatTimeout − SafetyMargin.
	SafetyMargin time.Duration
	// LockDelay is how long Consul keeps the lock from others after the
	// holder's session ended other than by Release: the holder's time to
	// stop. Default HeartbeatTimeout, at most MaxLockDelay; it must cover
	// HeartbeatInterval + OperationTimeout. It also delays the next holder
	// after a crash: that one acquires between TTL + LockDelay and
	// 2×TTL + LockDelay after the crashed holder's last renewal.
	LockDelay time.Duration
	// Logger receives the leases' logs. Default: the logger of the actor
	// system of the singleton or shard that holds the lease (see
	// leaselog.NewLease), slog.Default() for a lease made otherwise.
	Logger *slog.Logger
}

// withDefaults fills in the defaults and checks the result.
func (c config) withDefaults() (config, error) {
	c.timeoutSettings = c.timeoutSettings.withDefaults()
	if c.SafetyMargin == 0 {
		c.SafetyMargin = c.HeartbeatTimeout / 5
	}
	if c.LockDelay == 0 {
		c.LockDelay = min(c.HeartbeatTimeout, MaxLockDelay)
	}
	switch {
	case consulkey.CheckClusterName(c.ClusterName) != nil:
		return c, fmt.Errorf("consul lease: cluster name: %w, under which the cluster's locks live", consulkey.CheckClusterName(c.ClusterName))
	case c.HeartbeatTimeout < MinSessionTTL:
		return c, fmt.Errorf("consul lease: heartbeat timeout %v is below Consul's minimum session TTL %v", c.HeartbeatTimeout, MinSessionTTL)
	case c.SafetyMargin <= 0 || c.SafetyMargin >= c.HeartbeatTimeout:
		return c, fmt.Errorf("consul lease: safety margin %v must be positive and below the heartbeat timeout %v", c.SafetyMargin, c.HeartbeatTimeout)
	case c.HeartbeatInterval >= c.HeartbeatTimeout-c.SafetyMargin:
		return c, fmt.Errorf("consul lease: heartbeat interval %v leaves no heartbeat before the loss is declared (heartbeat timeout %v − safety margin %v)",
			c.HeartbeatInterval, c.HeartbeatTimeout, c.SafetyMargin)
	case c.LockDelay < 0 || c.LockDelay > MaxLockDelay:
		return c, fmt.Errorf("consul lease: lock delay %v is outside Consul's 0..%v", c.LockDelay, MaxLockDelay)
	case c.LockDelay < c.HeartbeatInterval+c.OperationTimeout:
		return c, fmt.Errorf("consul lease: lock delay %v does not cover a heartbeat (interval %v + operation timeout %v), so a session destroyed from outside could be taken over before the holder notices",
			c.LockDelay, c.HeartbeatInterval, c.OperationTimeout)
	}
	return c, nil
}

// Provider creates Consul leases of one configuration: a lease.Provider for the
// cluster singleton's use-lease.
type Provider struct {
	cfg    config
	client *api.Client
}

// NewProvider returns a Provider of the leases of the cluster named
// clusterName (membership.Cluster.Name: with membership/consul the service
// name). The cluster name is required: the locks live under the cluster's
// keys, protoshard/<cluster>/lease/, and a default shared by every cluster
// would let two clusters' singletons of the same name exclude each other.
// It checks the options together and fails with an error that names what
// does not fit (ErrInvalidOption for a value no configuration accepts).
func NewProvider(clusterName string, opts ...Option) (*Provider, error) {
	cfg := config{ClusterName: clusterName}
	if err := option.Apply(&cfg, opts, ErrInvalidOption); err != nil {
		return nil, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	client := cfg.Client
	if client == nil {
		if client, err = api.NewClient(api.DefaultConfig()); err != nil {
			return nil, fmt.Errorf("consul lease: creating the Consul client: %w", err)
		}
	}
	return &Provider{cfg: cfg, client: client}, nil
}

// NewLease implements lease.Provider: a new holder of the lease leaseName.
func (p *Provider) NewLease(leaseName, ownerName string) (lease.Lease, error) {
	if leaseName == "" {
		return nil, errors.New("consul lease: lease name is empty")
	}
	return &consulLease{
		name:   leaseName,
		owner:  ownerName,
		cfg:    p.cfg,
		client: p.client,
		key:    consulkey.LeasePrefix(p.cfg.ClusterName) + strings.TrimLeft(leaseName, "/"),
		log:    leaselog.New(p.cfg.Logger, "consul-lease", leaseName, ownerName),
	}, nil
}

// consulLease is one holder of a Consul lease. It is safe for concurrent
// use.
type consulLease struct {
	name   string
	owner  string
	cfg    config
	client *api.Client
	key    string // protoshard/<cluster>/lease/<lease name>
	log    leaselog.Log

	opMu sync.Mutex // serialises Acquire and Release

	mu  sync.Mutex
	cur *holding // the current or last holding; nil after Release
}

// holding is one acquisition: one session.
type holding struct {
	session string
	token   uint64

	// Guarded by consulLease.mu.
	lastRenew    time.Time // start of the last successful renewal (or of the session's creation)
	loss.Holding           // its cancel stops the heartbeats
}

var _ lease.Lease = (*consulLease)(nil)

// UseLogger makes the lease log to logger unless WithLogger set one
// (leaselog.NewLease).
func (l *consulLease) UseLogger(logger *slog.Logger) { l.log.Use(logger) }

// lossAfter is how long after the start of the last successful renewal the
// holder declares the lease lost.
func (l *consulLease) lossAfter() time.Duration { return l.cfg.HeartbeatTimeout - l.cfg.SafetyMargin }

// Acquire implements lease.Lease: it creates a session and tries to lock the
// key with it. The token is the key's ModifyIndex after the lock.
func (l *consulLease) Acquire(ctx context.Context, leaseLost lease.LostFunc) (uint64, bool, error) {
	l.opMu.Lock()
	defer l.opMu.Unlock()
	l.mu.Lock()
	h := l.cur
	if h != nil && !h.Ended() {
		if time.Since(h.lastRenew) < l.lossAfter() {
			h.Notify(leaseLost)
			token := h.token
			l.mu.Unlock()
			return token, true, nil
		}
		// The heartbeat goroutine is late to declare it.
		l.mu.Unlock()
		l.lose(h, fmt.Errorf("%w: no successful heartbeat for %v", lease.ErrLost, l.lossAfter()))
	} else {
		l.mu.Unlock()
	}
	if err := ctx.Err(); err != nil {
		return 0, false, fmt.Errorf("consul lease %q: acquire: %w", l.name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.OperationTimeout)
	defer cancel()

	start := time.Now()
	session, _, err := l.client.Session().CreateNoChecks(&api.SessionEntry{
		Name:      "protoshard lease " + l.name + " of " + l.owner,
		TTL:       l.cfg.HeartbeatTimeout.String(),
		LockDelay: l.cfg.LockDelay,
		Behavior:  api.SessionBehaviorDelete,
	}, (&api.WriteOptions{}).WithContext(ctx))
	if err != nil {
		return 0, false, fmt.Errorf("consul lease %q: creating a session: %w", l.name, err)
	}
	token, acquired, err := l.lock(ctx, session)
	if err == nil && acquired && time.Since(start) >= l.lossAfter() {
		err = fmt.Errorf("consul lease %q: acquiring took %v, past the %v a holding may go without a heartbeat",
			l.name, time.Since(start), l.lossAfter())
	}
	if err != nil || !acquired {
		// A session that locked nothing goes without a lock delay; one whose
		// lock is in doubt (the answer was lost) frees it with one.
		l.destroy(session)
		return 0, false, err
	}
	hctx, stop := context.WithCancel(context.Background())
	h = &holding{session: session, token: token, lastRenew: start, Holding: loss.New(stop, leaseLost)}
	l.mu.Lock()
	l.cur = h
	l.mu.Unlock()
	l.log.Debug("consul lease acquired", slog.Uint64("token", token), slog.String("session", session))
	go l.heartbeat(hctx, h)
	return token, true, nil
}

// lock tries to lock the key with session and reads the resulting
// ModifyIndex with a consistent read.
func (l *consulLease) lock(ctx context.Context, session string) (uint64, bool, error) {
	kv := l.client.KV()
	if err := l.checkKind(ctx); err != nil {
		return 0, false, err
	}
	ok, _, err := kv.Acquire(&api.KVPair{Key: l.key, Value: []byte(l.owner), Session: session},
		(&api.WriteOptions{}).WithContext(ctx))
	if err != nil {
		return 0, false, fmt.Errorf("consul lease %q: locking %s: %w", l.name, l.key, err)
	}
	if !ok {
		return 0, false, nil // held by another session, or in its lock delay
	}
	pair, _, err := kv.Get(l.key, (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil {
		return 0, false, fmt.Errorf("consul lease %q: reading %s after locking it: %w", l.name, l.key, err)
	}
	if pair == nil || pair.Session != session {
		return 0, false, nil
	}
	return pair.ModifyIndex, true, nil
}

// ErrForeignKey: the lease's key exists without a session. This lease never
// leaves it so (a release deletes it, and so does the end of the session),
// so another kind of lease of the same name uses it: a node on
// lease/consulcas, whose record a lock would overwrite. Every node of a
// cluster must use the same kind of lease; delete the key once none uses
// the other kind.
var ErrForeignKey = errors.New("the lease key exists without a session (another kind of lease uses it)")

// checkKind refuses to lock over a key this kind of lease does not leave:
// it detects a cluster that mixes kinds of leases (best effort: a record
// written between this read and the lock is not seen).
func (l *consulLease) checkKind(ctx context.Context) error {
	pair, _, err := l.client.KV().Get(l.key, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("consul lease %q: reading %s: %w", l.name, l.key, err)
	}
	if pair != nil && pair.Session == "" {
		return fmt.Errorf("consul lease %q: %s: %w", l.name, l.key, ErrForeignKey)
	}
	return nil
}

// errGone: the session or the lock is no longer there; the holding is over.
var errGone = errors.New("holding gone")

// heartbeat renews the session every HeartbeatInterval and declares the
// lease lost when the session or the lock is gone, or when no renewal has
// succeeded for lossAfter.
func (l *consulLease) heartbeat(ctx context.Context, h *holding) {
	err := renewloop.Run(ctx, renewloop.Loop{
		Interval:         l.cfg.HeartbeatInterval,
		OperationTimeout: l.cfg.OperationTimeout,
		UntilLoss:        func() time.Duration { return l.untilLoss(h) },
		Renew: func(ctx context.Context, start time.Time) error {
			if err := l.renew(ctx, h.session); err != nil {
				return err
			}
			l.mu.Lock()
			h.lastRenew = start
			l.mu.Unlock()
			return nil
		},
		Final: func(err error) bool { return errors.Is(err, errGone) },
		Retrying: func(err error) {
			l.log.Warn("consul lease: heartbeat failed; retrying", slog.Any("error", err),
				slog.Duration("lostIn", l.untilLoss(h)))
		},
	})
	switch {
	case errors.Is(err, renewloop.ErrExpired):
		l.lose(h, fmt.Errorf("%w: no successful heartbeat to Consul for %v (heartbeat timeout %v − safety margin %v)",
			lease.ErrLost, l.lossAfter(), l.cfg.HeartbeatTimeout, l.cfg.SafetyMargin))
	case err != nil:
		l.lose(h, fmt.Errorf("%w: %w", lease.ErrLost, err))
	}
}

func (l *consulLease) untilLoss(h *holding) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(0, l.lossAfter()-time.Since(h.lastRenew))
}

// renew renews the session, then checks that it still holds the lock (the
// key may have been deleted or unlocked from outside). Only a failed renewal
// is an error that keeps the loss clock running; a failed check is not.
func (l *consulLease) renew(ctx context.Context, session string) error {
	entry, _, err := l.client.Session().Renew(session, (&api.WriteOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("renewing session %s: %w", session, err)
	}
	if entry == nil {
		return fmt.Errorf("%w: session %s no longer exists", errGone, session)
	}
	pair, _, err := l.client.KV().Get(l.key, (&api.QueryOptions{}).WithContext(ctx))
	switch {
	case err != nil:
		l.log.Debug("consul lease: could not check the lock after a renewal", slog.Any("error", err))
	case pair == nil:
		return fmt.Errorf("%w: key %s was deleted", errGone, l.key)
	case pair.Session != session:
		return fmt.Errorf("%w: key %s is no longer locked by session %s", errGone, l.key, session)
	}
	return nil
}

// lose declares h lost, once: the callback runs, then the session is
// destroyed in the background, which frees the lock (after the lock delay)
// without waiting for the session's TTL.
func (l *consulLease) lose(h *holding, reason error) {
	l.mu.Lock()
	if l.cur != h || h.Ended() {
		l.mu.Unlock()
		return
	}
	cb := h.Lose()
	l.mu.Unlock()
	l.log.Warn("consul lease lost", slog.Uint64("token", h.token), slog.Any("reason", reason))
	if cb != nil {
		cb(reason)
	}
	go l.destroy(h.session)
}

// destroy destroys a session, best effort, bounded by OperationTimeout.
func (l *consulLease) destroy(session string) {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.OperationTimeout)
	defer cancel()
	if _, err := l.client.Session().Destroy(session, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		l.log.Debug("consul lease: destroying session failed; it ends at its TTL", slog.String("session", session),
			slog.Any("error", err))
	}
}

// Release implements lease.Lease: it unlocks and deletes the key in one
// transaction, then destroys the session.
func (l *consulLease) Release(ctx context.Context) (bool, error) {
	l.opMu.Lock()
	defer l.opMu.Unlock()
	l.mu.Lock()
	h := l.cur
	l.cur = nil
	lost := h == nil || h.End()
	l.mu.Unlock()
	if lost {
		return false, nil // its session is destroyed already (or being)
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.OperationTimeout)
	defer cancel()
	ok, resp, _, err := l.client.Txn().Txn(api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVUnlock, Key: l.key, Session: h.session}},
		{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: l.key}},
	}, (&api.QueryOptions{}).WithContext(ctx))
	// Destroyed whatever happened: after the unlock it holds nothing (no
	// lock delay for the next holder); if the unlock failed, destroying it
	// is the way to let go.
	l.destroy(h.session)
	if err != nil {
		return false, fmt.Errorf("consul lease %q: releasing %s: %w", l.name, l.key, err)
	}
	if !ok {
		l.log.Warn("consul lease: release found the lock no longer held", slog.Any("errors", txnErrors(resp)))
		return false, nil
	}
	l.log.Debug("consul lease released", slog.Uint64("token", h.token))
	return true, nil
}

// CheckLease implements lease.Lease: held, not lost, and the last successful
// renewal recent enough.
func (l *consulLease) CheckLease() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.cur
	return h != nil && !h.Ended() && time.Since(h.lastRenew) < l.lossAfter()
}

func txnErrors(resp *api.TxnResponse) []string {
	if resp == nil {
		return nil
	}
	out := make([]string, 0, len(resp.Errors))
	for _, e := range resp.Errors {
		out = append(out, e.What)
	}
	return out
}
