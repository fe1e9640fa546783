package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/actorsharding/consulstore"
	"github.com/protoshard/protoshard/internal/backoff"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/membership/consul"
)

const (
	remoteType = "BenchRemote"
	// statsName is the peer's actor that reports (From "count") or resets
	// (From "reset") the number of Pings its entities received.
	statsName = "bench-stats"
	// rawPrefix names the peer's plain actors, the raw remote baseline.
	rawPrefix = "raw-"
)

// remoteRegion is the protoshard side of the remote workloads: two nodes
// in two processes on loopback, with membership through a Consul agent.
// This process runs a proxy (it hosts nothing), the peer process the
// region with every entity, so every message crosses the wire. The peer
// also runs the stats actor that counts the Pings its actors receive and,
// in the remote section's role, plain actors of the entity type (raw).
type remoteRegion struct {
	node  *node
	proxy *actor.PID
	peer  *peerProcess
	raw   []*actor.PID
	stats *actor.PID
	msgs  []*testpb.Ping
}

// startRemoteRegion starts the remote section's remoteRegion and warms it
// up: every entity and raw actor has answered a request. Its stop ends
// both nodes.
func startRemoteRegion(ctx context.Context, cfg config, agent *consulAgent) (*remoteRegion, error) {
	return startRemoteRegionOf(ctx, cfg, agent, remoteType, remoteRole)
}

// startRemoteRegionOf starts a remoteRegion of typeName whose peer plays
// role; the peer of remoteRole also runs the raw actors.
func startRemoteRegionOf(ctx context.Context, cfg config, agent *consulAgent, typeName, role string) (*remoteRegion, error) {
	service := fmt.Sprintf("protoshard-bench-%d", os.Getpid())
	provider, err := consul.New(consul.WithClient(agent.client), consul.WithServiceName(service), consul.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, err
	}
	n, err := startNode(ctx, "remote-a", provider)
	if err != nil {
		return nil, err
	}
	ex := actorsharding.NewHashCodeMessageExtractor(cfg.shards)
	proxy, err := n.sharding.StartProxy(typeName, ex, remoteStateStore(agent.client, n.sharding.Cluster().Name(), typeName))
	if err != nil {
		n.stop()
		return nil, fmt.Errorf("start proxy: %w", err)
	}
	peer, err := startPeer(ctx, cfg, role, agent.addr, service)
	if err != nil {
		n.stop()
		return nil, err
	}
	r := &remoteRegion{node: n, proxy: proxy, peer: peer, stats: actor.NewPID(peer.address, statsName), msgs: pings("remote", cfg.entities)}
	if role == remoteRole {
		r.raw = make([]*actor.PID, len(r.msgs))
		for i := range r.raw {
			r.raw[i] = actor.NewPID(peer.address, fmt.Sprintf("%s%d", rawPrefix, i))
		}
	}
	if err := r.warmUp(ctx); err != nil {
		r.stop()
		return nil, err
	}
	return r, nil
}

func (r *remoteRegion) warmUp(ctx context.Context) error {
	if err := waitRegions(ctx, r.node.system, r.proxy, 1); err != nil {
		return err
	}
	if err := requestAll(r.node.system, r.msgs, func(int) *actor.PID { return r.proxy }); err != nil {
		return fmt.Errorf("warm-up through the region: %w", err)
	}
	if r.raw == nil {
		return nil
	}
	if err := requestAll(r.node.system, r.msgs, func(i int) *actor.PID { return r.raw[i] }); err != nil {
		return fmt.Errorf("warm-up of the raw actors: %w", err)
	}
	return nil
}

func (r *remoteRegion) stop() {
	r.peer.stop()
	r.node.stop()
}

// rate sends cfg.remoteMessages Pings fire-and-forget, round robin over
// the entities, each to target(entity); messages/s until all arrived.
func (r *remoteRegion) rate(ctx context.Context, cfg config, target func(entity int) *actor.PID) (float64, error) {
	return remoteRate(ctx, r.node.system, r.stats, cfg.remoteMessages, func(i int) error {
		e := i % len(r.msgs)
		r.node.system.Root.Send(target(e), r.msgs[e])
		return nil
	})
}

// regionRate is rate through the proxy.
func (r *remoteRegion) regionRate(ctx context.Context, cfg config) (float64, error) {
	return r.rate(ctx, cfg, func(int) *actor.PID { return r.proxy })
}

// regionLatencies are cfg.remoteSamples requests through the proxy, round
// robin over the entities.
func (r *remoteRegion) regionLatencies(cfg config) (p50, p99 float64, err error) {
	return latencies(cfg.remoteSamples, func(i int) error {
		return ask(r.node.system, r.proxy, r.msgs[i%len(r.msgs)])
	})
}

// benchRemote: the remoteRegion's fire-and-forget throughput and
// request/response latency through the region. Baseline: raw proto.actor
// remote Send and RequestFuture from this process to the plain actors in
// the peer.
func benchRemote(ctx context.Context, cfg config, rep *report) error {
	agent, err := startConsul()
	if err != nil {
		return err
	}
	defer agent.stop()
	r, err := startRemoteRegion(ctx, cfg, agent)
	if err != nil {
		return err
	}
	defer r.stop()

	var regionRates, rawRates series
	err = interleave(cfg.reps, regionRates.side("through the region", func() (float64, error) {
		return r.regionRate(ctx, cfg)
	}), rawRates.side("raw remote", func() (float64, error) {
		return r.rate(ctx, cfg, func(e int) *actor.PID { return r.raw[e] })
	}))
	if err != nil {
		return err
	}
	refs := make([]actorsharding.EntityRef, len(r.msgs))
	for i, m := range r.msgs {
		if refs[i], err = r.node.sharding.EntityRefFor(remoteType, m.EntityId); err != nil {
			return err
		}
	}
	anon := withoutIDs(r.msgs)
	refRate := func(msgs []*testpb.Ping) (float64, error) {
		return remoteRate(ctx, r.node.system, r.stats, cfg.remoteMessages, func(i int) error {
			e := i % len(msgs)
			return refs[e].Send(msgs[e])
		})
	}
	var refRates, anonRefRates series
	err = interleave(cfg.reps, anonRefRates.side("through EntityRefs, without the IDs", func() (float64, error) {
		return refRate(anon)
	}), refRates.side("through EntityRefs", func() (float64, error) {
		return refRate(r.msgs)
	}))
	if err != nil {
		return err
	}
	var regionLat, rawLat percentileSeries
	err = interleave(cfg.reps, regionLat.side("requests through the region", func() (p50, p99 float64, err error) {
		return r.regionLatencies(cfg)
	}), rawLat.side("raw remote requests", func() (p50, p99 float64, err error) {
		return latencies(cfg.remoteSamples, func(i int) error {
			e := i % len(r.msgs)
			return ask(r.node.system, r.raw[e], r.msgs[e])
		})
	}))
	if err != nil {
		return err
	}
	rep.add(paired(figure{
		Section:        "remote",
		Workload:       fmt.Sprintf("fire-and-forget to %d entities on another process, %s", cfg.entities, runsText(cfg.reps)),
		Unit:           "msgs/s",
		BaselineName:   "raw proto.actor remote Send",
		HigherIsBetter: true,
	}, regionRates, rawRates))
	rep.add(paired(withoutIDsFigure("remote", "on another process", cfg), anonRefRates, refRates))
	for _, f := range []struct {
		p           string
		region, raw []float64
	}{{"p50", regionLat.p50, rawLat.p50}, {"p99", regionLat.p99, rawLat.p99}} {
		rep.add(paired(figure{
			Section:      "remote",
			Workload:     fmt.Sprintf("request/response to another process, %s of %d, %s", f.p, cfg.remoteSamples, runsText(cfg.reps)),
			Unit:         "µs",
			BaselineName: "raw proto.actor remote RequestFuture",
		}, f.region, f.raw))
	}
	return nil
}

// remoteRate calls send(i) for i in [0, n) (each sends one fire-and-forget
// Ping to the peer) and polls the count of the peer's stats actor until
// all n arrived; it returns messages/s.
func remoteRate(ctx context.Context, system *actor.ActorSystem, stats *actor.PID, n int, send func(i int) error) (float64, error) {
	if _, err := peerCount(system, stats, "reset"); err != nil {
		return 0, err
	}
	start := time.Now()
	for i := range n {
		if err := send(i); err != nil {
			return 0, err
		}
	}
	for {
		c, err := peerCount(system, stats, "count")
		if err != nil {
			return 0, err
		}
		if c >= int64(n) {
			return float64(n) / time.Since(start).Seconds(), nil
		}
		if err := backoff.Sleep(ctx, time.Millisecond); err != nil {
			return 0, fmt.Errorf("%d of %d messages arrived: %w", c, n, err)
		}
	}
}

// peerCount asks the peer's stats actor to report or reset its count.
func peerCount(system *actor.ActorSystem, stats *actor.PID, what string) (int64, error) {
	res, err := system.Root.RequestFuture(stats, &testpb.Ping{EntityId: statsName, From: what}, requestTimeout).Result()
	if err != nil {
		return 0, fmt.Errorf("peer %s: %w", what, err)
	}
	p, ok := res.(*testpb.Pong)
	if !ok {
		return 0, fmt.Errorf("peer %s answered %T", what, res)
	}
	return p.Seq, nil
}

// Roles of the peer process, the second OS process of a section.
const (
	// remoteRole hosts the remote section's region, raw actors and stats.
	remoteRole = "peer"
	// failoverRole hosts the failover section's region and, being the
	// oldest member, its coordinator.
	failoverRole = "failover-peer"
	// failoverLeaseRole is failoverRole with the coordinator on a session
	// lease, failoverCASLeaseRole on a compare-and-set lease.
	failoverLeaseRole    = "failover-lease-peer"
	failoverCASLeaseRole = "failover-caslease-peer"
	// grainsRole is a member of proto.actor's own cluster hosting the
	// grains of the grains-remote section, and the stats actor.
	grainsRole = "grains-peer"
	// deliveryRole hosts the delivery section's region, whose entities
	// take reliable deliveries, and the stats actor.
	deliveryRole = "delivery-peer"
	// peersRole is the node the peers section measures (see peersNode).
	peersRole = "peers-node"
)

// peerProcess is the second node: this program run again with -role=<role>.
type peerProcess struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	address string
	// lines are the lines it printed before its READY line.
	lines  chan string
	exited chan struct{}
}

// startPeer runs this program again as role, a member of the cluster whose
// members register as service with the Consul agent at consulAddr, and
// returns once the peer printed its READY line with its address. args are
// more arguments for the peer.
func startPeer(ctx context.Context, cfg config, role, consulAddr, service string, args ...string) (*peerProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program to start the peer: %w", err)
	}
	// -role first: TestMain recognises a peer by its first argument.
	cmd := exec.Command(self, "-role="+role, "-consul-addr="+consulAddr, "-service="+service,
		fmt.Sprintf("-entities=%d", cfg.entities), fmt.Sprintf("-shards=%d", cfg.shards))
	cmd.Args = append(cmd.Args, args...)
	if cfg.cpuProfile != "" {
		cmd.Args = append(cmd.Args, "-cpuprofile="+cfg.cpuProfile+"."+role)
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the %s: %w", role, err)
	}
	p := &peerProcess{cmd: cmd, stdin: stdin, lines: make(chan string, 16), exited: make(chan struct{})}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		readySeen := false
		for sc.Scan() {
			addr, ok := strings.CutPrefix(sc.Text(), "READY ")
			switch {
			case ok:
				readySeen = true
				ready <- addr
			case !readySeen && len(p.lines) < cap(p.lines):
				p.lines <- sc.Text()
			}
		}
		_ = cmd.Wait()
		close(p.exited)
	}()
	select {
	case p.address = <-ready:
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("the %s exited before it was ready: %v", role, cmd.ProcessState)
	case <-time.After(60 * time.Second):
	case <-ctx.Done():
	}
	p.stop()
	return nil, fmt.Errorf("the %s was not ready in time", role)
}

// stop closes the peer's stdin (it then exits) and kills it after 10s.
func (p *peerProcess) stop() {
	_ = p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// kill kills the peer with SIGKILL (kill -9: no goodbye, no deregistration)
// and waits until it is gone.
func (p *peerProcess) kill() error {
	if err := p.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("killing the peer: %w", err)
	}
	<-p.exited
	return nil
}

// peerMain runs the peer node of cfg.role until its stdin closes. It prints
// one line on stdout, "READY <address>", once the node serves (the peers
// section's node its figures before it): stdout is the handshake with the
// parent, so nothing else may go there.
func peerMain(cfg config) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "%s: %v\n", cfg.role, err)
		return 1
	}
	ccfg := api.DefaultConfig()
	ccfg.Address, ccfg.Scheme, ccfg.Token = cfg.consulAddr, "http", ""
	client, err := api.NewClient(ccfg)
	if err != nil {
		return fail(err)
	}
	var (
		address string
		stop    func()
	)
	switch cfg.role {
	case peersRole:
		address, stop, err = peersNode(cfg)
	case remoteRole:
		address, stop, err = served(remotePeer(cfg, client, spawnRemotePeerActors))
	case deliveryRole:
		address, stop, err = served(remotePeer(cfg, client, spawnDeliveryPeerActors))
	case failoverRole:
		address, stop, err = served(failoverPeer(cfg, client, noLease))
	case failoverLeaseRole:
		address, stop, err = served(failoverPeer(cfg, client, sessionLease))
	case failoverCASLeaseRole:
		address, stop, err = served(failoverPeer(cfg, client, casLease))
	case grainsRole:
		address, stop, err = grainsPeer(cfg, ccfg)
	default:
		err = fmt.Errorf("unknown role %q", cfg.role)
	}
	if err != nil {
		return fail(err)
	}
	defer stop()
	fmt.Printf("READY %s\n", address)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// served returns the address and the stop of a peer's node.
func served(n *node, err error) (string, func(), error) {
	if err != nil {
		return "", nil, err
	}
	return n.system.Address(), n.stop, nil
}

// remotePeer starts a peer node of a two-process workload and spawns its
// actors (spawnRemotePeerActors, spawnDeliveryPeerActors).
func remotePeer(cfg config, client *api.Client, spawn func(*node, config, *api.Client) error) (*node, error) {
	provider, err := consul.New(consul.WithClient(client), consul.WithServiceName(cfg.service), consul.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, err
	}
	n, err := startNode(context.Background(), "remote-peer", provider)
	if err != nil {
		return nil, err
	}
	if err := spawn(n, cfg, client); err != nil {
		n.stop()
		return nil, err
	}
	return n, nil
}

// remoteStateStore is the coordinator's state store of a two-process
// workload's typeName: the two processes must share one (the coordinator
// may run in either), so it is in the section's Consul agent.
func remoteStateStore(client *api.Client, clusterName, typeName string) actorsharding.Option {
	return actorsharding.WithStateStore(consulstore.NewStateStore(client, clusterName, typeName))
}

// spawnRemotePeerActors spawns the remote section's peer actors: a region
// hosting every entity of the remote workload, cfg.entities plain actors
// named raw-<i> with the same props, and the stats actor.
func spawnRemotePeerActors(n *node, cfg config, client *api.Client) error {
	var count atomic.Int64
	props := countingProps(&count)
	if _, err := n.sharding.StartRegion(remoteType, props, actorsharding.NewHashCodeMessageExtractor(cfg.shards), remoteStateStore(client, n.sharding.Cluster().Name(), remoteType)); err != nil {
		return fmt.Errorf("start region: %w", err)
	}
	for i := range cfg.entities {
		if _, err := n.system.Root.SpawnNamed(props, fmt.Sprintf("%s%d", rawPrefix, i)); err != nil {
			return fmt.Errorf("spawn %s%d: %w", rawPrefix, i, err)
		}
	}
	return spawnStats(n.system, &count)
}

// countingProps is the entity of a peer: it counts every Ping in count and
// answers it with a Pong (a fire-and-forget Ping has no sender and gets no
// answer).
func countingProps(count *atomic.Int64) *actor.Props {
	return actor.PropsFromFunc(func(ctx actor.Context) {
		if p, ok := ctx.Message().(*testpb.Ping); ok {
			count.Add(1)
			if ctx.Sender() != nil {
				ctx.Respond(&testpb.Pong{EntityId: p.EntityId, Seq: p.Seq})
			}
		}
	})
}

// spawnStats spawns the peer's stats actor (see statsName) over count.
func spawnStats(system *actor.ActorSystem, count *atomic.Int64) error {
	_, err := system.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		if p, ok := ctx.Message().(*testpb.Ping); ok {
			if p.From == "reset" {
				count.Store(0)
			}
			ctx.Respond(&testpb.Pong{EntityId: statsName, Seq: count.Load()})
		}
	}), statsName)
	if err != nil {
		return fmt.Errorf("spawn %s: %w", statsName, err)
	}
	return nil
}
