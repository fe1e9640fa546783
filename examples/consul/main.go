// Command consul runs one cluster sharding node per OS process, with the
// membership and the coordinator's state in a real Consul. Start several of
// them against one Consul agent and watch the Counter shards spread over
// them, move away from a node killed with kill -9 (after the Consul TTL and
// the removal margin) and be handed off by a node that stops gracefully
// (Ctrl-C or SIGTERM: Sharding.Leave). See README.md next to this file.
//
//	go run ./examples/consul -name node-1 -send 200
//	go run ./examples/consul -name node-2
//	go run ./examples/consul -name node-3
//
// The first line a node prints carries its pid. Every few seconds it prints
// the shards it hosts ("hosting:") and the coordinator's view of the whole
// cluster ("cluster:"); with -send N it also sends N requests a second to
// random counter entities through its region and prints one "sent:" line a
// second. PROTOSHARD_LOG=1 (or debug) shows the node's logs on stderr.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/actorsharding/consulstore"
	"github.com/protoshard/protoshard/examples/sharding/counterpb"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/consul"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/shardeddaemonprocess"
	daemonstore "github.com/protoshard/protoshard/shardeddaemonprocess/consulstore"
	"github.com/protoshard/protoshard/singleton"
)

const (
	// typeName is the entity type: one region per node and type.
	typeName = "Counter"
	// serviceName is the Consul service every node of this example
	// registers as.
	serviceName = "protoshard-consul-example"
	// nameRolePrefix marks the role that carries a node's name, so that the
	// cluster view can name nodes instead of printing their addresses. The
	// sharding role is "" (every member), so the extra role changes nothing.
	nameRolePrefix = "name:"
)

// config is what a node does; main fills it from the flags.
type config struct {
	consulAddr string
	name       string
	host       string
	port       int
	advertise  string
	send       int
	entities   int
	shards     int
	ttl        time.Duration
	statsEvery time.Duration
	timeout    time.Duration
	daemon     int
}

func main() {
	defaultAddr := os.Getenv("CONSUL_HTTP_ADDR")
	if defaultAddr == "" {
		defaultAddr = "127.0.0.1:8500"
	}
	var cfg config
	flag.StringVar(&cfg.consulAddr, "consul", defaultAddr, "Consul HTTP address (default $CONSUL_HTTP_ADDR, else 127.0.0.1:8500)")
	flag.StringVar(&cfg.name, "name", "", "this node's name (default node-<pid>)")
	flag.StringVar(&cfg.host, "host", "127.0.0.1", "proto.actor remote host to listen on")
	flag.IntVar(&cfg.port, "port", 0, "proto.actor remote port (0: any free port)")
	flag.StringVar(&cfg.advertise, "advertise", "", "host:port the other nodes dial, behind NAT or in a container (default: the listen address)")
	flag.IntVar(&cfg.send, "send", 0, "requests per second this node sends to random entities (0: none)")
	flag.IntVar(&cfg.entities, "entities", 1000, "number of counter entities, counter-0 and up")
	flag.IntVar(&cfg.shards, "shards", 100, "number of shards (the same on every node)")
	flag.DurationVar(&cfg.ttl, "ttl", 5*time.Second, "Consul health check TTL; also the singleton removal margin")
	flag.DurationVar(&cfg.statsEvery, "stats", 3*time.Second, "how often to print the hosted shards and the cluster view")
	flag.DurationVar(&cfg.timeout, "timeout", 2*time.Second, "timeout of one request")
	flag.IntVar(&cfg.daemon, "daemon", 0, "also run a sharded daemon process of this many partition workers (0: none; the same on every node)")
	flag.Parse()
	if cfg.name == "" {
		cfg.name = fmt.Sprintf("node-%d", os.Getpid())
	}
	if cfg.entities < 1 || cfg.shards < 1 || cfg.send < 0 || cfg.daemon < 0 {
		fmt.Fprintln(os.Stderr, "error: -entities and -shards must be positive, -send and -daemon not negative")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "%s: error: %v\n", cfg.name, err)
		os.Exit(1)
	}
}

// counter is the entity: it counts the Increments it received in this
// incarnation and answers each with the count and its node's name.
type counter struct {
	node        string
	incarnation string
	count       int64
}

func (c *counter) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		var b [8]byte
		_, _ = rand.Read(b[:])
		c.incarnation = hex.EncodeToString(b[:])
	case *counterpb.Increment:
		c.count++
		ctx.Respond(&counterpb.Counted{EntityId: msg.EntityId, Count: c.count, Node: c.node, Incarnation: c.incarnation})
	}
}

// logging keeps the node quiet unless PROTOSHARD_LOG is set ("debug" for
// the debug level).
func logging(node string) *slog.Logger {
	level := slog.LevelInfo
	switch os.Getenv("PROTOSHARD_LOG") {
	case "", "0":
		return slog.New(slog.DiscardHandler)
	case "debug":
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With(slog.String("node", node))
}

// printer serialises the lines of the node's goroutines.
type printer struct {
	mu   sync.Mutex
	out  io.Writer
	name string
}

func (p *printer) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, "%s %s: %s\n", time.Now().Format("15:04:05.000"), p.name, fmt.Sprintf(format, args...))
}

// node is this process's member.
type node struct {
	cfg     config
	p       *printer
	system  *actor.ActorSystem
	cluster *membership.Cluster
	region  *actor.PID
}

// run joins the cluster, starts the region, prints and sends until ctx is
// cancelled (a signal), then leaves gracefully.
func run(ctx context.Context, out io.Writer, cfg config) error {
	p := &printer{out: out, name: cfg.name}
	logger := logging(cfg.name)

	clientCfg := api.DefaultConfig()
	clientCfg.Address = cfg.consulAddr
	client, err := api.NewClient(clientCfg)
	if err != nil {
		return fmt.Errorf("consul client: %w", err)
	}

	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	defer system.Shutdown()
	provider, err := consul.New(consul.WithClient(client), consul.WithServiceName(serviceName), consul.WithTTL(cfg.ttl))
	if err != nil {
		return err
	}
	joinOpts := []actorsharding.JoinOption{
		actorsharding.WithAddress(cfg.host, cfg.port),
		actorsharding.WithMembership(provider),
		actorsharding.WithMembershipConfig(membership.Config{Roles: []string{nameRolePrefix + cfg.name}}),
	}
	if cfg.advertise != "" {
		// Behind NAT or in a container: the address the other nodes dial.
		joinOpts = append(joinOpts, actorsharding.WithRemoteOptions(remote.WithAdvertisedHost(cfg.advertise)))
	}
	// Join starts the remote, with the quarantine that fences this node
	// against removed members, and joins through Consul.
	jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	sharding, err := actorsharding.Join(jctx, system, joinOpts...)
	cancel()
	if err != nil {
		return fmt.Errorf("join (is Consul running at %s?): %w", cfg.consulAddr, err)
	}
	cluster := sharding.Cluster()
	p.printf("pid=%d address=%s consul=%s service=%s", os.Getpid(), system.Address(), cfg.consulAddr, serviceName)
	p.printf("joined as member %s; %d members: %s", cluster.Self().ID, len(cluster.Members()), memberNames(cluster.Members()))

	props := actor.PropsFromProducer(func() actor.Actor { return &counter{node: cfg.name} })
	region, err := sharding.StartRegion(typeName, props,
		actorsharding.NewHashCodeMessageExtractor(cfg.shards),
		// Every node shares the coordinator's state in one Consul key, so it
		// survives the coordinator's node (check-and-set writes).
		actorsharding.WithStateStore(consulstore.NewStateStore(client, sharding.Cluster().Name(), typeName)),
		// A new oldest node waits this long after the old one was removed by
		// failure detection before it starts the coordinator: at least the
		// TTL, so that the removed node has fenced itself by then.
		actorsharding.WithCoordinatorSingleton(singleton.WithRemovalMargin(cfg.ttl), singleton.WithHandOverRetryInterval(500*time.Millisecond)),
		// Akka's 10s default is for production; a demo wants to see it.
		actorsharding.WithRebalanceInterval(2*time.Second),
		actorsharding.WithRetryInterval(500*time.Millisecond),
	)
	if err != nil {
		lctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return errors.Join(err, sharding.Leave(lctx))
	}
	n := &node{cfg: cfg, p: p, system: system, cluster: cluster, region: region}
	p.printf("region %s started: %d entities in %d shards", typeName, cfg.entities, cfg.shards)
	if cfg.daemon > 0 {
		if err := startDaemon(sharding, client, cfg, p); err != nil {
			lctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return errors.Join(err, sharding.Leave(lctx))
		}
	}

	var wg sync.WaitGroup
	loopCtx, stopLoops := context.WithCancel(ctx)
	defer stopLoops()
	wg.Add(1)
	go func() { defer wg.Done(); n.statsLoop(loopCtx) }()
	if cfg.send > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); n.sendLoop(loopCtx) }()
	}

	<-ctx.Done()
	stopLoops()
	wg.Wait()
	p.printf("signal: leaving the cluster gracefully (handing off %s)", hostedSummary(n))
	start := time.Now()
	lctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// Leave hands the shards off, then stops the membership and the
	// remote; the deferred Shutdown stops the actor system.
	if err := sharding.Leave(lctx); err != nil {
		return fmt.Errorf("leave: %w", err)
	}
	p.printf("left the cluster after %v", time.Since(start).Round(10*time.Millisecond))
	return nil
}

// statsLoop prints, every cfg.statsEvery, the shards this node hosts and the
// coordinator's view of the cluster.
func (n *node) statsLoop(ctx context.Context) {
	t := time.NewTicker(n.cfg.statsEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n.p.printf("hosting: %s", hostedSummary(n))
		n.p.printf("cluster: %s", n.clusterView())
	}
}

// hostedSummary asks the local region for its stats.
func hostedSummary(n *node) string {
	res, err := n.system.Root.RequestFuture(n.region, &messages.GetShardRegionStats{}, 5*time.Second).Result()
	if err != nil {
		return fmt.Sprintf("unknown (%v)", err)
	}
	st, ok := res.(*messages.ShardRegionStats)
	if !ok {
		return fmt.Sprintf("unknown (answer %T)", res)
	}
	entities := 0
	for _, c := range st.Stats {
		entities += int(c)
	}
	return fmt.Sprintf("%d shards, %d entities", len(st.Stats), entities)
}

// clusterView asks the coordinator (through the local region) for every
// region's shards, and names the regions by their members' name roles.
func (n *node) clusterView() string {
	res, err := n.system.Root.RequestFuture(n.region, &messages.GetClusterShardingStats{TimeoutMillis: 2000}, 5*time.Second).Result()
	if err != nil {
		return fmt.Sprintf("unavailable (%v)", err)
	}
	st, ok := res.(*messages.ClusterShardingStats)
	if !ok {
		return fmt.Sprintf("unavailable (answer %T)", res)
	}
	names := map[string]string{}
	oldest := ""
	for i, m := range n.cluster.Members() {
		names[m.Address] = nameOf(m)
		if i == 0 {
			oldest = nameOf(m)
		}
	}
	type region struct {
		name   string
		shards int
		failed int
	}
	var regions []region
	total := 0
	for addr, rs := range st.Regions {
		name := names[addr]
		if name == "" {
			name = addr
		}
		regions = append(regions, region{name: name, shards: len(rs.Stats), failed: len(rs.Failed)})
		total += len(rs.Stats)
	}
	if len(regions) == 0 {
		return fmt.Sprintf("0 nodes: no regions known yet (the coordinator on %s is starting or recovering)", oldest)
	}
	sort.Slice(regions, func(i, j int) bool { return regions[i].name < regions[j].name })
	parts := make([]string, len(regions))
	for i, r := range regions {
		parts[i] = fmt.Sprintf("%s=%d", r.name, r.shards)
		if r.failed > 0 {
			parts[i] += fmt.Sprintf("(+%d not answering)", r.failed)
		}
	}
	return fmt.Sprintf("%d nodes, %d shards: %s [coordinator on %s]", len(regions), total, strings.Join(parts, " "), oldest)
}

// sendLoop sends cfg.send requests a second to random entities through the
// local region and prints how they went once a second.
func (n *node) sendLoop(ctx context.Context) {
	var (
		mu       sync.Mutex
		answered int
		failed   int
		byNode   = map[string]int{}
		lastErr  error
		inflight sync.WaitGroup
	)
	defer inflight.Wait()
	interval := time.Second / time.Duration(n.cfg.send)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	report := time.NewTicker(time.Second)
	defer report.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-report.C:
			mu.Lock()
			parts := make([]string, 0, len(byNode))
			for name, c := range byNode {
				parts = append(parts, fmt.Sprintf("%s=%d", name, c))
			}
			sort.Strings(parts)
			line := fmt.Sprintf("sent: answered=%d failed=%d by: %s", answered, failed, strings.Join(parts, " "))
			if failed > 0 && lastErr != nil {
				line += fmt.Sprintf(" (last failure: %v)", lastErr)
			}
			answered, failed, byNode, lastErr = 0, 0, map[string]int{}, nil
			mu.Unlock()
			n.p.printf("%s", line)
		case <-tick.C:
			id := fmt.Sprintf("counter-%d", mrand.IntN(n.cfg.entities))
			inflight.Add(1)
			go func() {
				defer inflight.Done()
				res, err := n.system.Root.RequestFuture(n.region, &counterpb.Increment{EntityId: id}, n.cfg.timeout).Result()
				c, ok := res.(*counterpb.Counted)
				if err == nil && (!ok || c.EntityId != id) {
					err = fmt.Errorf("%s answered %T", id, res)
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed++
					if !errors.Is(err, context.Canceled) {
						lastErr = err
					}
					return
				}
				answered++
				byNode[c.Node]++
			}()
		}
	}
}

func nameOf(m membership.Member) string {
	for _, r := range m.Roles {
		if name, ok := strings.CutPrefix(r, nameRolePrefix); ok {
			return name
		}
	}
	return m.Address
}

func memberNames(ms []membership.Member) string {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = nameOf(m)
	}
	return strings.Join(names, ", ")
}

// daemonName is the sharded daemon process of -daemon.
const daemonName = "partitions"

// startDaemon runs cfg.daemon partition workers spread over the nodes, each
// printing when it starts and stops on this node. The count and its
// revision, and the workers' shard allocation, live in Consul, so they
// survive the node of the daemon's coordinator.
func startDaemon(sharding *actorsharding.Sharding, client *api.Client, cfg config, p *printer) error {
	worker := func(i int) *actor.Props {
		return actor.PropsFromFunc(func(c actor.Context) {
			switch c.Message().(type) {
			case *actor.Started:
				p.printf("daemon: partition worker %d started here", i)
			case *actor.Stopped:
				p.printf("daemon: partition worker %d stopped here", i)
			}
		})
	}
	cluster := sharding.Cluster().Name()
	_, err := shardeddaemonprocess.Init(sharding, daemonName, cfg.daemon, worker,
		shardeddaemonprocess.WithStore(daemonstore.NewStore(client, cluster, daemonName)),
		shardeddaemonprocess.WithKeepAliveInterval(2*time.Second),
		shardeddaemonprocess.WithShardingSettings(
			actorsharding.WithStateStore(consulstore.NewStateStore(client, cluster, shardeddaemonprocess.TypeName(daemonName))),
			actorsharding.WithCoordinatorSingleton(singleton.WithRemovalMargin(cfg.ttl), singleton.WithHandOverRetryInterval(500*time.Millisecond)),
		))
	if err != nil {
		return fmt.Errorf("sharded daemon process: %w", err)
	}
	p.printf("daemon: %d partition workers", cfg.daemon)
	return nil
}
