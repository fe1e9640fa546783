// Package consul is the membership.Provider over a real Consul.
//
// Each member is a Consul service instance (service ID = member ID) with a
// TTL health check that a background goroutine keeps passing. A member's age
// is the CreateIndex of its service registration: one total order that every
// node reads the same from the catalog. Members are read with blocking
// queries on the health endpoint (passing instances only), so a member whose
// process stops refreshing its check disappears from everybody's view once
// its TTL runs out.
//
// Self-fencing. Removal is final in this library (see membership.Cluster):
// when a member can no longer be sure the others still see it, the provider
// reports the last known members without itself, which makes the Cluster
// treat it as removed, and stops refreshing its check. That happens when
//   - no TTL refresh has succeeded for longer than the TTL, or one came back
//     only after it (the others may have seen the check go critical),
//   - Consul answers that the check is unknown (the registration was lost,
//     for instance because the agent restarted without its data),
//   - a watch result that is newer than the registration does not contain
//     the member, or contains it with another age (re-created).
//
// A fenced member re-joins (if the Cluster is configured to) with a new ID by
// calling Register again on the same provider.
//
// Graceful leave. SetLeaving sets the service's meta status to "leaving"
// (Consul keeps the CreateIndex of a re-registered service, so the age does
// not change) and writes a marker key,
//
//	protoshard/<service name>/membership/leaving/<member id>
//
// (the service name is the cluster's name, escaped as one path segment;
// all the cluster's keys live under protoshard/<service name>/), held by a
// TTL session that lives as long as the member refreshes it and a little
// longer (ACLs must let the members write under that prefix). A watcher that sees a member
// vanish without ever having read its "leaving" status (SetLeaving and
// Deregister were closer together than its blocking query could notice)
// finds the marker and reports the member Leaving before it reports it gone,
// so the removal is still seen as graceful.
package consul

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/internal/consulkey"
	"github.com/protoshard/protoshard/internal/consulmember"
	"github.com/protoshard/protoshard/internal/expiring"
	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/internal/memberwatch"
	"github.com/protoshard/protoshard/internal/option"
	"github.com/protoshard/protoshard/membership"
)

// DefaultServiceName is the Consul service the members register as when
// WithServiceName is not given.
const DefaultServiceName = "protoshard"

const (
	defaultTTL = 5 * time.Second
	// minDeregisterAfter is Consul's minimum for
	// DeregisterCriticalServiceAfter: the agent raises lower values to it.
	minDeregisterAfter  = time.Minute
	defaultRetryBackoff = 500 * time.Millisecond
	maxRetryBackoff     = 10 * time.Second
	// watchWaitTime bounds one blocking query. A fence interrupts it through
	// its context, so it only matters for noticing a Consul restart whose
	// new index is still below the one we wait on (see Watch).
	watchWaitTime = 30 * time.Second
	// minSessionTTL is Consul's minimum session TTL.
	minSessionTTL = 10 * time.Second
	// cleanupTimeout bounds the best-effort deregistration after a failed
	// Register.
	cleanupTimeout = 5 * time.Second
	ttlOutput      = "protoshard member alive"
)

// ErrNotRegistered is returned by SetLeaving and Deregister when the provider
// has no current registration.
var ErrNotRegistered = errors.New("consul membership: not registered")

// ErrFenced is returned by SetLeaving when the registration was fenced: the
// member is considered removed and must re-join as a new member.
var ErrFenced = errors.New("consul membership: registration fenced (member considered removed)")

// ErrClosed is returned by Register after Close.
var ErrClosed = errors.New("consul membership: provider closed")

// config configures a provider; Options set it. The zero value is usable:
// it talks to the local agent as configured by the CONSUL_HTTP_*
// environment variables.
type config struct {
	// Client is the Consul API client. Nil: api.NewClient(api.DefaultConfig()),
	// which honours CONSUL_HTTP_ADDR, CONSUL_HTTP_TOKEN and the like.
	Client *api.Client
	// ServiceName is the Consul service every member registers as; members of
	// one cluster share it. It is also the cluster's name
	// (membership.Cluster.Name), under which the cluster's keys in Consul
	// live: give every cluster that shares a Consul its own. Default
	// "protoshard".
	ServiceName string
	// TTL is the health check TTL: a member that does not refresh it for this
	// long turns critical and is removed by the others. Default 5s.
	TTL time.Duration
	// RefreshInterval is how often the TTL is refreshed. Default TTL/3; it
	// must be below TTL.
	RefreshInterval time.Duration
	// DeregisterCriticalServiceAfter makes Consul delete a registration whose
	// check stayed critical this long (a crashed member's leftovers).
	// Default and minimum 1m (Consul's own minimum).
	DeregisterCriticalServiceAfter time.Duration
	// RetryBackoff is the first delay after a failed watch query; it doubles
	// up to 10s. Default 500ms.
	RetryBackoff time.Duration
	// Logger receives the provider's logs. Default: the logger of the actor
	// system whose membership.Cluster uses the provider (see
	// its UseLogger), slog.Default() before that.
	Logger *slog.Logger
}

// provider is a membership.Provider backed by Consul. One provider serves
// one node; Register may be called again after the previous registration was
// fenced or deregistered (the Cluster re-joins as a new member that way).
type provider struct {
	cfg    config
	client *api.Client
	// log is the provider's logger: cfg.Logger, else the one UseLogger
	// gave, else slog.Default(); with the provider's attributes.
	log atomic.Pointer[slog.Logger]

	closeCtx context.Context // done once Close was called
	closeFn  context.CancelFunc

	// opMu serialises Register, SetLeaving and Deregister: each of them
	// writes the registration to the agent and must not interleave with
	// another.
	opMu sync.Mutex

	// lastOK is when the current registration last refreshed its TTL
	// successfully (its send time, with a monotonic reading); nil while
	// there is none. Read on every message a region routes.
	lastOK atomic.Pointer[time.Time]

	mu  sync.Mutex
	reg *registration // the current (or last) registration, nil before the first
	// gone: the member IDs this provider fenced or deregistered, never
	// reported again while Consul may still report them live (see view).
	gone   expiring.Set[struct{}]
	closed bool
}

// registration is one incarnation of this node: one member ID.
type registration struct {
	self    membership.Member // with its Age once confirmed
	service *api.AgentServiceRegistration
	checkID string

	// Guarded by provider.mu.
	confirmed     bool // Register saw it in the catalog and returned it
	leaving       bool
	deregistering bool
	fenced        bool
	indexReset    bool   // a watch saw the Consul index go backwards since Register
	leaveSession  string // the session holding the leaving marker, renewed with the TTL

	fencedCtx   context.Context // done once fenced: wakes the watch
	fence       context.CancelFunc
	stopRefresh context.CancelFunc
	refreshDone chan struct{}
}

// Name implements membership.Provider: the service name.
func (p *provider) Name() string { return p.cfg.ServiceName }

// A Consul agent deletes the services whose check stayed critical for
// their DeregisterCriticalServiceAfter every reapInterval, and brings the
// catalog in line with its own state at least every antiEntropyInterval
// (Consul's check_reap_interval and ae_interval).
const (
	reapInterval        = 30 * time.Second
	antiEntropyInterval = time.Minute
)

// RegistrationLinger implements membershiphook.RegistrationLinger: a member
// stops refreshing its check once it fenced itself (after a TTL without a
// successful refresh), but a refresh it sent before, handled late, passes
// the check again for a TTL; once the check stayed critical for
// DeregisterCriticalServiceAfter, the agent deletes the registration at
// its next reaping, and the catalog follows at its next sync. A later
// refresh then finds no check, and the member never registers the ID
// again.
func (p *provider) RegistrationLinger() time.Duration { return registrationLinger(p.cfg) }

func registrationLinger(cfg config) time.Duration {
	return cfg.TTL + cfg.DeregisterCriticalServiceAfter + reapInterval + antiEntropyInterval
}

// LastConfirmed implements membershiphook.Confirmer: when the current
// registration last refreshed its TTL check successfully (when the refresh
// was sent).
func (p *provider) LastConfirmed() (time.Time, bool) {
	if t := p.lastOK.Load(); t != nil {
		return *t, true
	}
	return time.Time{}, false
}

// FailureDetectionTimeout implements membershiphook.FailureDetector: the TTL.
// The others remove a silent member once its check has been critical for
// a TTL, and the member fences itself after a TTL without a successful
// refresh.
func (p *provider) FailureDetectionTimeout() time.Duration { return p.cfg.TTL }

// New returns the Consul membership of one node, with opts over the
// defaults: it talks to the
// local agent as configured by the CONSUL_HTTP_* environment variables
// unless WithClient says otherwise. It checks the options together and
// fails with an error that names what does not fit (ErrInvalidOption for
// a value no configuration accepts).
func New(opts ...Option) (membership.Provider, error) {
	var cfg config
	if err := option.Apply(&cfg, opts, ErrInvalidOption); err != nil {
		return nil, err
	}
	if cfg.ServiceName == "" {
		cfg.ServiceName = DefaultServiceName
	}
	if cfg.TTL <= 0 {
		cfg.TTL = defaultTTL
	}
	if cfg.TTL < time.Second {
		// Consul formats and checks TTLs in whole time units; sub-second TTLs
		// would also need refreshes faster than an HTTP round trip allows.
		return nil, fmt.Errorf("consul membership: TTL %v is below 1s", cfg.TTL)
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = cfg.TTL / 3
	}
	if cfg.RefreshInterval >= cfg.TTL {
		return nil, fmt.Errorf("consul membership: refresh interval %v must be below the TTL %v", cfg.RefreshInterval, cfg.TTL)
	}
	if cfg.DeregisterCriticalServiceAfter < minDeregisterAfter {
		cfg.DeregisterCriticalServiceAfter = minDeregisterAfter
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = defaultRetryBackoff
	}
	client := cfg.Client
	if client == nil {
		c, err := api.NewClient(api.DefaultConfig())
		if err != nil {
			return nil, fmt.Errorf("consul membership: creating the Consul client: %w", err)
		}
		client = c
	}
	closeCtx, closeFn := context.WithCancel(context.Background())
	p := &provider{
		cfg:      cfg,
		client:   client,
		closeCtx: closeCtx,
		closeFn:  closeFn,
		gone:     expiring.NewSet[struct{}](expiring.Window(0, registrationLinger(cfg)), nil),
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	p.setLogger(logger)
	return p, nil
}

// UseLogger implements membershiphook.LoggingProvider: the provider logs to
// logger unless WithLogger set one.
func (p *provider) UseLogger(logger *slog.Logger) {
	if p.cfg.Logger == nil && logger != nil {
		p.setLogger(logger)
	}
}

func (p *provider) setLogger(logger *slog.Logger) {
	p.log.Store(logger.With(slog.String("component", "consul-membership"), slog.String("service", p.cfg.ServiceName)))
}

func (p *provider) logger() *slog.Logger { return p.log.Load() }

var (
	_ membership.Provider               = (*provider)(nil)
	_ membershiphook.Confirmer          = (*provider)(nil)
	_ membershiphook.RegistrationLinger = (*provider)(nil)
	_ membershiphook.LoggingProvider    = (*provider)(nil)
)

// Register registers self as a service instance with a passing TTL check,
// waits until the catalog shows it (a consistent read) and returns self with
// Age set to the registration's CreateIndex. It starts the TTL refreshes.
// A previous registration of this provider is ended first.
func (p *provider) Register(ctx context.Context, self membership.Member) (membership.Member, error) {
	if err := validateID(self.ID); err != nil {
		return membership.Member{}, err
	}
	host, portStr, err := net.SplitHostPort(self.Address)
	if err != nil {
		return membership.Member{}, fmt.Errorf("consul membership: member address %q: %w", self.Address, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port > 65535 {
		return membership.Member{}, fmt.Errorf("consul membership: member address %q: bad port", self.Address)
	}
	for _, r := range self.Roles {
		if r == "" || strings.Contains(r, ",") {
			return membership.Member{}, fmt.Errorf("consul membership: role %q: roles must be non-empty and contain no comma", r)
		}
	}

	p.opMu.Lock()
	defer p.opMu.Unlock()

	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return membership.Member{}, ErrClosed
	}
	old := p.reg
	p.mu.Unlock()
	if old != nil {
		p.retire(ctx, old, false)
	}

	self.Roles = slices.Clone(self.Roles)
	self.Status = membership.Up
	checkID := "protoshard-ttl-" + self.ID
	svc := &api.AgentServiceRegistration{
		ID:      self.ID,
		Name:    p.cfg.ServiceName,
		Address: host,
		Port:    port,
		Meta: map[string]string{
			consulmember.MetaMemberID: self.ID,
			consulmember.MetaRoles:    strings.Join(self.Roles, ","),
			consulmember.MetaStatus:   consulmember.StatusUp,
			consulmember.MetaSystemID: self.SystemID,
		},
		Check: &api.AgentServiceCheck{
			CheckID: checkID,
			Name:    "protoshard member TTL",
			TTL:     p.cfg.TTL.String(),
			// Passing from the start: the member is visible at once, and the
			// TTL clock starts now (the refresher assumes exactly that).
			Status:                         api.HealthPassing,
			Notes:                          "refreshed by the protoshard membership provider",
			DeregisterCriticalServiceAfter: p.cfg.DeregisterCriticalServiceAfter.String(),
		},
	}
	fencedCtx, fence := context.WithCancel(context.Background())
	refreshCtx, stopRefresh := context.WithCancel(p.closeCtx)
	reg := &registration{
		self:        self,
		service:     svc,
		checkID:     checkID,
		fencedCtx:   fencedCtx,
		fence:       fence,
		stopRefresh: stopRefresh,
		refreshDone: make(chan struct{}),
	}
	p.mu.Lock()
	if p.closed { // Close ran while the previous registration was retired
		p.mu.Unlock()
		stopRefresh()
		return membership.Member{}, ErrClosed
	}
	p.reg = reg
	p.mu.Unlock()

	sent := time.Now()
	p.lastOK.Store(&sent)
	if err := p.client.Agent().ServiceRegisterOpts(svc, api.ServiceRegisterOpts{ReplaceExistingChecks: true}.WithContext(ctx)); err != nil {
		close(reg.refreshDone) // no refresher was started
		// The agent may have registered it all the same (the answer was
		// lost, or came after our deadline).
		p.retire(ctx, reg, true)
		return membership.Member{}, fmt.Errorf("consul membership: registering member %s (service %q) with the Consul agent: %w",
			self.ID, p.cfg.ServiceName, err)
	}
	// Refresh from now on: waiting for the catalog may take a while, and the
	// TTL is already running.
	go p.refreshLoop(refreshCtx, reg, sent)

	age, err := p.waitVisible(ctx, self.ID)
	if err == nil {
		p.mu.Lock()
		if reg.fenced {
			err = errors.New("registration fenced while waiting for the catalog (TTL refreshes failed)")
		} else {
			reg.self.Age = age
			reg.confirmed = true
		}
		p.mu.Unlock()
	}
	if err != nil {
		// Do not leave a half-made member behind for the others to see.
		p.retire(ctx, reg, true)
		return membership.Member{}, fmt.Errorf("consul membership: registering member %s: %w", self.ID, err)
	}
	p.logger().Debug("registered", slog.String("member", self.ID), slog.String("address", self.Address),
		slog.Uint64("age", age), slog.Duration("ttl", p.cfg.TTL))
	return reg.self, nil
}

// validateID rejects ids that would not survive as a path segment of the
// agent API (the api client does not escape them).
func validateID(id string) error {
	if id == "" {
		return errors.New("consul membership: member id is empty")
	}
	for _, c := range id {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
		if !ok {
			return fmt.Errorf("consul membership: member id %q: only letters, digits, '-', '_' and '.' are allowed", id)
		}
	}
	return nil
}

// waitVisible waits until the catalog (consistent reads) shows the service
// instance id and returns its CreateIndex.
func (p *provider) waitVisible(ctx context.Context, id string) (uint64, error) {
	var idx uint64
	backoff := 50 * time.Millisecond
	for {
		q := (&api.QueryOptions{RequireConsistent: true, WaitIndex: idx, WaitTime: 2 * time.Second}).WithContext(ctx)
		services, meta, err := p.client.Catalog().Service(p.cfg.ServiceName, "", q)
		if err != nil {
			if ctx.Err() != nil {
				return 0, fmt.Errorf("waiting for the catalog to show the registration: %w", err)
			}
			p.logger().Debug("catalog read failed while waiting for own registration", slog.Any("error", err))
			if !sleep(ctx, backoff, nil) {
				return 0, fmt.Errorf("waiting for the catalog to show the registration: %w", ctx.Err())
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		for _, s := range services {
			if s != nil && s.ServiceID == id {
				return s.CreateIndex, nil
			}
		}
		if meta != nil && meta.LastIndex > idx {
			idx = meta.LastIndex
		} else if !sleep(ctx, backoff, nil) { // the index did not move: do not spin
			return 0, fmt.Errorf("waiting for the catalog to show the registration: %w", ctx.Err())
		}
	}
}

// refreshLoop keeps the TTL check passing until stopped, and fences the
// registration when it cannot: after a TTL without a successful refresh, or
// at once when Consul no longer knows the check.
func (p *provider) refreshLoop(ctx context.Context, reg *registration, lastOK time.Time) {
	defer close(reg.refreshDone)
	ticker := time.NewTicker(p.cfg.RefreshInterval)
	defer ticker.Stop()
	// Consul resets the TTL when it handles a refresh, which is after we
	// sent it: counting from the send time errs on the safe side, fencing
	// ourselves no later than the others can see the check go critical.
	expiry := time.NewTimer(time.Until(lastOK.Add(p.cfg.TTL)))
	defer expiry.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-expiry.C:
			p.fenceReg(reg, "no successful TTL refresh for longer than the TTL; the others may have seen this member fail")
			return
		case <-ticker.C:
		}
		sent := time.Now()
		// Never block past the moment the TTL may have run out.
		timeout := min(p.cfg.RefreshInterval, time.Until(lastOK.Add(p.cfg.TTL)))
		if timeout <= 0 {
			continue // the expiry timer fires next
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		err := p.client.Agent().UpdateTTLOpts(reg.checkID, ttlOutput, api.HealthPassing, (&api.QueryOptions{}).WithContext(cctx))
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil && time.Now().After(lastOK.Add(p.cfg.TTL)) {
			// It worked, but only after our deadline: Consul may have handled
			// it after the check had gone critical, and the others may have
			// seen that moment. Being sure is not possible, so fence.
			p.fenceReg(reg, "a TTL refresh came back only after the TTL had run out")
			return
		}
		if err == nil {
			if failures > 0 {
				p.logger().Info("TTL refresh works again", slog.String("member", reg.self.ID), slog.Int("failures", failures))
			}
			failures = 0
			lastOK = sent
			p.lastOK.Store(&sent)
			// Since Go 1.23 Reset needs no draining: no stale fire is received.
			expiry.Reset(time.Until(lastOK.Add(p.cfg.TTL)))
			p.renewLeaveSession(ctx, reg)
			continue
		}
		if isUnknownCheck(err) {
			p.fenceReg(reg, fmt.Sprintf("Consul no longer knows this member's check (%v); the registration was lost", err))
			return
		}
		failures++
		p.logger().Warn("TTL refresh failed", slog.String("member", reg.self.ID), slog.Any("error", err),
			slog.Duration("ttl_left", time.Until(lastOK.Add(p.cfg.TTL))))
	}
}

// renewLeaveSession keeps the leaving marker alive while the member lives;
// once refreshes stop (Deregister, Close, fencing), it expires on its own.
func (p *provider) renewLeaveSession(ctx context.Context, reg *registration) {
	p.mu.Lock()
	sid := reg.leaveSession
	p.mu.Unlock()
	if sid == "" {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.RefreshInterval)
	defer cancel()
	entry, _, err := p.client.Session().Renew(sid, (&api.WriteOptions{}).WithContext(cctx))
	switch {
	case err != nil:
		p.logger().Debug("renewing the leaving marker's session failed", slog.String("member", reg.self.ID), slog.Any("error", err))
	case entry == nil:
		p.logger().Debug("the leaving marker's session is gone", slog.String("member", reg.self.ID))
	}
}

// leavingKey is the KV key of a member's leaving marker.
func (p *provider) leavingKey(id string) string {
	return consulkey.Prefix(p.cfg.ServiceName) + "membership/leaving/" + id
}

// writeLeavingMarker creates the leaving marker of reg: a key held by a
// session with a TTL, deleted when the session expires.
func (p *provider) writeLeavingMarker(ctx context.Context, reg *registration) error {
	ttl := max(minSessionTTL, 2*p.cfg.TTL)
	sid, _, err := p.client.Session().CreateNoChecks(&api.SessionEntry{
		Name:     "protoshard-leaving-" + reg.self.ID,
		TTL:      ttl.String(),
		Behavior: api.SessionBehaviorDelete,
	}, (&api.WriteOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("creating the session: %w", err)
	}
	p.mu.Lock()
	reg.leaveSession = sid
	p.mu.Unlock()
	ok, _, err := p.client.KV().Acquire(&api.KVPair{
		Key:     p.leavingKey(reg.self.ID),
		Value:   []byte(reg.self.ID),
		Session: sid,
	}, (&api.WriteOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("writing %s: %w", p.leavingKey(reg.self.ID), err)
	}
	if !ok {
		return fmt.Errorf("writing %s: the key is held by another session", p.leavingKey(reg.self.ID))
	}
	return nil
}

// leftGracefully tells whether the member left a leaving marker. Any doubt
// (Consul unreachable) answers no: a removal that is not graceful is the
// cautious reading.
func (p *provider) leftGracefully(ctx context.Context, id string) bool {
	pair, _, err := p.client.KV().Get(p.leavingKey(id), (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		p.logger().Debug("reading a leaving marker failed", slog.String("member", id), slog.Any("error", err))
		return false
	}
	return pair != nil
}

// isUnknownCheck tells whether the agent answered that the check does not
// exist (404), or exists but no longer as a TTL check.
func isUnknownCheck(err error) bool {
	var se api.StatusError
	if errors.As(err, &se) {
		return se.Code == http.StatusNotFound ||
			strings.Contains(se.Body, "Unknown check") ||
			strings.Contains(se.Body, "does not have associated TTL")
	}
	return false
}

// isUnknownService tells whether the agent answered that the service does
// not exist.
func isUnknownService(err error) bool {
	var se api.StatusError
	return errors.As(err, &se) && (se.Code == http.StatusNotFound || strings.Contains(se.Body, "Unknown service"))
}

// fenceReg marks reg as no longer trustworthy: its member is reported as
// gone (by the watch) and its check is not refreshed any more. A member that
// is deregistering is leaving of its own will and is not fenced.
func (p *provider) fenceReg(reg *registration, reason string) {
	p.mu.Lock()
	if reg.fenced || reg.deregistering {
		p.mu.Unlock()
		return
	}
	p.fenceLocked(reg)
	p.mu.Unlock()
	p.logger().Warn("member fenced: reporting itself removed", slog.String("member", reg.self.ID), slog.String("reason", reason))
}

func (p *provider) fenceLocked(reg *registration) {
	reg.fenced = true
	p.gone.Put(reg.self.ID, struct{}{}, time.Now())
	reg.stopRefresh()
	reg.fence()
}

// retire ends a registration that is being replaced or failed half way:
// stops its refreshes, never reports it again and removes it from Consul,
// best effort (if that fails, its TTL runs out). In the background when
// async, so that a failing Register does not outlast its context; otherwise
// within ctx.
func (p *provider) retire(ctx context.Context, reg *registration, async bool) {
	p.mu.Lock()
	p.gone.Put(reg.self.ID, struct{}{}, time.Now())
	alreadyDeregistered := reg.deregistering
	reg.deregistering = true
	reg.stopRefresh()
	p.mu.Unlock()
	<-reg.refreshDone
	if alreadyDeregistered {
		return
	}
	deregister := func(ctx context.Context) {
		dctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
		defer cancel()
		err := p.client.Agent().ServiceDeregisterOpts(reg.self.ID, (&api.QueryOptions{}).WithContext(dctx))
		if err != nil && !isUnknownService(err) {
			p.logger().Warn("could not deregister an abandoned registration; its TTL will run out",
				slog.String("member", reg.self.ID), slog.Any("error", err))
		}
	}
	if async {
		go deregister(context.WithoutCancel(ctx))
		return
	}
	deregister(ctx)
}

// SetLeaving marks the member Leaving: its service is registered again with
// status "leaving" in its meta, so the others see MemberLeft. Consul keeps
// the CreateIndex of a service that is registered again under the same ID,
// so the member's age does not change. The TTL check is left as it is.
//
// Before that it writes the leaving marker (see the package doc; the key is
// protoshard/<service>/membership/leaving/<member id>), so that the others
// see the removal as graceful even if they miss the "leaving" status. A
// marker that cannot be written is logged, not returned: the status alone
// still announces the leave.
func (p *provider) SetLeaving(ctx context.Context) error {
	p.opMu.Lock()
	defer p.opMu.Unlock()
	p.mu.Lock()
	reg := p.reg
	switch {
	case reg == nil || !reg.confirmed || reg.deregistering:
		p.mu.Unlock()
		return ErrNotRegistered
	case reg.fenced:
		p.mu.Unlock()
		return ErrFenced
	}
	reg.leaving = true
	svc := *reg.service
	svc.Meta = map[string]string{}
	for k, v := range reg.service.Meta {
		svc.Meta[k] = v
	}
	svc.Meta[consulmember.MetaStatus] = consulmember.StatusLeaving
	// Without Check, and without ReplaceExistingChecks, the agent keeps the
	// running TTL check (and its state) as it is.
	svc.Check = nil
	p.mu.Unlock()

	if err := p.writeLeavingMarker(ctx, reg); err != nil {
		p.logger().Warn("could not write the leaving marker; others may see the removal as not graceful",
			slog.String("member", reg.self.ID), slog.Any("error", err))
	}
	if err := p.client.Agent().ServiceRegisterOpts(&svc, api.ServiceRegisterOpts{}.WithContext(ctx)); err != nil {
		return fmt.Errorf("consul membership: marking member %s leaving: %w", reg.self.ID, err)
	}
	p.mu.Lock()
	reg.service = &svc
	p.mu.Unlock()
	p.logger().Debug("marked leaving", slog.String("member", reg.self.ID))
	return nil
}

// Deregister stops the TTL refreshes and removes the member's service (and
// its check) from Consul. The watch then reports the members without self,
// which is no reason to fence: the member is leaving of its own will. A
// registration that Consul already lost counts as deregistered.
func (p *provider) Deregister(ctx context.Context) error {
	p.opMu.Lock()
	defer p.opMu.Unlock()
	p.mu.Lock()
	reg := p.reg
	if reg == nil {
		p.mu.Unlock()
		return ErrNotRegistered
	}
	reg.deregistering = true
	p.gone.Put(reg.self.ID, struct{}{}, time.Now())
	reg.stopRefresh()
	p.mu.Unlock()
	<-reg.refreshDone

	err := p.client.Agent().ServiceDeregisterOpts(reg.self.ID, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil && !isUnknownService(err) {
		return fmt.Errorf("consul membership: deregistering member %s: %w", reg.self.ID, err)
	}
	p.logger().Debug("deregistered", slog.String("member", reg.self.ID))
	return nil
}

// Close stops the TTL refreshes and every Watch without deregistering: to
// the others it looks like a crash (the check goes critical after the TTL
// and the member is removed). The provider cannot be used afterwards.
func (p *provider) Close() {
	p.mu.Lock()
	p.closed = true
	reg := p.reg
	p.mu.Unlock()
	p.closeFn()
	if reg != nil {
		reg.stopRefresh()
		<-reg.refreshDone
	}
}

// Watch reads the passing instances of the service with blocking queries and
// calls onChange with the members, first with the initial result and then
// after each change, until ctx is done or the provider is closed.
//
// When Consul cannot be read, it logs, backs off and keeps the last view:
// an unreachable Consul is not an empty cluster. When the current
// registration is fenced, it reports the last known members without self.
func (p *provider) Watch(ctx context.Context, onChange func([]membership.Member)) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(p.closeCtx, cancel)()

	var (
		idx           uint64
		last          []membership.Member // the last result read, unfiltered
		haveLast      bool
		delivered     []membership.Member
		haveDelivered bool
		fenceReported *registration
		backoff       = p.cfg.RetryBackoff
		failures      int
	)
	deliver := func() {
		view := p.view(last)
		if ctx.Err() != nil {
			return
		}
		if haveDelivered && sameMembers(view, delivered) {
			return
		}
		delivered, haveDelivered = view, true
		onChange(slices.Clone(view))
	}

	for ctx.Err() == nil {
		p.mu.Lock()
		reg := p.reg
		p.mu.Unlock()
		// A fence interrupts the blocking query so that it is reported at
		// once, not after the query's wait time.
		qctx, qcancel := context.WithCancel(ctx)
		stopFenceWake := func() bool { return false }
		var fenceCh <-chan struct{}
		if reg != nil && reg != fenceReported {
			stopFenceWake = context.AfterFunc(reg.fencedCtx, qcancel)
			fenceCh = reg.fencedCtx.Done()
		}
		q := (&api.QueryOptions{WaitIndex: idx, WaitTime: watchWaitTime}).WithContext(qctx)
		entries, meta, err := p.client.Health().Service(p.cfg.ServiceName, "", true, q)
		stopFenceWake()
		qcancel()
		if ctx.Err() != nil {
			return
		}
		if reg != nil && reg != fenceReported && reg.fencedCtx.Err() != nil {
			fenceReported = reg
			if haveLast {
				deliver() // the last known members, minus self
			}
			if err != nil {
				continue // interrupted by the fence: read again at once
			}
		}
		if err == nil && meta == nil {
			err = errors.New("no query metadata in the answer")
		}
		if err != nil {
			failures++
			p.logger().Warn("reading the members failed; keeping the last view", slog.Any("error", err),
				slog.Int("failures", failures), slog.Duration("retry_in", backoff))
			if !sleep(ctx, backoff, fenceCh) {
				return
			}
			backoff = min(2*backoff, maxRetryBackoff)
			continue
		}
		if failures > 0 {
			p.logger().Info("reading the members works again", slog.Int("failures", failures))
		}
		failures = 0
		backoff = p.cfg.RetryBackoff

		if meta.LastIndex < idx {
			// Consul lost its state (restarted without data, or restored an
			// old snapshot): the indexes we know mean nothing any more.
			p.logger().Warn("Consul index went backwards; Consul lost its state or was restarted",
				slog.Uint64("was", idx), slog.Uint64("now", meta.LastIndex))
			p.noteIndexReset(reg)
			idx = 0
		} else {
			// An index of 0 would make the next query return at once, for ever.
			idx = max(meta.LastIndex, 1)
		}
		members := p.toMembers(entries)
		if haveLast {
			// Members that vanished while Up but had announced their leave:
			// report them Leaving first, so that their removal is graceful.
			left := memberwatch.VanishedLeavers(last, members, func(id string) bool { return p.leftGracefully(ctx, id) })
			if len(left) > 0 {
				last = membership.ByAge(append(slices.Clone(members), left...), "", true)
				deliver()
			}
		}
		if reg != nil {
			p.checkSelf(reg, members, meta.LastIndex)
			if reg.fencedCtx.Err() != nil {
				fenceReported = reg
			}
		}
		last, haveLast = members, true
		deliver()
	}
}

// view filters out the member ids this provider has fenced or deregistered:
// they never come back, whatever Consul says later. An ID is kept ten
// times the registration's linger (see RegistrationLinger): by then
// Consul no longer has it.
func (p *provider) view(ms []membership.Member) []membership.Member {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]membership.Member, 0, len(ms))
	for _, m := range ms {
		if !p.gone.Has(m.ID) {
			out = append(out, m)
		}
	}
	return out
}

func (p *provider) noteIndexReset(reg *registration) {
	if reg == nil {
		return
	}
	p.mu.Lock()
	reg.indexReset = true
	p.mu.Unlock()
}

// checkSelf fences reg when a watch result shows that the registration is
// gone (or was re-created with another age) while we believe it is live.
// Results older than the registration do not count: a stale read may
// predate it. After an index reset, every result counts.
func (p *provider) checkSelf(reg *registration, members []membership.Member, index uint64) {
	p.mu.Lock()
	if p.reg != reg || !reg.confirmed || reg.fenced || reg.deregistering {
		p.mu.Unlock()
		return
	}
	if index < reg.self.Age && !reg.indexReset {
		p.mu.Unlock()
		return
	}
	reason := "this member's registration is no longer among the passing instances"
	for _, m := range members {
		if m.ID != reg.self.ID {
			continue
		}
		if m.Age == reg.self.Age {
			p.mu.Unlock()
			return
		}
		reason = fmt.Sprintf("this member's registration was re-created (age %d, was %d)", m.Age, reg.self.Age)
	}
	p.fenceLocked(reg)
	p.mu.Unlock()
	p.logger().Warn("member fenced: reporting itself removed", slog.String("member", reg.self.ID), slog.String("reason", reason))
}

// toMembers converts health entries to members, oldest first. Entries that
// do not describe a member are skipped: nothing Consul sends may panic.
func (p *provider) toMembers(entries []*api.ServiceEntry) []membership.Member {
	out := make([]membership.Member, 0, len(entries))
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		m, ok := consulmember.MemberOf(e)
		if !ok {
			p.logger().Debug("skipping a service entry that is not a member")
			continue
		}
		out = append(out, m)
	}
	out = membership.ByAge(out, "", true)
	// An id registered on two agents (which random ids make unlikely) is
	// kept once, the oldest, so that every node agrees.
	dedup := out[:0]
	for _, m := range out {
		if !seen[m.ID] {
			seen[m.ID] = true
			dedup = append(dedup, m)
		}
	}
	return dedup
}

func sameMembers(a, b []membership.Member) bool {
	return slices.EqualFunc(a, b, func(x, y membership.Member) bool {
		return x.ID == y.ID && x.Address == y.Address && x.Age == y.Age && x.Status == y.Status && slices.Equal(x.Roles, y.Roles) &&
			x.SystemID == y.SystemID
	})
}

// sleep waits d; it returns false if ctx ended first. A receive on wake ends
// the wait early (returning true).
func sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-wake:
		return true
	case <-t.C:
		return true
	}
}
