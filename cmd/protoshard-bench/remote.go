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
	"github.com/protoshard/protoshard/coordinatoractor"
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

// benchRemote: two nodes in two processes on loopback, with membership
// through a throwaway Consul dev agent. This process runs a proxy (it
// hosts nothing), the peer process the region with every entity, so every
// message crosses the wire. Baseline: raw proto.actor remote Send and
// RequestFuture from this process to plain actors in the peer.
func benchRemote(ctx context.Context, cfg config, rep *report, sh *shared) error {
	agent, err := startConsul()
	if err != nil {
		return err
	}
	defer agent.stop()
	service := fmt.Sprintf("protoshard-bench-%d", os.Getpid())
	provider, err := consul.New(consul.Config{Client: agent.client, ServiceName: service, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	n, err := startNode(ctx, "remote-a", provider)
	if err != nil {
		return err
	}
	defer n.stop()
	ex := actorsharding.NewHashCodeMessageExtractor(cfg.shards)
	proxy, err := n.sharding.StartProxy(remoteType, ex, remoteStateStore(agent.client))
	if err != nil {
		return fmt.Errorf("start proxy: %w", err)
	}
	peer, err := startPeer(ctx, cfg, remoteRole, agent.addr, service)
	if err != nil {
		return err
	}
	defer peer.stop()
	if err := waitRegions(ctx, n.system, proxy, 1); err != nil {
		return err
	}
	msgs := pings("remote", cfg.entities)
	raw := make([]*actor.PID, len(msgs))
	for i := range raw {
		raw[i] = actor.NewPID(peer.address, fmt.Sprintf("%s%d", rawPrefix, i))
	}
	stats := actor.NewPID(peer.address, statsName)
	if err := requestAll(n.system, msgs, func(int) *actor.PID { return proxy }); err != nil {
		return fmt.Errorf("warm-up through the region: %w", err)
	}
	if err := requestAll(n.system, msgs, func(i int) *actor.PID { return raw[i] }); err != nil {
		return fmt.Errorf("warm-up of the raw actors: %w", err)
	}

	rate := func(target func(i int) *actor.PID) (float64, error) {
		return remoteRate(ctx, n.system, stats, cfg.remoteMessages, func(i int) error {
			e := i % len(msgs)
			n.system.Root.Send(target(e), msgs[e])
			return nil
		})
	}
	var regionRate, rawRate float64
	for range rounds {
		r, err := rate(func(int) *actor.PID { return proxy })
		if err != nil {
			return fmt.Errorf("through the region: %w", err)
		}
		d, err := rate(func(i int) *actor.PID { return raw[i] })
		if err != nil {
			return fmt.Errorf("raw remote: %w", err)
		}
		regionRate, rawRate = max(regionRate, r), max(rawRate, d)
	}
	regionP50, regionP99, err := latencies(cfg.remoteSamples, func(i int) error {
		return ask(n.system, proxy, msgs[i%len(msgs)])
	})
	if err != nil {
		return fmt.Errorf("requests through the region: %w", err)
	}
	rawP50, rawP99, err := latencies(cfg.remoteSamples, func(i int) error {
		return ask(n.system, raw[i%len(msgs)], msgs[i%len(msgs)])
	})
	if err != nil {
		return fmt.Errorf("raw remote requests: %w", err)
	}
	rep.add(figure{
		Section:        "remote",
		Workload:       fmt.Sprintf("fire-and-forget to %d entities on another process", cfg.entities),
		Unit:           "msgs/s",
		Protoshard:     regionRate,
		Baseline:       rawRate,
		BaselineName:   "raw proto.actor remote Send",
		HigherIsBetter: true,
	})
	for _, f := range []struct {
		p           string
		region, raw float64
	}{{"p50", regionP50, rawP50}, {"p99", regionP99, rawP99}} {
		rep.add(figure{
			Section:      "remote",
			Workload:     fmt.Sprintf("request/response to another process, %s of %d", f.p, cfg.remoteSamples),
			Unit:         "µs",
			Protoshard:   f.region,
			Baseline:     f.raw,
			BaselineName: "raw proto.actor remote RequestFuture",
		})
	}
	sh.remoteRate, sh.remoteReqP50, sh.remoteReqP99, sh.haveRemote = regionRate, regionP50, regionP99, true
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
	// failoverLeaseRole is failoverRole with the coordinator on a lease.
	failoverLeaseRole = "failover-lease-peer"
	// grainsRole is a member of proto.actor's own cluster hosting the
	// grains of the grains-remote section, and the stats actor.
	grainsRole = "grains-peer"
)

// peerProcess is the second node: this program run again with -role=<role>.
type peerProcess struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	address string
	exited  chan struct{}
}

// startPeer runs this program again as role, a member of the cluster whose
// members register as service with the Consul agent at consulAddr, and
// returns once the peer printed its READY line with its address.
func startPeer(ctx context.Context, cfg config, role, consulAddr, service string) (*peerProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program to start the peer: %w", err)
	}
	// -role first: TestMain recognises a peer by its first argument.
	cmd := exec.Command(self, "-role="+role, "-consul-addr="+consulAddr, "-service="+service,
		fmt.Sprintf("-entities=%d", cfg.entities), fmt.Sprintf("-shards=%d", cfg.shards))
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
	p := &peerProcess{cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
				ready <- addr
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
// one line on stdout, "READY <address>", once the node serves: stdout is
// the handshake with the parent, so nothing else may go there.
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
	case remoteRole:
		address, stop, err = served(remotePeer(cfg, client))
	case failoverRole, failoverLeaseRole:
		address, stop, err = served(failoverPeer(cfg, client, cfg.role == failoverLeaseRole))
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

// remotePeer starts the remote section's peer node: a region hosting every
// entity of the remote workload, cfg.entities plain actors named raw-<i>
// with the same props, and the stats actor.
func remotePeer(cfg config, client *api.Client) (*node, error) {
	provider, err := consul.New(consul.Config{Client: client, ServiceName: cfg.service, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	n, err := startNode(context.Background(), "remote-peer", provider)
	if err != nil {
		return nil, err
	}
	if err := spawnRemotePeerActors(n, cfg, client); err != nil {
		n.stop()
		return nil, err
	}
	return n, nil
}

// remoteStateStore is the coordinator's state store of the remote section:
// the two processes must share one (the coordinator may run in either), so
// it is in the section's Consul agent.
func remoteStateStore(client *api.Client) actorsharding.Option {
	return actorsharding.WithStateStore(coordinatoractor.NewConsulStore(client, coordinatoractor.ConsulStateKey(remoteType)))
}

func spawnRemotePeerActors(n *node, cfg config, client *api.Client) error {
	var count atomic.Int64
	props := countingProps(&count)
	if _, err := n.sharding.StartRegion(remoteType, props, actorsharding.NewHashCodeMessageExtractor(cfg.shards), remoteStateStore(client)); err != nil {
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
