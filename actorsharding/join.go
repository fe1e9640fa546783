package actorsharding

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/protoshard/protoshard/internal/shardingconfig"
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
	remote     []remote.ConfigOption
	tracing    []TracingOption
}

// WithAddress is where the node's remote listens: host and port (0: any
// free port). Default 127.0.0.1, port 0.
func WithAddress(host string, port int) JoinOption {
	return func(c *joinConfig) { c.host, c.port = host, port }
}

// WithMembership is how the node finds the others: a membership.Provider,
// such as membership/consul's. Without it, the membership is an in-process
// registry shared by the actor systems of this process that join without
// this option, and Join accepts only a remote that listens on and
// advertises a loopback address (127.0.0.0/8, ::1, localhost): a node that
// other hosts can reach would otherwise be a cluster of its own, and every
// process started so would run every entity. Join fails with
// ErrNoMembership for any other.
func WithMembership(provider membership.Provider) JoinOption {
	return func(c *joinConfig) { c.provider = provider }
}

// WithRemoteOptions passes proto.actor's remote options to the remote Join
// starts: remote.WithAdvertisedHost (the host:port other nodes dial, behind
// NAT or in a container), remote.WithServerOptions (TLS credentials,
// grpc.MaxRecvMsgSize), remote.WithDialOptions, the endpoint batch and
// queue sizes (Join's queue starts at 4096 slots, not proto.actor's million, unless
// remote.WithEndpointWriterQueueSize says otherwise; both sizes must be at
// least 1)... Join applies them in order, then the quarantine's option,
// which adds its gRPC interceptors to the server and dial options they
// set, so none of them can remove the quarantine. The host and port are
// WithAddress's. remote.WithDialOptions replaces proto.actor's default
// dial options, grpc.WithInsecure() among them: give it the transport
// credentials (credentials.NewTLS(...), or insecure.NewCredentials()).
func WithRemoteOptions(opts ...remote.ConfigOption) JoinOption {
	return func(c *joinConfig) { c.remote = append(c.remote, opts...) }
}

// WithMembershipConfig sets the node's membership settings: its roles,
// what it does when it finds itself removed, the down-removal margin...
// Join sets the quarantine itself.
func WithMembershipConfig(cfg membership.Config) JoinOption {
	return func(c *joinConfig) { c.membership = cfg }
}

// WithTracing configures the node's tracing as New's options do
// (WithTracerProvider, WithPropagator).
func WithTracing(opts ...TracingOption) JoinOption {
	return func(c *joinConfig) { c.tracing = append(c.tracing, opts...) }
}

// noHost is proto.actor's address of a system whose remote has not
// started.
const noHost = "nonhost"

// processRegistry is the in-process membership of Join without
// WithMembership.
var processRegistry = sync.OnceValue(local.NewRegistry)

// ErrNoMembership is returned by Join without WithMembership for a remote
// that listens on or advertises an address other hosts can reach.
var ErrNoMembership = errors.New("no membership for a remote that other hosts can reach: " +
	"without WithMembership, Join's in-process membership would make each process a cluster of its own; " +
	"pass WithMembership (such as membership/consul's provider), or listen on a loopback address")

// ErrRemoteStarted is returned by Join for an actor system whose remote
// runs already: Join must install the quarantine in the remote it starts.
// Build the membership.Cluster yourself and call New instead.
var ErrRemoteStarted = errors.New("the actor system's remote is started already")

// Join makes system a node of a protoshard cluster and returns its
// Sharding: it starts proto.actor's remote on system (see WithAddress,
// WithRemoteOptions), with the quarantine that fences removed members;
// joins the membership (see WithMembership: in-process, on a loopback
// address only, by default); and waits until this node is a member or
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
	if system.Address() != noHost {
		return nil, fmt.Errorf("actorsharding: Join: %w (%s)", ErrRemoteStarted, system.Address())
	}
	quarantine := membership.NewQuarantine()
	rcfg, err := cfg.remoteConfig(quarantine)
	if err != nil {
		return nil, fmt.Errorf("actorsharding: Join: %w", err)
	}
	if cfg.provider == nil {
		if addr, ok := loopbackOnly(rcfg); !ok {
			return nil, fmt.Errorf("actorsharding: Join: %w (the remote would be at %s)", ErrNoMembership, addr)
		}
		cfg.provider = processRegistry().Provider()
		system.Logger().Info("actorsharding: in-process membership: the cluster holds only this process's actor systems that joined without WithMembership")
	}
	r := remote.NewRemote(system, rcfg)
	// The remote first: a member is known by its address, "nonhost"
	// until the remote listens.
	if err := startRemote(r); err != nil {
		return nil, fmt.Errorf("actorsharding: Join: %w", err)
	}
	mcfg := cfg.membership
	mcfg.Quarantine = quarantine
	cluster := membership.NewCluster(system, cfg.provider, mcfg)
	if err := cluster.Join(ctx); err != nil {
		cluster.Close()
		r.Shutdown(false)
		return nil, fmt.Errorf("actorsharding: Join: %w", err)
	}
	s, err := New(system, cluster, cfg.tracing...)
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

// remoteConfig is the config of the remote Join starts: its defaults, then
// the user's options, which may override them, then the quarantine's.
func (c joinConfig) remoteConfig(q *membership.Quarantine) (*remote.Config, error) {
	opts := append([]remote.ConfigOption{remote.WithEndpointWriterQueueSize(shardingconfig.EndpointWriterQueueSize)}, c.remote...)
	rcfg := remote.Configure(c.host, c.port, append(opts, q.RemoteOption())...)
	// proto.actor's endpoint writer divides by the queue size and spins on
	// empty batches.
	if rcfg.EndpointWriterQueueSize < 1 || rcfg.EndpointWriterBatchSize < 1 {
		return nil, fmt.Errorf("endpoint writer queue size %d and batch size %d: both must be at least 1",
			rcfg.EndpointWriterQueueSize, rcfg.EndpointWriterBatchSize)
	}
	return rcfg, nil
}

// startRemote starts r. proto.actor's Remote.Start panics when it cannot
// listen (the port is taken, the host is not this machine's), before it
// has changed anything but grpc's logger: that is an error of Join's.
func startRemote(r *remote.Remote) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the remote cannot start: %v", p)
		}
	}()
	r.Start()
	return nil
}

// loopbackOnly reports whether the remote of cfg listens on a loopback
// address and advertises none other; if not, it returns the address that
// other hosts could reach.
func loopbackOnly(cfg *remote.Config) (string, bool) {
	if !isLoopback(cfg.Host) {
		return cfg.Address(), false
	}
	if cfg.AdvertisedHost == "" {
		return "", true
	}
	host, _, err := net.SplitHostPort(cfg.AdvertisedHost)
	if err != nil {
		host = cfg.AdvertisedHost
	}
	return cfg.AdvertisedHost, isLoopback(host)
}

// isLoopback reports whether host names this machine's loopback
// interface only ("": every interface). proto.actor joins host and port
// with a colon, so an IPv6 host comes in brackets.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return ip != nil && ip.IsLoopback()
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
