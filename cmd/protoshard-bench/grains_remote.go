package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	consulprovider "github.com/asynkron/protoactor-go/cluster/clusterproviders/consul"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/hashicorp/consul/api"
	"github.com/protoshard/protoshard/internal/backoff"
	"github.com/protoshard/protoshard/internal/testpb"
)

// grainsPeer starts the grains-remote section's peer: a member of
// proto.actor's cluster (its Consul provider, disthash identity lookup)
// with the Kind of the grains, and the stats actor counting the Pings the
// grains receive.
func grainsPeer(cfg config, consulCfg *api.Config) (address string, stop func(), err error) {
	provider, err := consulprovider.NewWithConfig(consulCfg)
	if err != nil {
		return "", nil, fmt.Errorf("proto.actor consul provider: %w", err)
	}
	system := newSystem("grains-peer") // c.Shutdown shuts it down
	var count atomic.Int64
	c := cluster.New(system, cluster.Configure(cfg.service, provider, disthash.New(),
		remote.Configure("127.0.0.1", 0),
		cluster.WithKinds(cluster.NewKind(grainKind, countingProps(&count)))))
	c.StartMember() // registers with Consul; sleeps a second for the topology
	stop = func() {
		// Deregister at once rather than leave the registration to its TTL.
		_ = provider.Shutdown(true)
		c.Shutdown(false)
	}
	if err := spawnStats(system, &count); err != nil {
		stop()
		return "", nil, err
	}
	return system.Address(), stop, nil
}

// benchGrainsRemote: the remote workloads on proto.actor's own cluster.
// The peer process is a cluster member hosting the Kind, registered in a
// throwaway Consul agent through proto.actor's Consul provider; this
// process joins as a cluster client (cluster.StartClient: it hosts no
// grain), so every grain lives in the peer and every message crosses the
// wire, as in the remote section, whose region figures (a proxy here, the
// region in the peer) are compared against the grains'.
//
// The grains are also measured against a direct Send / RequestFuture to
// the same grains' PIDs (extra figures, as in the grains section).
//
// Fire-and-forget looks the grain's PID up the way cluster.Request does
// (the cluster's PID cache, cluster.Get on a miss) and Sends: proto.actor
// has no fire-and-forget to a grain, and cluster.Get alone asks the
// owner's placement actor on every call, a remote round trip per message.
func benchGrainsRemote(ctx context.Context, cfg config, rep *report, sh *shared) error {
	if _, err := consulBinary(); err != nil {
		return err
	}
	if !sh.haveRemote {
		return errors.New("needs the remote section (run it too)")
	}
	agent, err := startConsul()
	if err != nil {
		return err
	}
	defer agent.stop()
	// The cluster name is the Consul service name.
	service := fmt.Sprintf("protoshard-bench-grains-%d", os.Getpid())
	peer, err := startPeer(ctx, cfg, grainsRole, agent.addr, service)
	if err != nil {
		return err
	}
	defer peer.stop()

	provider, err := consulprovider.NewWithConfig(&api.Config{Address: agent.addr, Scheme: "http"})
	if err != nil {
		return fmt.Errorf("proto.actor consul provider: %w", err)
	}
	system := newSystem("grains-client") // c.Shutdown shuts it down
	c := cluster.New(system, cluster.Configure(service, provider, disthash.New(), remote.Configure("127.0.0.1", 0)))
	c.StartClient() // reads the members from Consul once, then watches
	defer func() {
		// Not c.Shutdown: on a cluster started with StartClient it panics
		// (its first step, Gossiper.SetState, calls the gossiper's message
		// throttler, which only StartGossiping sets, and a client does not
		// gossip). What it would do for a non-graceful stop is this:
		c.ActorSystem.Shutdown()
		c.Remote.Shutdown(false)
		// And it would leave the provider's watch loop running, which
		// would spin once the agent is gone; the provider's own Shutdown
		// ends it after its current blocking query.
		_ = provider.Shutdown(true)
	}()

	msgs := pings("grain-remote", cfg.entities)
	request := func(m *testpb.Ping, timeout time.Duration) error {
		res, err := c.Request(m.EntityId, grainKind, m, cluster.WithTimeout(timeout))
		if err != nil {
			return fmt.Errorf("%s: %w", m.EntityId, err)
		}
		if _, ok := res.(*testpb.Pong); !ok {
			return fmt.Errorf("%s answered %T", m.EntityId, res)
		}
		return nil
	}
	// Activate every grain; the client may need a moment to see the member.
	deadline := time.Now().Add(30 * time.Second)
	for _, m := range msgs {
		for {
			err := request(m, requestTimeout)
			if err == nil {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("activating the grains: %w", err)
			}
			_ = backoff.Sleep(ctx, 100*time.Millisecond)
		}
	}
	// The grains' own baseline, measured here too: a direct Send /
	// RequestFuture to the activated grains' PIDs in the peer, without
	// the cluster in between.
	direct := make([]*actor.PID, len(msgs))
	for i, m := range msgs {
		if direct[i] = grainPID(c, m.EntityId); direct[i] == nil {
			return fmt.Errorf("no PID for grain %s", m.EntityId)
		}
	}
	stats := actor.NewPID(peer.address, statsName)
	var grainRate, directRate float64
	for range rounds {
		g, err := remoteRate(ctx, system, stats, cfg.remoteMessages, func(i int) error {
			m := msgs[i%len(msgs)]
			pid := grainPID(c, m.EntityId)
			if pid == nil {
				return fmt.Errorf("no PID for grain %s", m.EntityId)
			}
			system.Root.Send(pid, m)
			return nil
		})
		if err != nil {
			return fmt.Errorf("grains: %w", err)
		}
		d, err := remoteRate(ctx, system, stats, cfg.remoteMessages, func(i int) error {
			e := i % len(msgs)
			system.Root.Send(direct[e], msgs[e])
			return nil
		})
		if err != nil {
			return fmt.Errorf("direct: %w", err)
		}
		grainRate, directRate = max(grainRate, g), max(directRate, d)
	}
	grainP50, grainP99, err := latencies(cfg.remoteSamples, func(i int) error {
		return request(msgs[i%len(msgs)], requestTimeout)
	})
	if err != nil {
		return fmt.Errorf("grain requests: %w", err)
	}
	directP50, directP99, err := latencies(cfg.remoteSamples, func(i int) error {
		return ask(system, direct[i%len(msgs)], msgs[i%len(msgs)])
	})
	if err != nil {
		return fmt.Errorf("direct requests: %w", err)
	}

	rep.add(figure{
		Section:        "vs grains",
		Workload:       fmt.Sprintf("fire-and-forget to %d entities on another process: region vs grains", cfg.entities),
		Unit:           "msgs/s",
		Protoshard:     sh.remoteRate,
		Baseline:       grainRate,
		BaselineName:   "proto.actor grains, Consul provider, cluster client: PID cache + Send",
		HigherIsBetter: true,
	})
	for _, f := range []struct {
		p             string
		region, grain float64
	}{{"p50", sh.remoteReqP50, grainP50}, {"p99", sh.remoteReqP99, grainP99}} {
		rep.add(figure{
			Section:      "vs grains",
			Workload:     fmt.Sprintf("request/response to another process, %s of %d: region vs grains", f.p, cfg.remoteSamples),
			Unit:         "µs",
			Protoshard:   f.region,
			Baseline:     f.grain,
			BaselineName: "proto.actor cluster.Request, Consul provider, cluster client",
		})
	}
	rep.addExtra(figure{
		Section: "grains-remote", Workload: fmt.Sprintf("fire-and-forget to %d grains on another process, PID cache + Send", cfg.entities),
		Unit: "msgs/s", Protoshard: grainRate, Baseline: directRate, BaselineName: "direct remote Send", HigherIsBetter: true,
	})
	rep.addExtra(figure{
		Section: "grains-remote", Workload: "cluster.Request to another process p50", Unit: "µs",
		Protoshard: grainP50, Baseline: directP50, BaselineName: "direct remote RequestFuture",
	})
	rep.addExtra(figure{
		Section: "grains-remote", Workload: "cluster.Request to another process p99", Unit: "µs",
		Protoshard: grainP99, Baseline: directP99, BaselineName: "direct remote RequestFuture",
	})
	return nil
}

// grainPID looks a grain's PID up as cluster.Request does: the cluster's
// PID cache first, the identity lookup (here disthash, a request to the
// owner's placement actor) on a miss.
func grainPID(c *cluster.Cluster, identity string) *actor.PID {
	if pid, ok := c.PidCache.Get(identity, grainKind); ok && pid != nil {
		return pid
	}
	pid := c.Get(identity, grainKind)
	if pid != nil {
		c.PidCache.Set(identity, grainKind, pid)
	}
	return pid
}
