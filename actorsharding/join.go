package actorsharding

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
)

// JoinOption configures Join.
type JoinOption func(*joinConfig)

type joinConfig struct {
	host       string
	port       int
	provider   membership.Provider
	membership membership.Config
}

// WithAddress is where the node's remote listens: host and port (0: any
// free port). Default 127.0.0.1, port 0.
func WithAddress(host string, port int) JoinOption {
	return func(c *joinConfig) { c.host, c.port = host, port }
}

// WithMembership is how the node finds the others: a membership.Provider,
// such as membership/consul's. Default: an in-process registry shared by
// the actor systems of this process that join without this option.
func WithMembership(provider membership.Provider) JoinOption {
	return func(c *joinConfig) { c.provider = provider }
}

// WithMembershipConfig sets the node's membership settings: its roles,
// what it does when it finds itself removed, the down-removal margin...
// Join sets the quarantine itself.
func WithMembershipConfig(cfg membership.Config) JoinOption {
	return func(c *joinConfig) { c.membership = cfg }
}

// noHost is proto.actor's address of a system whose remote has not
// started.
const noHost = "nonhost"

// processRegistry is the in-process membership of Join without
// WithMembership.
var processRegistry = sync.OnceValue(local.NewRegistry)

// ErrRemoteStarted is returned by Join for an actor system whose remote
// runs already: Join must install the quarantine in the remote it starts.
// Build the membership.Cluster yourself and call New instead.
var ErrRemoteStarted = errors.New("the actor system's remote is started already")

// Join makes system a node of a protoshard cluster and returns its
// Sharding: it starts proto.actor's remote on system, with the quarantine
// that fences removed members; joins the membership (in-process by
// default, see WithMembership); and waits until this node is a member or
// ctx ends. Leave undoes it. To manage the remote and the
// membership.Cluster yourself, use New.
func Join(ctx context.Context, system *actor.ActorSystem, opts ...JoinOption) (*Sharding, error) {
	if system == nil {
		return nil, errors.New("actorsharding: Join needs an actor system")
	}
	cfg := joinConfig{host: "127.0.0.1"}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.provider == nil {
		cfg.provider = processRegistry().Provider()
	}
	if system.Address() != noHost {
		return nil, fmt.Errorf("actorsharding: Join: %w (%s)", ErrRemoteStarted, system.Address())
	}
	quarantine := membership.NewQuarantine()
	r := remote.NewRemote(system, remote.Configure(cfg.host, cfg.port, quarantine.RemoteOption()))
	// The remote first: a member is known by its address, "nonhost"
	// until the remote listens.
	r.Start()
	mcfg := cfg.membership
	mcfg.Quarantine = quarantine
	cluster := membership.NewCluster(system, cfg.provider, mcfg)
	if err := cluster.Join(ctx); err != nil {
		cluster.Close()
		r.Shutdown(false)
		return nil, fmt.Errorf("actorsharding: Join: %w", err)
	}
	s, err := New(system, cluster)
	if err != nil {
		cluster.Close()
		r.Shutdown(false)
		return nil, err
	}
	s.mu.Lock()
	s.remote = r
	s.mu.Unlock()
	return s, nil
}

// Leave leaves the cluster gracefully: the node's regions hand their
// shards off and its singletons hand over (membership.Cluster.Leave),
// then, for a node Join started, the membership closes and the remote
// stops. The actor system itself stays up.
func (s *Sharding) Leave(ctx context.Context) error {
	err := s.cluster.Leave(ctx)
	s.mu.Lock()
	r := s.remote
	s.remote = nil
	s.mu.Unlock()
	if r != nil {
		s.cluster.Close()
		r.Shutdown(true)
	}
	if err != nil {
		return fmt.Errorf("actorsharding: Leave: %w", err)
	}
	return nil
}
