// Package actorsharding is the entry point of protoshard: Akka's Cluster
// Sharding for proto.actor. Start one region per node and entity type with
// Sharding.StartRegion, then send messages for entities to the region's
// PID: the region finds the entity's shard home through the coordinator (a
// cluster singleton), starts the entity on demand there and forwards the
// message, with its sender, so a RequestFuture gets the entity's Respond.
// Shards move when nodes join, leave or crash; an entity never runs twice
// at the same time.
package actorsharding

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/extensions"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/internal/coordinator"
	"github.com/protoshard/protoshard/internal/deadletters"
	"github.com/protoshard/protoshard/internal/guard"
	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/internal/shardingadmin"
	"github.com/protoshard/protoshard/internal/shardingconfig"
	"github.com/protoshard/protoshard/internal/shardproto"
	"github.com/protoshard/protoshard/internal/staleness"
	"github.com/protoshard/protoshard/internal/storescope"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/singleton"
)

var extensionID = extensions.NextExtensionID()

// Sharding is Akka's ClusterSharding extension: one per actor system, with
// the regions and proxies started on it.
type Sharding struct {
	system  *actor.ActorSystem
	cluster *membership.Cluster

	mu      sync.Mutex
	regions map[string]*startedRegion
	// requests: EntityRef requests under way, for their drops' reasons.
	requests dropWatch
	// remote: the remote Join started, which Leave stops.
	remote *remote.Remote
	// tracing: how trace context goes with messages, and the tracer.
	tracing *tracing
}

type startedRegion struct {
	pid     *actor.PID
	proxy   bool
	role    string
	stopped chan struct{}
	// router routes on the senders' goroutines (EntityRef uses its routes).
	router *regionProcess
	// What it was started with, to tell a second start that differs.
	entityProps *actor.Props
	extractor   MessageExtractor
	settings    shardingconfig.Settings
}

// extension is the Sharding as proto.actor's extensions.Extension of its
// system (the method it needs stays off Sharding's API).
type extension struct{ *Sharding }

// ExtensionID implements extensions.Extension.
func (extension) ExtensionID() extensions.ExtensionID { return extensionID }

// New returns the Sharding of system, creating it on first use. cluster is
// the node's membership; it must be the same on every call for a system.
//
// The node's remote must have the quarantine (see membership.Quarantine),
// installed as Join does:
//
//	q := membership.NewQuarantine()
//	r := remote.NewRemote(system, remote.Configure(host, port, q.RemoteOption()))
//	cluster := membership.NewCluster(system, provider, membership.Config{Quarantine: q})
//
// Without it, what a removed member still sends is processed, and the
// remote keeps dialling removed members for good. New refuses such a node
// with an error wrapping membership.ErrNoQuarantine that says what is
// missing: the quarantine must be in the remote's gRPC options before the
// remote starts, so New cannot add it.
//
// opts configure tracing (WithTracerProvider, WithPropagator); they apply
// when New creates the Sharding; a later New on the same system with
// options is refused (the first one chose).
func New(system *actor.ActorSystem, cluster *membership.Cluster, opts ...TracingOption) (*Sharding, error) {
	if system == nil || cluster == nil {
		return nil, errors.New("actorsharding: New needs an actor system and a membership cluster")
	}
	if ext, ok := system.Extensions.Get(extensionID).(extension); ok {
		s := ext.Sharding
		if s.cluster != cluster {
			return nil, errors.New("actorsharding: this actor system already has a Sharding with another membership cluster")
		}
		if len(opts) > 0 {
			// The first New chose the system's tracing; silently keeping it
			// would surprise a caller that passed other options.
			return nil, errors.New("actorsharding: this actor system already has a Sharding; its tracing options are set by the first New (or Join)")
		}
		return s, nil
	}
	if err := membershiphook.Of(cluster).CheckQuarantine(); err != nil {
		return nil, fmt.Errorf("actorsharding: New: %w", err)
	}
	s := &Sharding{system: system, cluster: cluster, regions: map[string]*startedRegion{}, tracing: newTracing(opts)}
	system.Extensions.Register(extension{s})
	staleness.Set(system, membershiphook.Of(cluster).Stale)
	deadletters.ReportUndelivered(system, undeliveredReason(system))
	system.EventStream.Subscribe(releaseUndelivered)
	system.EventStream.Subscribe(s.requests.observe)
	return s, nil
}

// undeliveredReason explains the sharding messages that proto.actor could
// not deliver (its dead letters carry no reason): a region on a node that
// crashed or was removed (the remote cannot reach it, or the quarantine
// refuses it), or a local shard or region that stopped meanwhile.
func undeliveredReason(system *actor.ActorSystem) func(*actor.DeadLetterEvent) string {
	return func(dl *actor.DeadLetterEvent) string {
		if dl.PID != nil && isRegionEntry(dl.PID.Id) && dl.PID.GetAddress() == system.Address() {
			return fmt.Sprintf("sharding: message forwarded to %s, the region of an earlier incarnation of this node (removed since); dropped so it cannot overtake its sender's later messages",
				dl.PID.Id)
		}
		switch dl.Message.(type) {
		case *messages.ShardingEnvelope, *messages.StartEntity, *shardproto.Deliver:
		default:
			if dl.PID == nil || !isRegionEntry(dl.PID.Id) {
				return ""
			}
		}
		if dl.PID != nil && dl.PID.GetAddress() != system.Address() {
			return fmt.Sprintf("sharding: the region at %s could not be reached: its node crashed, was removed from the cluster, or is shutting down",
				dl.PID.GetAddress())
		}
		return fmt.Sprintf("sharding: %v stopped before the message reached it", dl.PID)
	}
}

// releaseUndelivered ends the pending mark of a Deliver that proto.actor
// could not deliver (its shard stopped meanwhile): left pending, it would
// keep the shard's later messages off the direct route for good.
func releaseUndelivered(evt any) {
	if dl, ok := evt.(*actor.DeadLetterEvent); ok {
		if d, ok := dl.Message.(*shardproto.Deliver); ok {
			d.Pending.Release()
		}
	}
}

// ErrAlreadyStarted is returned by StartRegion and StartProxy for an entity
// type started on this node before with other entity props, extractor or
// settings (the same again returns the running region).
var ErrAlreadyStarted = errors.New("the entity type was started on this node with other props, extractor or settings")

// ErrNotJoined is returned by StartRegion and StartProxy before the node's
// membership.Cluster joined: the region could not register with the
// coordinator, and its messages would wait in its buffer until they time
// out. Join first.
var ErrNotJoined = errors.New("the cluster has not joined yet: call membership.Cluster.Join before starting regions")

// ErrNoStateStore is returned by StartRegion and StartProxy when the
// coordinator needs a state store and there is no safe default: see
// WithStateStore.
var ErrNoStateStore = errors.New("no coordinator StateStore: with membership whose nodes may run in other processes, " +
	"give every node the same store (WithStateStore(consulstore.NewStateStore(client, sharding.Cluster().Name(), typeName)))")

// ErrStoreMismatch is returned by StartRegion and StartProxy (and the
// delivery producer controller) for a store made for another cluster or
// entity type: a store of actorsharding/consulstore keeps its keys under
// the cluster's name, and one made with another cluster's name would share
// that cluster's keys. Make it with the cluster's Name():
// consulstore.NewStateStore(client, sharding.Cluster().Name(), typeName).
var ErrStoreMismatch = storescope.ErrMismatch

// defaultStateStore is the memory store of typeName that every node of an
// in-process member list shares.
func (s *Sharding) defaultStateStore(typeName string) (coordinatoractor.StateStore, error) {
	v, ok := membershiphook.Of(s.cluster).SharedValue("actorsharding/state-store/"+typeName, func() any { return coordinatoractor.NewMemoryStore() })
	if !ok {
		return nil, fmt.Errorf("actorsharding: %q: %w", typeName, ErrNoStateStore)
	}
	store, ok := v.(coordinatoractor.StateStore)
	if !ok {
		return nil, fmt.Errorf("actorsharding: %q: the shared value under the state store's key is a %T", typeName, v)
	}
	return store, nil
}

// StartRegion starts the ShardRegion of typeName on this node and returns
// its PID. Entities are created from entityProps, on demand, as children
// of their shard. The coordinator's singleton manager starts with it. If
// the member lacks the settings' role, a proxy is started instead (as
// Akka). Starting a started type returns the existing region.
func (s *Sharding) StartRegion(typeName string, entityProps *actor.Props, extractor MessageExtractor, opts ...Option) (*actor.PID, error) {
	if entityProps == nil {
		return nil, fmt.Errorf("actorsharding: StartRegion %q: entity props are nil", typeName)
	}
	return s.start(typeName, entityProps, extractor, opts)
}

// StartProxy starts a region of typeName that routes messages to entities
// but hosts none (Akka's startProxy). If this member has the settings'
// role, the coordinator's singleton manager starts too, so a proxy node
// that is the oldest can still run the coordinator.
func (s *Sharding) StartProxy(typeName string, extractor MessageExtractor, opts ...Option) (*actor.PID, error) {
	return s.start(typeName, nil, extractor, opts)
}

func (s *Sharding) start(typeName string, entityProps *actor.Props, extractor MessageExtractor, opts []Option) (*actor.PID, error) {
	if typeName == "" {
		return nil, errors.New("actorsharding: empty type name")
	}
	if strings.Contains(typeName, "/") {
		// The region is the actor "sharding/<type>" and its shards its
		// children: type "a/b" would be the shard "b" of type "a".
		return nil, fmt.Errorf("actorsharding: type name %q holds a '/'", typeName)
	}
	if extractor == nil {
		extractor = NewHashCodeMessageExtractor(defaultNumberOfShards)
	}
	identity, err := identityOf(extractor)
	if err != nil {
		return nil, fmt.Errorf("actorsharding: %q: %w", typeName, err)
	}
	requestedProps := entityProps
	settings := shardingconfig.Default()
	for _, o := range opts {
		o(&settings)
	}
	settings = settings.WithDefaults()
	asked := settings
	settings.Shard.MemberStale = membershiphook.Of(s.cluster).Stale
	if settings.Coordinator.Tracer == nil {
		settings.Coordinator.Tracer = s.tracing.tracer()
	}

	if err := storescope.Check("coordinator state store", settings.StateStore, s.cluster.Name(), typeName); err != nil {
		return nil, fmt.Errorf("actorsharding: %q: %w", typeName, err)
	}
	if err := storescope.Check("remember-entities store", settings.Shard.RememberEntitiesStore, s.cluster.Name(), typeName); err != nil {
		return nil, fmt.Errorf("actorsharding: %q: %w", typeName, err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.regions[typeName]; ok {
		if r.entityProps != entityProps || !reflect.DeepEqual(r.extractor, extractor) || !reflect.DeepEqual(r.settings, asked) {
			return nil, fmt.Errorf("actorsharding: %q: %w", typeName, ErrAlreadyStarted)
		}
		return r.pid, nil
	}
	if s.cluster.Self().ID == "" {
		return nil, fmt.Errorf("actorsharding: %q: %w", typeName, ErrNotJoined)
	}
	hasRole := settings.Role == "" || s.cluster.Self().HasRole(settings.Role) || hasConfiguredRole(s.cluster, settings.Role)
	if !hasRole {
		entityProps = nil
	}
	if hasRole {
		if settings.StateStore == nil {
			store, err := s.defaultStateStore(typeName)
			if err != nil {
				return nil, err
			}
			settings.StateStore = store
		}
		props := coordinator.SupervisorProps(
			coordinator.Props(typeName, s.cluster, settings.Coordinator, settings.AllocationStrategy, settings.StateStore),
			settings.Coordinator.CoordinatorFailureBackoff)
		if _, err := singleton.StartManager(s.system, s.cluster, props, shardingadmin.CoordinatorManagerName(typeName), coordinatorSingletonOptions(settings)...); err != nil {
			return nil, fmt.Errorf("actorsharding: start coordinator of %q: %w", typeName, err)
		}
	}
	proxy, err := singleton.StartProxy(s.system, s.cluster, shardingadmin.CoordinatorManagerName(typeName),
		singleton.WithSingletonName(shardingconfig.CoordinatorSingletonName), singleton.WithRole(settings.Role))
	if err != nil {
		return nil, fmt.Errorf("actorsharding: start coordinator proxy of %q: %w", typeName, err)
	}
	stopped := make(chan struct{})
	routes := newRouteTable(s.system, typeName)
	router := &regionProcess{table: routes, extractor: extractor, cluster: s.cluster, stale: membershiphook.Of(s.cluster).Stale, typeName: typeName, hosting: entityProps != nil,
		maxMessageSize: settings.MaxMessageSize}
	spawned, err := s.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return &region{
			typeName:         typeName,
			entityProps:      entityProps,
			extractor:        extractor,
			identity:         identity,
			settings:         settings,
			cluster:          s.cluster,
			coordinatorProxy: proxy,
			stopped:          stopped,
			routes:           routes,
			router:           router,
		}
	}, guard.WithMailbox()), shardingadmin.RegionName(typeName))
	if err != nil {
		s.system.Root.Stop(proxy)
		return nil, fmt.Errorf("actorsharding: start region %q: %w", typeName, err)
	}
	pid, err := installRouter(s.system, spawned, router)
	if err != nil {
		s.system.Root.Stop(spawned)
		s.system.Root.Stop(proxy)
		return nil, fmt.Errorf("actorsharding: start region %q: %w", typeName, err)
	}
	s.regions[typeName] = &startedRegion{pid: pid, proxy: entityProps == nil, role: settings.Role, stopped: stopped, router: router,
		entityProps: requestedProps, extractor: extractor, settings: asked}
	if entityProps != nil {
		membershiphook.Of(s.cluster).RegisterLeaveHookIn(membershiphook.LeavePhaseShardingShutdownRegion, "sharding region "+typeName, func(ctx context.Context) error {
			return s.gracefulShutdown(ctx, pid, stopped, settings.GracefulShutdownTimeout)
		})
	}
	return pid, nil
}

// hasConfiguredRole covers a region started before the member joined:
// Self() is empty then, so the configured roles decide.
func hasConfiguredRole(c *membership.Cluster, role string) bool {
	return c.Self().ID == "" && membershiphook.Of(c).HasConfiguredRole(role)
}

// coordinatorSingletonOptions are the options of the coordinator's
// singleton managers: the user's, then the name and role they must have.
func coordinatorSingletonOptions(settings shardingconfig.Settings) []singleton.Option {
	return append(append([]singleton.Option{}, settings.Singleton.Options...),
		singleton.WithSingletonName(shardingconfig.CoordinatorSingletonName), singleton.WithRole(settings.Role))
}

// gracefulShutdown hands off the region's shards and waits until it has
// stopped: the node's membership leave waits for it (Akka's coordinated
// shutdown phase cluster-sharding-shutdown-region).
func (s *Sharding) gracefulShutdown(ctx context.Context, pid *actor.PID, stopped chan struct{}, timeout time.Duration) error {
	s.system.Root.Send(pid, &messages.GracefulShutdown{})
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("shard region %s graceful shutdown: %w", pid.Id, ctx.Err())
	case <-t.C:
		return fmt.Errorf("shard region %s graceful shutdown: not done after %v", pid.Id, timeout)
	}
}

// Region returns the region (or proxy) of typeName started on this system.
func (s *Sharding) Region(typeName string) (*actor.PID, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.regions[typeName]
	if !ok {
		return nil, false
	}
	return r.pid, true
}

// regionList lists the regions and proxies started on this system, by type
// name: what admin tools (package management) report on.
func (s *Sharding) regionList() []shardingadmin.Region {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]shardingadmin.Region, 0, len(s.regions))
	for name, r := range s.regions {
		out = append(out, shardingadmin.Region{TypeName: name, PID: r.pid, Proxy: r.proxy, Role: r.role})
	}
	slices.SortFunc(out, func(a, b shardingadmin.Region) int { return strings.Compare(a.TypeName, b.TypeName) })
	return out
}

func init() {
	shardingadmin.Regions = func(system *actor.ActorSystem) []shardingadmin.Region {
		if s, ok := system.Extensions.Get(extensionID).(extension); ok {
			return s.regionList()
		}
		return nil
	}
}

// System returns the actor system the Sharding belongs to.
func (s *Sharding) System() *actor.ActorSystem { return s.system }

// Cluster returns the membership the Sharding was created with.
func (s *Sharding) Cluster() *membership.Cluster { return s.cluster }

// GracefulShutdown hands off the shards of typeName's region and waits until
// it has stopped (or ctx ends). Sending messages.GracefulShutdown to the
// region does the same without waiting.
func (s *Sharding) GracefulShutdown(ctx context.Context, typeName string) error {
	s.mu.Lock()
	r, ok := s.regions[typeName]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("actorsharding: no region %q", typeName)
	}
	return s.gracefulShutdown(ctx, r.pid, r.stopped, 24*time.Hour)
}
