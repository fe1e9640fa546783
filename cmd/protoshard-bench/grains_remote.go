package main

import (
	"context"
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

// benchGrainsRemote: the remote workloads on proto.actor's own cluster,
// against the remote section's region (remoteRegion: a proxy here, the
// region in a peer process), both measured here. The grains' peer process
// is a cluster member hosting the Kind, registered in the same throwaway
// Consul agent through proto.actor's Consul provider; this process joins
// as a cluster client (cluster.StartClient: it hosts no grain), so every
// grain lives in the peer and every message crosses the wire, as with the
// region.
//
// Each repetition measures the region, the grains and a direct Send /
// RequestFuture to the same grains' PIDs (the grains' own baseline, extra
// figures, as in the grains section) back to back.
//
// Fire-and-forget looks the grain's PID up the way cluster.Request does
// (the cluster's PID cache, cluster.Get on a miss) and Sends: proto.actor
// has no fire-and-forget to a grain, and cluster.Get alone asks the
// owner's placement actor on every call, a remote round trip per message.
func benchGrainsRemote(ctx context.Context, cfg config, rep *report) error {
	agent, err := startConsul()
	if err != nil {
		return err
	}
	defer agent.stop()
	region, err := startRemoteRegion(ctx, cfg, agent)
	if err != nil {
		return err
	}
	defer region.stop()
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
	// The grains' own baseline: a direct Send / RequestFuture to the
	// activated grains' PIDs in the peer, without the cluster in between.
	direct := make([]*actor.PID, len(msgs))
	for i, m := range msgs {
		if direct[i] = grainPID(c, m.EntityId); direct[i] == nil {
			return fmt.Errorf("no PID for grain %s", m.EntityId)
		}
	}
	stats := actor.NewPID(peer.address, statsName)
	return compareGrains(cfg, rep, grainSides{
		rate: [3]func() (float64, error){
			func() (float64, error) { return region.regionRate(ctx, cfg) },
			func() (float64, error) {
				return remoteRate(ctx, system, stats, cfg.remoteMessages, func(i int) error {
					m := msgs[i%len(msgs)]
					pid := grainPID(c, m.EntityId)
					if pid == nil {
						return fmt.Errorf("no PID for grain %s", m.EntityId)
					}
					system.Root.Send(pid, m)
					return nil
				})
			},
			func() (float64, error) {
				return remoteRate(ctx, system, stats, cfg.remoteMessages, func(i int) error {
					e := i % len(msgs)
					system.Root.Send(direct[e], msgs[e])
					return nil
				})
			},
		},
		latency: [3]func() (p50, p99 float64, err error){
			func() (p50, p99 float64, err error) { return region.regionLatencies(cfg) },
			func() (p50, p99 float64, err error) {
				return latencies(cfg.remoteSamples, func(i int) error { return request(msgs[i%len(msgs)], requestTimeout) })
			},
			func() (p50, p99 float64, err error) {
				return latencies(cfg.remoteSamples, func(i int) error { return ask(system, direct[i%len(msgs)], msgs[i%len(msgs)]) })
			},
		},
	}, grainTexts{
		section:       "grains-remote",
		rate:          fmt.Sprintf("fire-and-forget to %d entities on another process", cfg.entities),
		grainRate:     fmt.Sprintf("fire-and-forget to %d grains on another process, PID cache + Send", cfg.entities),
		request:       "request/response to another process",
		grainRequest:  "cluster.Request to another process",
		samples:       cfg.remoteSamples,
		grainSend:     "proto.actor grains, Consul provider, cluster client: PID cache + Send",
		grainAsk:      "proto.actor cluster.Request, Consul provider, cluster client",
		directSend:    "direct remote Send",
		directRequest: "direct remote RequestFuture",
	})
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
