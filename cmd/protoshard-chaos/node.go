package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/actorsharding/consulstore"
	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/durablestate"
	statestore "github.com/protoshard/protoshard/durablestate/consul"
	"github.com/protoshard/protoshard/internal/shardproto"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/lease"
	leaseconsul "github.com/protoshard/protoshard/lease/consul"
	"github.com/protoshard/protoshard/lease/consulcas"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/consul"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/singleton"
)

const (
	// typeName is the one sharded entity type of the run.
	typeName = "Chaos"
	// nodeRole marks the members that host entities and may run the
	// coordinator and the singleton; the load generator lacks it, so it
	// never runs either and is never a target of a fault.
	nodeRole = "node"
	// singletonName is the manager of the run's cluster singleton.
	singletonName = "chaos-singleton"
	// probeSender marks a probe: an entity answers it and records it as
	// activity, not as a numbered message.
	probeSender = "probe"
	// singletonTick is how often the singleton does its work (a ledger
	// record): a frozen singleton that wakes up and works shows it.
	singletonTick = 250 * time.Millisecond
	// singletonLifeTicks is the shortest life of one singleton incarnation,
	// in ticks (see singletonActor).
	singletonLifeTicks = 20
	// leaveTimeout bounds a node's graceful leave.
	leaveTimeout = 60 * time.Second
)

// Leases the coordinator and the singleton (and, with -shard-lease, the
// shards) can run on.
const (
	leaseCAS     = "cas"     // lease/consulcas: a compare-and-set record in Consul KV
	leaseSession = "session" // lease/consul: a Consul session holding a KV lock
	leaseNone    = "none"
)

const (
	// leaseRetryInterval is the singletons' and the shards' lease retry
	// interval: about the compare-and-set lease's renewal interval, as
	// caslease advises. Akka's 5s would add up to 5s to every failover.
	leaseRetryInterval = time.Second
	// sessionLeaseTTL is the session lease's TTL: Consul's minimum.
	sessionLeaseTTL = leaseconsul.MinSessionTTL
)

// newLeases returns the run's leases of kind under the keys of the run's
// cluster (protoshard/<cluster>/lease/), nil for leaseNone. The
// compare-and-set lease runs on its defaults (duration 5s, a renewal
// every second, margin 1s, drift 1%); the session lease on Consul's
// shortest TTL, renewed every second, with a lock delay that covers a
// renewal and an operation (the holder's time to stop).
func newLeases(kind string, client *api.Client, clusterName string) (lease.Provider, error) {
	switch kind {
	case leaseCAS:
		return consulcas.NewProvider(clusterName, consulcas.WithClient(client))
	case leaseSession:
		return leaseconsul.NewProvider(clusterName,
			leaseconsul.WithClient(client),
			leaseconsul.WithHeartbeatTimeout(sessionLeaseTTL),
			leaseconsul.WithHeartbeatInterval(time.Second),
			leaseconsul.WithOperationTimeout(time.Second),
			leaseconsul.WithSafetyMargin(2*time.Second),
			leaseconsul.WithLockDelay(3*time.Second))
	case leaseNone:
		return nil, nil
	}
	return nil, fmt.Errorf("unknown lease %q", kind)
}

// singletonOptions are the options of the coordinator's singleton and
// (with the node role) of the run's: a removal margin of one TTL (the
// default with Consul membership), hand-over retries every 500ms, and the
// lease, if any, retried every leaseRetryInterval.
func singletonOptions(ttl time.Duration, leases lease.Provider) []singleton.Option {
	opts := []singleton.Option{singleton.WithRemovalMargin(ttl), singleton.WithHandOverRetryInterval(500 * time.Millisecond)}
	if leases != nil {
		opts = append(opts, singleton.WithLease(leases), singleton.WithLeaseRetryInterval(leaseRetryInterval))
	}
	return opts
}

// allocationRecorder is an allocation strategy that writes each shard
// home it picks into the ledger (evAlloc): where the coordinator placed a
// shard is otherwise seen only once one of its entities starts there,
// never for a node that was cut off before any did.
type allocationRecorder struct {
	strategy coordinatoractor.ShardAllocationStrategy
	ledger   *ledger
}

func defaultAllocationStrategy() coordinatoractor.ShardAllocationStrategy {
	return coordinatoractor.NewLeastShardAllocationStrategy(coordinatoractor.DefaultRebalanceAbsoluteLimit, coordinatoractor.DefaultRebalanceRelativeLimit)
}

func (a allocationRecorder) AllocateShard(requester *actor.PID, shard string, current []coordinatoractor.RegionAllocation) *actor.PID {
	region := a.strategy.AllocateShard(requester, shard, current)
	if region != nil {
		a.ledger.write(Record{Ev: evAlloc, Shard: shard, Addr: region.Address})
	}
	return region
}

func (a allocationRecorder) Rebalance(current []coordinatoractor.RegionAllocation, inProgress map[string]struct{}) []string {
	return a.strategy.Rebalance(current, inProgress)
}

// shardingOptions are the settings of the entity type on every process:
// the coordinator's state in Consul KV (shared by all, under the run's
// cluster name), the coordinator's singleton settings (singletonSettings:
// on the run's lease, if any), the shards on the lease with shardLeases,
// retries and rebalances every few hundred milliseconds so that a
// fault's effects show within the run, and no passivation, so that an
// incarnation stops only because of sharding itself.
func shardingOptions(client *api.Client, clusterName string, ttl time.Duration, leases, shardLeases lease.Provider) []actorsharding.Option {
	opts := []actorsharding.Option{
		actorsharding.WithRole(nodeRole),
		actorsharding.WithStateStore(consulstore.NewStateStore(client, clusterName, typeName)),
		actorsharding.WithCoordinatorSingleton(singletonOptions(ttl, leases)...),
		actorsharding.WithRetryInterval(500 * time.Millisecond),
		actorsharding.WithRebalanceInterval(2 * time.Second),
		actorsharding.WithPassivationIdleTimeout(-1),
	}
	if shardLeases != nil {
		opts = append(opts, actorsharding.WithShardLease(shardLeases),
			actorsharding.WithShardLeaseRetryInterval(leaseRetryInterval))
	}
	return opts
}

// member is what every process of the run that joins the cluster has.
type member struct {
	name    string
	ledger  *ledger
	client  *api.Client
	system  *actor.ActorSystem
	remote  *remote.Remote
	cluster *membership.Cluster
}

// joinCluster starts an actor system with its remote on bind, subscribes
// the ledger to its dead letters and joins the Consul membership as a
// member with roles. A member fenced by failure detection joins again as
// a new member (RejoinAfterRemoval), so a paused or cut-off node comes back.
func joinCluster(cfg config, roles []string) (*member, error) {
	l, err := openLedger(ledgerPath(cfg.dir, cfg.name), cfg.name)
	if err != nil {
		return nil, err
	}
	ccfg := api.DefaultConfig()
	ccfg.Address, ccfg.Scheme, ccfg.Token = cfg.consulAddr, "http", ""
	client, err := api.NewClient(ccfg)
	if err != nil {
		return nil, fmt.Errorf("consul client: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With(slog.String("node", cfg.name))
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	system.EventStream.Subscribe(func(evt any) { recordDrop(l, evt) })
	quarantine := membership.NewQuarantine()
	r := remote.NewRemote(system, remote.Configure(cfg.bind, 0, quarantine.RemoteOption()))
	r.Start() // before membership: a member is known by its address
	m := &member{name: cfg.name, ledger: l, client: client, system: system, remote: r}
	provider, err := consul.New(consul.WithClient(client), consul.WithServiceName(cfg.service), consul.WithTTL(cfg.ttl))
	if err != nil {
		m.stop()
		return nil, fmt.Errorf("consul membership: %w", err)
	}
	m.cluster = membership.NewCluster(system, provider, membership.Config{Roles: roles, Quarantine: quarantine})
	watchMembership(m)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := m.cluster.Join(ctx); err != nil {
		m.stop()
		return nil, fmt.Errorf("join: %w", err)
	}
	return m, nil
}

// stop ends the member without a goodbye.
func (m *member) stop() {
	if m.cluster != nil {
		m.cluster.Close()
	}
	m.remote.Shutdown(false)
	m.system.Shutdown()
}

// watchMembership writes the membership events the member sees into its
// ledger: evidence of when a node saw itself or another removed.
func watchMembership(m *member) {
	m.system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch e := ctx.Message().(type) {
		case *actor.Started:
			m.cluster.Subscribe(ctx.Self())
		case membership.MemberUp:
			m.ledger.write(Record{Ev: evMember, Reason: "up", Addr: e.Member.Address, Member: e.Member.ID})
		case membership.MemberLeft:
			m.ledger.write(Record{Ev: evMember, Reason: "left", Addr: e.Member.Address, Member: e.Member.ID})
		case membership.MemberRemoved:
			kind := memberRemoved
			if e.Graceful {
				kind = "removed gracefully"
			}
			if e.Member.ID == m.cluster.Self().ID || e.Member.Address == m.system.Address() {
				kind += " (self)"
			}
			m.ledger.write(Record{Ev: evMember, Reason: kind, Addr: e.Member.Address, Member: e.Member.ID})
		}
	}))
}

// recordDrop writes a dead-letter event that names a numbered message (or
// a probe) into the ledger. protoshard publishes both a *deadletter.Event
// and proto.actor's *actor.DeadLetterEvent for each of its drops; proto.actor
// alone publishes the latter (a remote endpoint that is down, a PID that no
// longer exists).
func recordDrop(l *ledger, evt any) {
	var (
		msg         any
		src, reason string
	)
	switch e := evt.(type) {
	case *deadletter.Event:
		msg, src, reason = e.Message, srcDeadletter, e.Reason
	case *actor.DeadLetterEvent:
		msg, src = e.Message, srcProto
		if e.PID != nil {
			reason = "dead letter to " + e.PID.String()
		}
	default:
		return
	}
	p := numbered(msg, 0)
	if p == nil || isStateEntity(p.EntityId) {
		// An update request is judged by its answer (stateEntity), not
		// as a numbered message.
		return
	}
	r := Record{Ev: evDrop, Src: src, Reason: reason, Ent: p.EntityId}
	if p.From == probeSender {
		r.Probe = int(p.Seq)
	} else {
		r.Snd, r.Seq = p.From, p.Seq
	}
	l.write(r)
}

// numbered finds the run's message inside whatever a drop event carries:
// the message itself, a ShardingEnvelope, a shard's Deliver, reliable
// delivery's SequencedMessage, or proto.actor's envelope.
func numbered(msg any, depth int) *testpb.Ping {
	if depth > 4 {
		return nil
	}
	switch m := msg.(type) {
	case *testpb.Ping:
		return m
	case *messages.ShardingEnvelope:
		inner, err := m.GetMessage().UnmarshalNew()
		if err != nil {
			return nil
		}
		return numbered(inner, depth+1)
	case *shardproto.Deliver:
		return numbered(m.Message, depth+1)
	case *messages.SequencedMessage:
		inner, err := m.GetMessage().UnmarshalNew()
		if err != nil {
			return nil
		}
		return numbered(inner, depth+1)
	case *actor.MessageEnvelope:
		return numbered(m.Message, depth+1)
	}
	return nil
}

// incarnations numbers the activations of this process: an actor id can
// be used again (an entity started again in the same shard), a number
// cannot.
var incarnations atomic.Int64

func newIncarnation(node string, self *actor.PID) string {
	return fmt.Sprintf("%s|%s|%d", node, self.GetId(), incarnations.Add(1))
}

// entity records its lifecycle and every message it receives, and answers
// probes with its incarnation. One whose ID names a durable state entity
// (isStateEntity) keeps its state in durable and applies update requests
// (stateEntity) instead of recording receipts.
type entity struct {
	node    string
	ledger  *ledger
	durable durablestate.Store
	id      string
	inc     string
	state   *stateEntity
}

func (e *entity) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		id, err := actorsharding.EntityID(ctx)
		if err != nil {
			id = ctx.Self().GetId()
		}
		e.id, e.inc = id, newIncarnation(e.node, ctx.Self())
		e.ledger.write(Record{Ev: evStart, Ent: e.id, Inc: e.inc})
		if e.durable != nil && isStateEntity(e.id) {
			e.state = &stateEntity{node: e.node, id: e.id, inc: e.inc, ledger: e.ledger}
			e.state.recover(ctx, e.durable)
		}
	case *actor.Stopped:
		e.ledger.write(Record{Ev: evStop, Ent: e.id, Inc: e.inc})
	case *testpb.Ping:
		if msg.From == probeSender {
			answerProbe(ctx, e.ledger, e.node, e.id, e.inc, msg)
			return
		}
		if e.state != nil {
			e.state.update(ctx, msg)
			return
		}
		e.ledger.write(Record{Ev: evRecv, Ent: msg.EntityId, Inc: e.inc, Snd: msg.From, Seq: msg.Seq})
	}
}

// answerProbe records a probe as the activity of incarnation inc of
// entity id and answers it with the incarnation.
func answerProbe(ctx actor.Context, l *ledger, node, id, inc string, msg *testpb.Ping) {
	l.write(Record{Ev: evProbe, Ent: id, Inc: inc, Probe: int(msg.Seq)})
	if ctx.Sender() != nil {
		ctx.Respond(&testpb.Pong{EntityId: msg.EntityId, Seq: msg.Seq, Node: node, Incarnation: inc})
	}
}

// singletonActor records its lifecycle and a tick of work every
// singletonTick. After a random number of ticks (5 to 20 s of work) it
// stops itself, so that its manager starts it again after the restart
// back-off: a start that a pause or a cut can catch on the way, as a
// hand-over can.
type singletonActor struct {
	node   string
	ledger *ledger
	inc    string
	ticks  int // left before it stops itself
}

func (s *singletonActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		s.inc = newIncarnation(s.node, ctx.Self())
		s.ticks = singletonLifeTicks + rand.IntN(3*singletonLifeTicks)
		s.ledger.write(Record{Ev: evSStart, Inc: s.inc})
		ctx.SetReceiveTimeout(singletonTick)
	case *actor.ReceiveTimeout:
		s.ledger.write(Record{Ev: evSTick, Inc: s.inc})
		if s.ticks--; s.ticks <= 0 {
			ctx.Stop(ctx.Self())
			return
		}
		// proto.actor's receive timeout fires once: arm it again.
		ctx.SetReceiveTimeout(singletonTick)
	case *actor.Stopped:
		s.ledger.write(Record{Ev: evSStop, Inc: s.inc})
	}
}

// nodeMain is a node process: a member with the node role, a region of
// the entity type (its entity a reliableEntity in a reliable run) and the
// singleton's manager. It prints "READY <address>"
// once it serves, and on SIGTERM leaves the cluster gracefully (handing
// off its shards and the singleton) and exits.
func nodeMain(cfg config) int {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, os.Interrupt)
	m, err := joinCluster(cfg, []string{nodeRole, "name:" + cfg.name})
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", cfg.name, err)
		return 1
	}
	sharding, err := actorsharding.New(m.system, m.cluster)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", cfg.name, err)
		m.stop()
		return 1
	}
	durable := statestore.New(m.client, m.cluster.Name(), typeName)
	props := actor.PropsFromProducer(func() actor.Actor { return &entity{node: cfg.name, ledger: m.ledger, durable: durable} })
	if cfg.reliable {
		store, err := openCASStore(entityStoreDir(cfg.dir), storeLockWait)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", cfg.name, err)
			m.stop()
			return 1
		}
		props = actor.PropsFromProducer(func() actor.Actor { return &reliableEntity{node: cfg.name, ledger: m.ledger, store: store} })
	}
	// The leases live under the run's cluster name (its Consul service),
	// so that no other run's leases are in the way.
	leases, err := newLeases(cfg.lease, m.client, m.cluster.Name())
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: leases: %v\n", cfg.name, err)
		m.stop()
		return 1
	}
	var shardLeases lease.Provider
	if cfg.shardLease {
		shardLeases = leases
	}
	if _, err := sharding.StartRegion(typeName, props, actorsharding.NewHashCodeMessageExtractor(cfg.shards),
		append(shardingOptions(m.client, m.cluster.Name(), cfg.ttl, leases, shardLeases),
			actorsharding.WithAllocationStrategy(allocationRecorder{strategy: defaultAllocationStrategy(), ledger: m.ledger}))...); err != nil {
		fmt.Fprintf(os.Stderr, "%s: start region: %v\n", cfg.name, err)
		m.stop()
		return 1
	}
	sprops := actor.PropsFromProducer(func() actor.Actor { return &singletonActor{node: cfg.name, ledger: m.ledger} })
	sopts := append(singletonOptions(cfg.ttl, leases), singleton.WithRole(nodeRole))
	if _, err := singleton.StartManager(m.system, m.cluster, sprops, singletonName, sopts...); err != nil {
		fmt.Fprintf(os.Stderr, "%s: start singleton manager: %v\n", cfg.name, err)
		m.stop()
		return 1
	}
	self := m.cluster.Self()
	m.ledger.write(Record{Ev: evReady, Addr: m.system.Address(), Member: self.ID})
	fmt.Printf("READY %s %s\n", m.system.Address(), self.ID)

	<-term
	m.ledger.write(Record{Ev: evLeaving})
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	err = m.cluster.Leave(ctx)
	cancel()
	left := Record{Ev: evLeft}
	if err != nil {
		left.Reason = err.Error()
	}
	m.ledger.write(left)
	// Shards and singleton are handed off: nothing is left to deliver, and
	// a graceful remote shutdown would wait for connections to dead nodes.
	m.stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: leave: %v\n", cfg.name, err)
		return 1
	}
	return 0
}
