// Package shardeddaemonprocess runs a fixed number of workers spread over
// the cluster and keeps them running (Akka 2.9's ShardedDaemonProcess):
// one per Kafka partition, per projection, per tenant.
//
// Workers 0..N-1 are the entities of a dedicated entity type, one worker
// per shard, so the shard allocation spreads them over the members. Every
// member with the role runs a keep-alive pinger that starts each worker
// every keep-alive interval (WithKeepAliveInterval), so a worker whose
// member died starts again on another one. A coordinator singleton keeps
// the number of workers and its revision in a Store; each worker's entity
// ID is "revision|count|index" and a worker runs only after the
// coordinator confirmed that its revision is the current one. ChangeNumberOfProcesses stores a new revision,
// pauses the pingers, stops every worker of the previous revision and only
// then lets the new revision's workers start: at most one revision's
// workers run at any moment.
package shardeddaemonprocess

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/ask"
	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/internal/option"
	"github.com/protoshard/protoshard/internal/shardingconfig"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/singleton"
)

// ErrNoStore: Init without WithStore on a membership that shares no
// memory between its members (Consul): a coordinator that moves to
// another process would start over from revision 1 while the previous
// revision's workers still run.
var ErrNoStore = errors.New("shardeddaemonprocess: no store for the number of processes (use WithStore)")

// settings are Akka's ShardedDaemonProcessSettings; Options set them.
type settings struct {
	KeepAliveInterval time.Duration
	Role              string
	ShardingSettings  []actorsharding.Option
	Store             Store
	StopMessage       any
}

// defaultSettings are Akka's defaults.
func defaultSettings() settings {
	return settings{KeepAliveInterval: 10 * time.Second}
}

// Option configures Init, with Akka's names and defaults
// (ShardedDaemonProcessSettings).
type Option func(*settings) error

// ErrInvalidOption: an Option was given a value it does not accept.
var ErrInvalidOption = errors.New("shardeddaemonprocess: invalid option")

// WithKeepAliveInterval sets how often each member's pinger starts every
// worker (Akka's keep-alive-interval): the longest a worker whose member
// crashed waits, after its shard moved, to run again. Default 10s.
func WithKeepAliveInterval(d time.Duration) Option {
	return func(s *settings) error {
		s.KeepAliveInterval = d
		return option.Positive(ErrInvalidOption, "WithKeepAliveInterval", d)
	}
}

// WithRole runs the workers only on members with role (Akka's role).
// Default "": every member.
func WithRole(role string) Option {
	return func(s *settings) error { s.Role = role; return nil }
}

// WithShardingSettings adds options of the workers' entity type (Akka's
// shardingSettings). Its role is always WithRole's, its idle passivation
// always off, its hand-off stop message the worker's own. Default:
// actorsharding's defaults.
func WithShardingSettings(opts ...actorsharding.Option) Option {
	return func(s *settings) error { s.ShardingSettings = append(s.ShardingSettings, opts...); return nil }
}

// WithStopMessage sets the message sent to a worker's behavior when it
// must stop (its shard is handed off, or its revision ends), so that it
// can finish its work and then stop itself (Akka's stopMessage). Default:
// the behavior is stopped.
func WithStopMessage(msg any) Option {
	return func(s *settings) error {
		s.StopMessage = msg
		return option.NotNil(ErrInvalidOption, "WithStopMessage", "message", msg)
	}
}

// WithStore sets the store that keeps the number of processes and its
// revision. Default with in-process membership: one MemoryStore per daemon
// process shared by the members; with any other membership there is no
// default (Init fails with ErrNoStore): use consulstore.NewStore (package
// shardeddaemonprocess/consulstore), and give the workers' entity type a
// coordinator state store in WithShardingSettings as well
// (actorsharding.WithStateStore with TypeName(name)).
func WithStore(st Store) Option {
	return func(s *settings) error {
		s.Store = st
		return option.NotNil(ErrInvalidOption, "WithStore", "store", st)
	}
}

// NumberOfProcesses is Akka's NumberOfProcesses: the current number of
// workers, its revision (one more with every change), when that revision
// began, and whether a rescale is stopping the previous revision's
// workers.
type NumberOfProcesses struct {
	NumberOfProcesses int
	Revision          int64
	Started           time.Time
	RescaleInProgress bool
}

// ShardedDaemonProcess is one member's handle on a daemon process.
type ShardedDaemonProcess struct {
	system      *actor.ActorSystem
	name        string
	coordinator *actor.PID // the proxy of the coordinator singleton
}

// TypeName is the entity type of the workers of the daemon process name.
func TypeName(name string) string { return "sharded-daemon-process-" + name }

// coordinatorName is the singleton manager name of the coordinator.
func coordinatorName(name string) string { return TypeName(name) + "-coordinator" }

// Init starts the daemon process name on this member with
// numberOfInstances workers, worker i running behaviorFactory(i). Call it
// on every member with the same name, count and factory; the stored
// number of processes, once changed with ChangeNumberOfProcesses, wins
// over numberOfInstances.
func Init(sharding *actorsharding.Sharding, name string, numberOfInstances int, behaviorFactory func(id int) *actor.Props, opts ...Option) (*ShardedDaemonProcess, error) {
	switch {
	case name == "":
		return nil, errors.New("shardeddaemonprocess: Init needs a name")
	case numberOfInstances < 1:
		return nil, fmt.Errorf("shardeddaemonprocess: Init %q: %d: %w", name, numberOfInstances, ErrInvalidNumberOfProcesses)
	case behaviorFactory == nil:
		return nil, fmt.Errorf("shardeddaemonprocess: Init %q: nil behaviorFactory", name)
	}
	s := defaultSettings()
	if err := option.Apply(&s, opts, ErrInvalidOption); err != nil {
		return nil, fmt.Errorf("shardeddaemonprocess: Init %q: %w", name, err)
	}
	store, err := storeOf(sharding, name, s.Store)
	if err != nil {
		return nil, err
	}
	system, cluster := sharding.System(), sharding.Cluster()
	sh := shardingconfig.Default()
	shardingOpts := append(append([]actorsharding.Option{}, s.ShardingSettings...),
		actorsharding.WithRole(s.Role), actorsharding.WithPassivationIdleTimeout(-1),
		// The worker, not the system, stops its behavior at hand-off, so
		// that the behavior gets StopMessage.
		actorsharding.WithHandOffStopMessage(handOffWorker{}))
	for _, o := range shardingOpts {
		o(&sh)
	}
	// The proxy takes the name and role of the same options as the managers.
	singletonOpts := append(append([]singleton.Option{}, sh.Singleton.Options...), singleton.WithRole(s.Role))
	coordinator, err := singleton.StartProxy(system, cluster, coordinatorName(name), singletonOpts...)
	if err != nil {
		return nil, fmt.Errorf("shardeddaemonprocess: %q: %w", name, err)
	}
	d := &ShardedDaemonProcess{system: system, name: name, coordinator: coordinator}
	if !membershiphook.Of(cluster).HasConfiguredRole(s.Role) {
		return d, nil // a member without the role only asks and changes
	}
	retry := sh.RetryInterval
	if retry <= 0 {
		retry = shardingconfig.Default().RetryInterval
	}
	workerProps := actor.PropsFromProducer(func() actor.Actor {
		return &worker{coordinator: coordinator, factory: behaviorFactory, retryInterval: retry, stopMessage: s.StopMessage}
	})
	region, err := sharding.StartRegion(TypeName(name), workerProps, extractor{}, shardingOpts...)
	if err != nil {
		return nil, fmt.Errorf("shardeddaemonprocess: %q: %w", name, err)
	}
	coordinatorProps := actor.PropsFromProducer(func() actor.Actor {
		return &coordinatorActor{store: store, initialCount: numberOfInstances, region: region, retryInterval: retry}
	})
	if _, err := singleton.StartManager(system, cluster, coordinatorProps, coordinatorName(name), singletonOpts...); err != nil {
		return nil, fmt.Errorf("shardeddaemonprocess: %q: %w", name, err)
	}
	system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &keepAlivePinger{coordinator: coordinator, region: region, interval: s.KeepAliveInterval}
	}))
	return d, nil
}

// storeOf is st, or the default store of the daemon process name.
func storeOf(sharding *actorsharding.Sharding, name string, st Store) (Store, error) {
	if st != nil {
		return st, nil
	}
	v, ok := membershiphook.Of(sharding.Cluster()).SharedValue("shardeddaemonprocess/store/"+name, func() any { return NewMemoryStore() })
	if !ok {
		return nil, fmt.Errorf("shardeddaemonprocess: %q: %w", name, ErrNoStore)
	}
	store, ok := v.(Store)
	if !ok {
		return nil, fmt.Errorf("shardeddaemonprocess: %q: the shared value under the store's key is a %T", name, v)
	}
	return store, nil
}

// request sends msg to the coordinator and waits for its answer, as
// long as ctx allows (see package ask).
func (d *ShardedDaemonProcess) request(ctx context.Context, msg any) (any, error) {
	return ask.Request(ctx, d.system, d.coordinator, msg)
}

// ChangeNumberOfProcesses is Akka's ChangeNumberOfProcesses: it returns
// once the previous revision's workers have stopped and the new count is
// stored; the coordinator then starts the new revision's workers. It
// waits until ctx's deadline (10 s if ctx has none) or until ctx is
// cancelled, and then returns an error that wraps ctx.Err().
func (d *ShardedDaemonProcess) ChangeNumberOfProcesses(ctx context.Context, n int) error {
	if n < 1 {
		return fmt.Errorf("shardeddaemonprocess: %q: %d: %w", d.name, n, ErrInvalidNumberOfProcesses)
	}
	res, err := d.request(ctx, &messages.ChangeNumberOfProcesses{NumberOfProcesses: int32(n)})
	if err != nil {
		return fmt.Errorf("shardeddaemonprocess: %q: ChangeNumberOfProcesses(%d): %w", d.name, n, err)
	}
	r, ok := res.(*messages.ChangeNumberOfProcessesResult)
	switch {
	case !ok:
		return fmt.Errorf("shardeddaemonprocess: %q: ChangeNumberOfProcesses answered %T", d.name, res)
	case r.GetError() == ErrChangeInProgress.Error():
		return fmt.Errorf("shardeddaemonprocess: %q: %w", d.name, ErrChangeInProgress)
	case r.GetError() != "":
		return fmt.Errorf("shardeddaemonprocess: %q: ChangeNumberOfProcesses(%d): %s", d.name, n, r.GetError())
	}
	return nil
}

// GetNumberOfProcesses is Akka's GetNumberOfProcesses. It waits for the
// answer as ChangeNumberOfProcesses does.
func (d *ShardedDaemonProcess) GetNumberOfProcesses(ctx context.Context) (NumberOfProcesses, error) {
	res, err := d.request(ctx, &messages.GetNumberOfProcesses{})
	if err != nil {
		return NumberOfProcesses{}, fmt.Errorf("shardeddaemonprocess: %q: GetNumberOfProcesses: %w", d.name, err)
	}
	r, ok := res.(*messages.NumberOfProcesses)
	if !ok {
		return NumberOfProcesses{}, fmt.Errorf("shardeddaemonprocess: %q: GetNumberOfProcesses answered %T", d.name, res)
	}
	return NumberOfProcesses{
		NumberOfProcesses: int(r.GetNumberOfProcesses()),
		Revision:          r.GetRevision(),
		Started:           time.UnixMilli(r.GetStartedUnixMillis()),
		RescaleInProgress: r.GetRescaleInProgress(),
	}, nil
}
