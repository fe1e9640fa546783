package testkit

import (
	"time"

	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
)

// Backend is where the nodes of a Cluster find each other: it hands each new
// node its membership provider and plays failure detection when a node
// crashes. LocalBackend is the in-process one; a Consul-backed one only has
// to build a consul provider per node and leave crashes to the TTL check.
type Backend interface {
	// NewProvider returns the membership provider of one new node (each
	// node needs its own). It is called once per StartNode.
	NewProvider() (membership.Provider, error)
	// Crashed is called after n died without a goodbye (its remote was
	// killed, its membership closed, its actors stopped). It makes the other
	// nodes notice, as their failure detection eventually would.
	Crashed(n *Node)
}

// LocalBackend is the in-process Backend over a shared local.Registry. A
// crash is detected by removing the member from the registry, at once or
// after FailureDetectionDelay.
type LocalBackend struct {
	// Registry is the shared member list; tests may call Registry.Remove
	// directly to down a member that keeps running (a paused or cut-off
	// node), which then sees itself removed.
	Registry *local.Registry
	// FailureDetectionDelay simulates the time failure detection takes to
	// give up on a crashed node. Zero removes it at once.
	FailureDetectionDelay time.Duration
}

// NewLocalBackend returns a LocalBackend over a new, empty registry.
func NewLocalBackend() *LocalBackend {
	return &LocalBackend{Registry: local.NewRegistry()}
}

// NewProvider returns a provider of the shared registry.
func (b *LocalBackend) NewProvider() (membership.Provider, error) {
	return b.Registry.Provider(), nil
}

// Crashed removes n's member from the registry, after the configured delay.
func (b *LocalBackend) Crashed(n *Node) {
	id := n.MemberID()
	if id == "" {
		return // it never joined
	}
	if b.FailureDetectionDelay <= 0 {
		b.Registry.Remove(id)
		return
	}
	time.AfterFunc(b.FailureDetectionDelay, func() { b.Registry.Remove(id) })
}
