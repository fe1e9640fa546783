package testsupport

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
	"github.com/protoshard/protoshard/testkit"
)

// PausableBackend is a LocalBackend whose members confirm their membership
// (membershiphook.Confirmer, as Consul's TTL refresh), so that a test can pause
// a node as its membership sees a SIGSTOP: Pause stops the node's
// confirmations (after FailureDetectionTimeout its membership is stale,
// membershiphook.Cluster.Stale) and holds back the member lists it would be
// told; RemovePaused is the others' failure detection giving up on it;
// Resume lets it hear again (its own removal, if it was removed) and, if it
// was not removed, confirm again. The node's actors run on while it is
// paused: what a paused node does when it resumes, before it has heard of
// its removal (a timer that fires, a message that waited), happens during
// the pause here.
type PausableBackend struct {
	*testkit.LocalBackend
	// Timeout is the failure detection timeout of every member.
	Timeout time.Duration

	mu        sync.Mutex
	providers []*pausableProvider
}

// NewPausableBackend returns a PausableBackend over a new, empty registry
// with the failure detection timeout timeout.
func NewPausableBackend(timeout time.Duration) *PausableBackend {
	return &PausableBackend{LocalBackend: testkit.NewLocalBackend(), Timeout: timeout}
}

// NewProvider returns a pausable provider of the shared registry.
func (b *PausableBackend) NewProvider() (membership.Provider, error) {
	p := &pausableProvider{inner: b.Registry.Provider().(inProcessProvider), registry: b.Registry, timeout: b.Timeout}
	b.mu.Lock()
	b.providers = append(b.providers, p)
	b.mu.Unlock()
	return p, nil
}

// Pause makes n's membership stop confirming and stop hearing from the
// others, as a paused process; n's actors run on. From
// FailureDetectionTimeout on, its membership is stale.
func (b *PausableBackend) Pause(n *testkit.Node) {
	b.provider(n).pause(time.Now())
}

// RemovePaused removes n's member from the registry, as the others'
// failure detection does once n has not confirmed for the timeout. n does
// not hear of it before Resume.
func (b *PausableBackend) RemovePaused(n *testkit.Node) {
	b.Registry.Remove(n.MemberID())
}

// Resume lets n's membership hear the member lists again, its own removal
// first if it was removed meanwhile; if it was not, n confirms its
// membership again.
func (b *PausableBackend) Resume(n *testkit.Node) {
	b.provider(n).resume()
}

// provider is the provider of n's current member; it panics if there is
// none (a test calling Pause on a node of another backend).
func (b *PausableBackend) provider(n *testkit.Node) *pausableProvider {
	id := n.MemberID()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.providers {
		if p.memberID() == id {
			return p
		}
	}
	panic("testkit: " + n.Name + " is no member of this PausableBackend")
}

// inProcessProvider is what a local provider is.
type inProcessProvider interface {
	membership.Provider
	membershiphook.InProcessProvider
}

// pausableProvider is the provider of one node of a PausableBackend: the
// local provider, plus confirmations and a watch that a pause holds.
type pausableProvider struct {
	inner    inProcessProvider
	registry *local.Registry
	timeout  time.Duration

	mu     sync.Mutex
	self   string
	frozen bool          // confirmations stopped: paused, or removed while paused
	at     time.Time     // the last confirmation, while frozen
	paused chan struct{} // non-nil while paused; closed at Resume
}

var _ membershiphook.Confirmer = (*pausableProvider)(nil)
var _ membershiphook.InProcessProvider = (*pausableProvider)(nil)

func (p *pausableProvider) FailureDetectionTimeout() time.Duration { return p.timeout }

// LastConfirmed is now, as if each confirmation had just been sent, unless
// confirmations stopped.
func (p *pausableProvider) LastConfirmed() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.self == "":
		return time.Time{}, false
	case p.frozen:
		return p.at, true
	}
	return time.Now(), true
}

func (p *pausableProvider) memberID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.self
}

func (p *pausableProvider) pause(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused != nil {
		return
	}
	p.frozen, p.at = true, now
	p.paused = make(chan struct{})
}

func (p *pausableProvider) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused == nil {
		return
	}
	close(p.paused)
	p.paused = nil
	// A removed member's confirmations fail (Consul: its check is gone)
	// until it registers again.
	p.frozen = !slices.ContainsFunc(p.registry.Members(), func(m membership.Member) bool { return m.ID == p.self })
}

// waitResumed blocks while the node is paused, or until ctx is done; it
// reports whether the node may hear again.
func (p *pausableProvider) waitResumed(ctx context.Context) bool {
	p.mu.Lock()
	paused := p.paused
	p.mu.Unlock()
	if paused == nil {
		return true
	}
	select {
	case <-paused:
		return true
	case <-ctx.Done():
		return false
	}
}

func (p *pausableProvider) Register(ctx context.Context, self membership.Member) (membership.Member, error) {
	m, err := p.inner.Register(ctx, self)
	if err == nil {
		p.mu.Lock()
		p.self, p.frozen = m.ID, false
		p.mu.Unlock()
	}
	return m, err
}

func (p *pausableProvider) SetLeaving(ctx context.Context) error { return p.inner.SetLeaving(ctx) }

func (p *pausableProvider) Deregister(ctx context.Context) error { return p.inner.Deregister(ctx) }

// Watch is the local provider's, with every member list held while the
// node is paused (the watch runs on one goroutine: later lists wait behind
// the held one).
func (p *pausableProvider) Watch(ctx context.Context, onChange func([]membership.Member)) {
	p.inner.Watch(ctx, func(ms []membership.Member) {
		if p.waitResumed(ctx) {
			onChange(ms)
		}
	})
}

func (p *pausableProvider) Close() { p.inner.Close() }

func (p *pausableProvider) Name() string { return p.inner.Name() }

func (p *pausableProvider) SharedValue(key string, create func() any) any {
	return p.inner.SharedValue(key, create)
}
