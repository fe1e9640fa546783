// Package caslease is a lease.Lease on a compare-and-set record in a
// key-value store, after Kubernetes' Lease (client-go leader election): it
// fails over in seconds, where a Consul session cannot expire before 10 s
// and is expired up to twice its TTL late, then followed by its lock delay.
// Package lease/consulcas stores the record in Consul KV; MemoryStore keeps
// it in memory.
//
// The record names its holder, counts its renewals and carries the fencing
// token. Nothing depends on synchronized clocks; the rules assume only that
// every node's clock runs at a rate within ρ (WithDrift, default 1%) of
// real time, and they measure everything on the monotonic clock of the node
// that acts:
//
//   - The holder rewrites the record (compare-and-set on the version it last
//     wrote) every RenewInterval. It considers itself holder until
//     Duration × (1 − ρ) − SafetyMargin after the start of its last
//     successful write; after that CheckLease is false and the lease-lost
//     callback runs, whether or not it can reach the store.
//   - A contender takes a held record over only after it has read the same
//     version for Duration × (1 + ρ) + SafetyMargin, counted from the
//     answer of the read that first showed it; it then writes on exactly that
//     version, which fails if the holder renewed meanwhile.
//
// Why the holder stops first: the version a contender reads was written
// after the holder's request for it started, at real time s; the holder
// stops by s + (Duration(1−ρ) − m)/(1−ρ) = s + Duration − m/(1−ρ) in real
// time, and the contender writes no sooner than
// s + (Duration(1+ρ) + m)/(1+ρ) = s + Duration + m/(1+ρ): about two
// safety margins later. A contender that read an older version (a stale
// read, a renewal it missed) writes on a version that is gone, and fails.
//
// Acquire does not wait: it reports not acquired until the record has
// stayed unchanged long enough, and the next Acquire of the same value
// counts on. A contender that only asks when it wants the lease takes a
// dead holder's lease over waitFor after its first Acquire; one that has
// observed the record ahead (its Observe, a lease.Observer: the
// singleton's manager observes from its start) takes it over waitFor after
// the holder's last renewal, one RenewInterval later at most. Either way a
// retry interval adds to that: give the singleton and the shards a lease
// retry interval near RenewInterval (Akka's default of 5 s adds up to
// 5 s to a failover).
//
// A free record (its holder released it) is taken at once. The fencing
// token of a new holding is max(previous token, version replaced) + 1, so
// it grows with every holder; a release keeps the token in the record. A
// record deleted from outside, or a store that loses its state, starts the
// tokens again (as for lease/consul).
package caslease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/protoshard/protoshard/internal/leaselog"
	"github.com/protoshard/protoshard/internal/option"
	"github.com/protoshard/protoshard/lease"
	"github.com/protoshard/protoshard/lease/internal/loss"
	"github.com/protoshard/protoshard/lease/internal/renewloop"
)

// Defaults: a holder gone silent is taken over about 6 s after its last
// renewal (Duration × 1.01 + margin), while a renewal every second leaves a
// live holder three attempts (of at most a second each) before it gives up
// at 3.95 s.
const (
	defaultDuration         = 5 * time.Second
	defaultRenewInterval    = time.Second
	defaultSafetyMargin     = time.Second
	defaultOperationTimeout = time.Second
	defaultDrift            = 0.01
)

// config configures the leases of one Provider; Options set it. Zero
// fields take their defaults (fill).
type config struct {
	// Store keeps the records.
	Store Store
	// KeyPrefix is prepended to the lease name to make the record's key.
	KeyPrefix string
	// Duration: a record left unchanged this long (plus drift and margin)
	// may be taken over.
	Duration time.Duration
	// RenewInterval is how often the holder rewrites the record.
	RenewInterval time.Duration
	// SafetyMargin is the holder's time to stop what the lease protects
	// before anybody can take over (see the package documentation).
	SafetyMargin time.Duration
	// OperationTimeout bounds each request to the store.
	OperationTimeout time.Duration
	// Drift is the bound ρ on any node's clock-rate error; negative: 0.
	Drift float64
	// Logger receives the leases' logs; nil: the logger of the actor
	// system of the singleton or shard that holds the lease
	// (leaselog.NewLease), else slog.Default().
	Logger *slog.Logger
}

func (c config) fill() config {
	if c.Duration <= 0 {
		c.Duration = defaultDuration
	}
	if c.RenewInterval <= 0 {
		c.RenewInterval = defaultRenewInterval
	}
	if c.SafetyMargin <= 0 {
		c.SafetyMargin = defaultSafetyMargin
	}
	if c.OperationTimeout <= 0 {
		c.OperationTimeout = defaultOperationTimeout
	}
	switch {
	case c.Drift == 0:
		c.Drift = defaultDrift
	case c.Drift < 0:
		c.Drift = 0
	}
	return c
}

func (c config) withDefaults() (config, error) {
	c = c.fill()
	hold := c.timing().holdFor()
	switch {
	case c.Store == nil:
		return c, errors.New("cas lease: the store is nil")
	case c.Drift >= 0.5:
		return c, fmt.Errorf("cas lease: clock drift %v must be below 0.5", c.Drift)
	case c.RenewInterval >= hold:
		return c, fmt.Errorf("cas lease: renew interval %v leaves no renewal before the holder gives up (%v after its last renewal: duration %v × (1 − drift %v) − safety margin %v)",
			c.RenewInterval, hold, c.Duration, c.Drift, c.SafetyMargin)
	}
	return c, nil
}

func (c config) timing() leaseTiming {
	return leaseTiming{Duration: c.Duration, SafetyMargin: c.SafetyMargin, Drift: c.Drift}
}

// Provider creates the leases of one configuration: a lease.Provider for the
// cluster singleton's (and so the coordinator's) and the shards' use-lease.
type Provider struct {
	cfg config
}

// NewProvider returns a Provider of leases whose records store keeps. It
// checks the options together and fails with an error that names what
// does not fit (ErrInvalidOption for a value no configuration accepts).
func NewProvider(store Store, opts ...Option) (*Provider, error) {
	cfg := config{Store: store}
	if err := option.Apply(&cfg, opts, ErrInvalidOption); err != nil {
		return nil, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Provider{cfg: cfg}, nil
}

// NewLease implements lease.Provider: a new holder of the lease leaseName.
func (p *Provider) NewLease(leaseName, ownerName string) (lease.Lease, error) {
	if strings.Trim(leaseName, "/") == "" {
		return nil, errors.New("cas lease: lease name is empty")
	}
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("cas lease: holder identity: %w", err)
	}
	self := ownerName + "#" + hex.EncodeToString(nonce[:])
	return &casLease{
		cfg:  p.cfg,
		name: leaseName,
		key:  p.cfg.KeyPrefix + strings.TrimLeft(leaseName, "/"),
		st:   newState(p.cfg.timing(), self, ownerName),
		log:  leaselog.New(p.cfg.Logger, "cas-lease", leaseName, ownerName),
	}, nil
}

// casLease is one holder of a compare-and-set lease. It is safe for
// concurrent use.
type casLease struct {
	cfg  config
	name string
	key  string
	log  leaselog.Log

	opMu sync.Mutex // serialises Acquire and Release

	mu  sync.Mutex
	st  state
	cur *holding // the current or last holding; nil after Release
}

// holding is one acquisition and its renewing goroutine.
type holding struct {
	token        uint64
	done         chan struct{}
	loss.Holding // guarded by casLease.mu
}

var _ lease.Lease = (*casLease)(nil)

// UseLogger makes the lease log to logger unless WithLogger set one
// (leaselog.NewLease).
func (l *casLease) UseLogger(logger *slog.Logger) { l.log.Use(logger) }

func (l *casLease) read(ctx context.Context) (view, error) {
	b, version, found, err := l.cfg.Store.Get(ctx, l.key)
	if err != nil {
		return view{}, fmt.Errorf("cas lease %q: reading %s: %w", l.name, l.key, err)
	}
	if !found {
		return view{}, nil
	}
	rec, err := decodeRecord(b)
	if err != nil {
		return view{}, fmt.Errorf("cas lease %q: %s: %w", l.name, l.key, err)
	}
	return view{Found: true, Version: version, leaseRecord: rec}, nil
}

func (l *casLease) write(ctx context.Context, d decision) (uint64, bool, error) {
	v, ok, err := l.cfg.Store.CAS(ctx, l.key, encodeRecord(d.leaseRecord), d.Version)
	if err != nil {
		return 0, false, fmt.Errorf("cas lease %q: writing %s: %w", l.name, l.key, err)
	}
	return v, ok, nil
}

// Acquire implements lease.Lease. It does not wait: while another holder's
// record has not stayed unchanged long enough, it reports not acquired, and
// a later Acquire of the same value continues counting (the singleton and
// the shards retry every LeaseRetryInterval).
func (l *casLease) Acquire(ctx context.Context, leaseLost lease.LostFunc) (uint64, bool, error) {
	l.opMu.Lock()
	defer l.opMu.Unlock()
	l.mu.Lock()
	h := l.cur
	if h != nil && !h.Ended() {
		if l.st.heldAt(time.Now()) {
			h.Notify(leaseLost)
			l.mu.Unlock()
			return h.token, true, nil
		}
		l.mu.Unlock()
		l.expire(h) // the renewing goroutine is late to declare it
	} else {
		l.mu.Unlock()
	}
	if err := ctx.Err(); err != nil {
		return 0, false, fmt.Errorf("cas lease %q: acquire: %w", l.name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.OperationTimeout)
	defer cancel()

	view, err := l.read(ctx)
	if err != nil {
		return 0, false, err
	}
	l.mu.Lock()
	d := l.st.observe(view, time.Now())
	l.mu.Unlock()
	if d.Kind != kindWrite {
		return 0, false, nil
	}
	start := time.Now()
	version, ok, err := l.write(ctx, d)
	if err != nil || !ok {
		// Not written (another holder renewed or took it), or in doubt: a
		// write that went through names this value, which a later Acquire
		// takes as its own and others wait out as a silent holder.
		return 0, false, err
	}
	l.mu.Lock()
	l.st.acquired(d.leaseRecord, version, start)
	if !l.st.heldAt(time.Now()) {
		rel, _ := l.st.release()
		l.mu.Unlock()
		_, _, _ = l.write(ctx, rel)
		return 0, false, fmt.Errorf("cas lease %q: acquiring took %v, past the %v a holding lasts without a renewal",
			l.name, time.Since(start), l.cfg.timing().holdFor())
	}
	hctx, stop := context.WithCancel(context.Background())
	h = &holding{token: d.leaseRecord.Token, done: make(chan struct{}), Holding: loss.New(stop, leaseLost)}
	l.cur = h
	l.mu.Unlock()
	l.log.Debug("cas lease acquired", slog.Uint64("token", h.token), slog.Uint64("version", version))
	go l.renew(hctx, h)
	return h.token, true, nil
}

var _ lease.Observer = (*casLease)(nil)

// Observe implements lease.Observer: it reads the record every
// RenewInterval while this value does not hold the lease, so that a later
// Acquire counts from the first of these reads that showed the record's
// current version. It costs one read per RenewInterval per observing
// value.
func (l *casLease) Observe(ctx context.Context) {
	tick := time.NewTicker(l.cfg.RenewInterval)
	defer tick.Stop()
	for {
		l.mu.Lock()
		held := l.st.held
		l.mu.Unlock()
		if !held {
			rctx, cancel := context.WithTimeout(ctx, l.cfg.OperationTimeout)
			v, err := l.read(rctx)
			cancel()
			if err == nil {
				l.mu.Lock()
				l.st.watch(v, time.Now())
				l.mu.Unlock()
			} else if ctx.Err() == nil {
				l.log.Debug("cas lease: observing the record failed", slog.Any("error", err))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// renew rewrites the record every RenewInterval and declares the lease lost
// when the record is another's, or when the holding's time is up.
func (l *casLease) renew(ctx context.Context, h *holding) {
	defer close(h.done)
	err := renewloop.Run(ctx, renewloop.Loop{
		Interval:         l.cfg.RenewInterval,
		OperationTimeout: l.cfg.OperationTimeout,
		UntilLoss:        l.untilLoss,
		Renew:            func(ctx context.Context, start time.Time) error { return l.renewOnce(ctx, h, start) },
		Final:            func(err error) bool { return errors.Is(err, lease.ErrLost) },
		Retrying: func(err error) {
			l.log.Warn("cas lease: renewal failed; retrying", slog.Any("error", err), slog.Duration("lostIn", l.untilLoss()))
		},
	})
	switch {
	case errors.Is(err, renewloop.ErrExpired):
		l.expire(h)
	case err != nil:
		l.lose(h, err)
	}
}

// renewOnce writes one renewal; on a version conflict it reads the record
// and either adopts its own earlier write or reports the loss (wrapping
// lease.ErrLost).
func (l *casLease) renewOnce(ctx context.Context, h *holding, start time.Time) error {
	l.mu.Lock()
	if h.Ended() {
		l.mu.Unlock()
		return nil
	}
	d := l.st.renewal()
	l.mu.Unlock()
	version, ok, err := l.write(ctx, d)
	if err != nil {
		return err
	}
	if ok {
		l.mu.Lock()
		if !h.Ended() {
			l.st.renewedOK(d.leaseRecord, version, start)
		}
		l.mu.Unlock()
		return nil
	}
	view, err := l.read(ctx)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if h.Ended() {
		return nil
	}
	if c := l.st.conflict(view); c.Kind == kindLost {
		return fmt.Errorf("%w: %s", lease.ErrLost, c.Reason)
	}
	return nil // the next renewal writes on the version it adopted
}

func (l *casLease) untilLoss() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(0, time.Until(l.st.lossAt()))
}

// expire declares h lost if its time is up; it reports whether h is over.
func (l *casLease) expire(h *holding) bool {
	l.mu.Lock()
	if l.cur != h || h.Ended() {
		l.mu.Unlock()
		return true
	}
	d, over := l.st.expire(time.Now())
	l.mu.Unlock()
	if over {
		l.lose(h, fmt.Errorf("%w: %s (duration %v, drift %v, safety margin %v)", lease.ErrLost, d.Reason,
			l.cfg.Duration, l.cfg.Drift, l.cfg.SafetyMargin))
	}
	return over
}

// lose declares h lost, once, and runs its callback.
func (l *casLease) lose(h *holding, reason error) {
	l.mu.Lock()
	if l.cur != h || h.Ended() {
		l.mu.Unlock()
		return
	}
	cb := h.Lose()
	l.st.held = false
	l.mu.Unlock()
	l.log.Warn("cas lease lost", slog.Uint64("token", h.token), slog.Any("reason", reason))
	if cb != nil {
		cb(reason)
	}
}

// Release implements lease.Lease: it frees the record, keeping its token,
// so that another holder may take it at once. After a loss it still frees
// the record if it names this holding (the loss came from timeouts, and the
// holder has stopped), and reports false.
func (l *casLease) Release(ctx context.Context) (bool, error) {
	l.opMu.Lock()
	defer l.opMu.Unlock()
	l.mu.Lock()
	h := l.cur
	l.cur = nil
	if h == nil {
		l.mu.Unlock()
		return false, nil
	}
	wasHeld := !h.End() && l.st.heldAt(time.Now())
	d, _ := l.st.release()
	l.mu.Unlock()
	<-h.done // no renewal races the release

	ctx, cancel := context.WithTimeout(ctx, l.cfg.OperationTimeout)
	defer cancel()
	if d.Kind != kindWrite || !wasHeld {
		// Lost: free the record if it is still this holding's.
		view, err := l.read(ctx)
		if err != nil {
			return false, err
		}
		l.mu.Lock()
		d, ok := l.st.releaseAfterLoss(view)
		l.mu.Unlock()
		if ok {
			if _, _, err := l.write(ctx, d); err != nil {
				return false, err
			}
		}
		return false, nil
	}
	// A renewal whose answer was lost may have moved the version: free the
	// record on the version it has while it is still this holding's.
	for {
		_, ok, err := l.write(ctx, d)
		if err != nil {
			return false, err
		}
		if ok {
			l.log.Debug("cas lease released", slog.Uint64("token", h.token))
			return true, nil
		}
		view, err := l.read(ctx)
		if err != nil {
			return false, err
		}
		l.mu.Lock()
		next, mine := l.st.releaseAfterLoss(view)
		l.mu.Unlock()
		if !mine || next.Version == d.Version {
			l.log.Warn("cas lease: release found the record no longer held", slog.String("holder", view.leaseRecord.Owner))
			return false, nil
		}
		d = next
	}
}

// CheckLease implements lease.Lease: held, not lost, and the last
// successful write recent enough, by the monotonic clock.
func (l *casLease) CheckLease() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur != nil && !l.cur.Ended() && l.st.heldAt(time.Now())
}
