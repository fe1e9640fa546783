// Package local is an in-process membership backend: a Registry shared by
// the actor systems of one process. It is the embedded default that lets
// examples run with no set-up, and the backend of most tests, which can make a
// member vanish without a goodbye (a crash, as failure detection would see it).
package local

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/internal/memberwatch"
	"github.com/protoshard/protoshard/membership"
)

// DefaultName is the cluster name of a registry made by NewRegistry.
const DefaultName = "local"

// Registry is the shared member list of one process.
type Registry struct {
	name     string
	mu       sync.Mutex
	members  map[string]membership.Member
	nextAge  uint64
	watchers map[int]chan struct{}
	nextW    int
	shared   map[string]any // see SharedValue
	// leftLeaving: members removed while Leaving (a graceful leave), so a
	// watcher that never read their Leaving status still reports it.
	leftLeaving map[string]bool
}

// NewRegistry returns an empty registry of the cluster named DefaultName.
// Its nodes need no store outside the process; one that keeps data in a
// store shared with other clusters (Consul) needs its own name:
// NewNamedRegistry.
func NewRegistry() *Registry { return NewNamedRegistry(DefaultName) }

// NewNamedRegistry returns an empty registry of the cluster named name
// (membership.Cluster.Name), or DefaultName when name is empty.
func NewNamedRegistry(name string) *Registry {
	if name == "" {
		name = DefaultName
	}
	return &Registry{name: name, members: map[string]membership.Member{}, watchers: map[int]chan struct{}{}}
}

// Provider returns a new backend for one node. Each node needs its own.
// Its nodes share the registry's values (such as sharding's default
// coordinator state store).
func (r *Registry) Provider() membership.Provider {
	return &provider{reg: r}
}

// sharedValue returns the value stored under key in this registry, storing
// create's result first if there is none: state that every node of the
// registry shares, such as sharding's default coordinator state store.
func (r *Registry) sharedValue(key string, create func() any) any {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.shared[key]; ok {
		return v
	}
	if r.shared == nil {
		r.shared = map[string]any{}
	}
	v := create()
	r.shared[key] = v
	return v
}

// leftGracefully tells whether member id was removed while Leaving.
func (r *Registry) leftGracefully(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leftLeaving[id]
}

// Remove makes a member vanish without a goodbye, as failure detection sees
// a crashed or cut-off node. The member itself, if still running, sees that
// it was removed.
func (r *Registry) Remove(memberID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.members[memberID]
	if !ok {
		return false
	}
	if m.Status == membership.Leaving {
		if r.leftLeaving == nil {
			r.leftLeaving = map[string]bool{}
		}
		r.leftLeaving[memberID] = true
	}
	delete(r.members, memberID)
	r.notifyLocked()
	return true
}

// Members returns a snapshot of the registered members.
func (r *Registry) Members() []membership.Member {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snapshotLocked()
}

func (r *Registry) snapshotLocked() []membership.Member {
	out := make([]membership.Member, 0, len(r.members))
	for _, m := range r.members {
		out = append(out, m)
	}
	return membership.ByAge(out, "", true)
}

func (r *Registry) notifyLocked() {
	for _, ch := range r.watchers {
		select {
		case ch <- struct{}{}:
		default: // a change is already pending; the watcher reads the latest snapshot
		}
	}
}

type provider struct {
	reg  *Registry
	mu   sync.Mutex
	self string
}

var errNotRegistered = errors.New("local membership: not registered")

var _ membershiphook.InProcessProvider = (*provider)(nil)

// Name implements membership.Provider: the registry's name.
func (p *provider) Name() string { return p.reg.name }

// SharedValue implements membershiphook.InProcessProvider: the registry's
// values.
func (p *provider) SharedValue(key string, create func() any) any {
	return p.reg.sharedValue(key, create)
}

func (p *provider) Register(_ context.Context, self membership.Member) (membership.Member, error) {
	if self.ID == "" {
		return membership.Member{}, errors.New("local membership: member id is empty")
	}
	p.reg.mu.Lock()
	defer p.reg.mu.Unlock()
	if _, dup := p.reg.members[self.ID]; dup {
		return membership.Member{}, fmt.Errorf("local membership: member id %s already registered", self.ID)
	}
	p.reg.nextAge++
	self.Age = p.reg.nextAge
	self.Status = membership.Up
	self.Roles = append([]string(nil), self.Roles...)
	p.reg.members[self.ID] = self
	p.mu.Lock()
	p.self = self.ID
	p.mu.Unlock()
	p.reg.notifyLocked()
	return self, nil
}

func (p *provider) SetLeaving(context.Context) error {
	p.mu.Lock()
	id := p.self
	p.mu.Unlock()
	p.reg.mu.Lock()
	defer p.reg.mu.Unlock()
	m, ok := p.reg.members[id]
	if !ok {
		return errNotRegistered
	}
	m.Status = membership.Leaving
	p.reg.members[id] = m
	p.reg.notifyLocked()
	return nil
}

func (p *provider) Deregister(context.Context) error {
	p.mu.Lock()
	id := p.self
	p.mu.Unlock()
	if !p.reg.Remove(id) {
		return errNotRegistered
	}
	return nil
}

// Close has nothing to stop: a local member has no heartbeat. Registry.Remove
// is what makes a crashed member vanish.
func (p *provider) Close() {}

// Watch delivers the registry's members on every change. A member that was
// Up in the last delivery and is gone now, but left gracefully (SetLeaving
// and Deregister came between two deliveries), is first delivered once
// more as Leaving: otherwise the watcher would take the graceful leave for
// a crash (the Consul provider does the same with its leaving marker).
func (p *provider) Watch(ctx context.Context, onChange func([]membership.Member)) {
	ch := make(chan struct{}, 1)
	p.reg.mu.Lock()
	id := p.reg.nextW
	p.reg.nextW++
	p.reg.watchers[id] = ch
	p.reg.mu.Unlock()
	defer func() {
		p.reg.mu.Lock()
		delete(p.reg.watchers, id)
		p.reg.mu.Unlock()
	}()
	// The first delivery. Not a blocking send: a change may have filled
	// the channel since it was registered, and nothing reads it yet.
	select {
	case ch <- struct{}{}:
	default:
	}
	var last []membership.Member
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
			next := p.reg.Members()
			if leavers := memberwatch.VanishedLeavers(last, next, p.reg.leftGracefully); len(leavers) > 0 {
				onChange(append(slices.Clone(next), leavers...))
			}
			onChange(next)
			last = next
		}
	}
}
