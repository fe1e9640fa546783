package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/membership/consul"
)

const (
	// soakPeers is how many peer processes the soak's cluster keeps.
	soakPeers = 3
	// soakWarmUp is how long the long-lived node runs before its memory
	// is the soak's baseline: its buffers, pools and caches have grown to
	// their working size by then.
	soakWarmUp = 2 * time.Minute
	// soakSample is how often the soak reads the node's memory.
	soakSample = 10 * time.Second
)

// benchSoak: a long-lived node (this process) in a cluster of soakPeers
// peer processes with Consul membership, one of which leaves (its process
// shuts down) or is killed (kill -9), in turn, every cfg.soakChurn and is
// replaced by a new one, while the node sends requests to entities over
// the whole cluster. The node's resident set (VmRSS after the runtime
// returned its free pages, so that what is read is what the node holds)
// at the end, against its resident set after soakWarmUp; and its Go heap
// likewise. Not part of "all": it runs for cfg.soakDuration.
//
// The heap grows at first without any churn: proto.actor's process
// registry is 32,768 Go maps (1,024 buckets of 32 shards), each of which
// allocates its table at the first of the IDs (futures, actors) hashed to
// it; about 9 MB once some 200,000 IDs were used, which the soak's 100
// requests a second reach after half an hour.
func benchSoak(ctx context.Context, cfg config, rep *report) error {
	if cfg.soakDuration <= soakWarmUp {
		return fmt.Errorf("a soak of %v ends before its warm-up of %v", cfg.soakDuration, soakWarmUp)
	}
	agent, err := startConsul()
	if err != nil {
		return err
	}
	defer agent.stop()
	service := fmt.Sprintf("protoshard-bench-soak-%d", os.Getpid())
	provider, err := consul.New(consul.WithClient(agent.client), consul.WithServiceName(service), consul.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return err
	}
	n, err := startNode(ctx, "soak", provider)
	if err != nil {
		return err
	}
	defer n.stop()
	ex := actorsharding.NewHashCodeMessageExtractor(cfg.shards)
	region, err := n.sharding.StartRegion(remoteType, countingProps(new(atomic.Int64)), ex, remoteStateStore(agent.client, n.sharding.Cluster().Name(), remoteType))
	if err != nil {
		return fmt.Errorf("start region: %w", err)
	}
	var peers []*peerProcess
	defer func() {
		for _, p := range peers {
			p.stop()
		}
	}()
	for range soakPeers {
		p, err := startPeer(ctx, cfg, remoteRole, agent.addr, service)
		if err != nil {
			return err
		}
		peers = append(peers, p)
	}
	if err := waitRegions(ctx, n.system, region, soakPeers+1); err != nil {
		return err
	}
	msgs := pings("soak", cfg.entities)

	start := time.Now()
	churn := time.NewTicker(cfg.soakChurn)
	defer churn.Stop()
	sample := time.NewTicker(soakSample)
	defer sample.Stop()
	traffic := time.NewTicker(100 * time.Millisecond)
	defer traffic.Stop()
	var warmRSS, warmHeap, lastRSS, lastHeap, peakRSS uint64
	churned, failed, next := 0, 0, 0
	for time.Since(start) < cfg.soakDuration {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-traffic.C:
			// A slice of the entities per tick: every entity every ten
			// seconds. Requests fail while their shard's node is gone.
			from := next % len(msgs)
			to := min(from+max(1, len(msgs)/100), len(msgs))
			next = to
			if requestAllWithin(n.system, msgs[from:to], func(int) *actor.PID { return region }, 5*time.Second) != nil {
				failed++
			}
		case <-churn.C:
			i := churned % len(peers)
			if churned%2 == 0 {
				peers[i].stop()
			} else if err := peers[i].kill(); err != nil {
				return err
			}
			churned++
			p, err := startPeer(ctx, cfg, remoteRole, agent.addr, service)
			if err != nil {
				return fmt.Errorf("after %d churns: %w", churned, err)
			}
			peers[i] = p
		case <-sample.C:
			rss, live, err := soakMemory()
			if err != nil {
				return err
			}
			lastRSS, lastHeap, peakRSS = rss, live, max(peakRSS, rss)
			if warmRSS == 0 && time.Since(start) >= soakWarmUp {
				warmRSS, warmHeap = rss, live
			}
			fmt.Fprintf(os.Stderr, "soak %v: rss %.1f MB, heap %.1f MB, %d churns, %d failed request rounds, %d goroutines\n",
				time.Since(start).Round(time.Second), float64(rss)/(1<<20), float64(live)/(1<<20), churned, failed, runtime.NumGoroutine())
		}
	}
	if warmRSS == 0 || lastRSS == 0 {
		return errors.New("no reading after the warm-up")
	}
	for _, m := range []struct {
		what      string
		end, warm uint64
	}{
		{fmt.Sprintf("resident set (peak %.1f MB)", float64(peakRSS)/(1<<20)), lastRSS, warmRSS},
		{"Go heap", lastHeap, warmHeap},
	} {
		rep.add(paired(figure{
			Section: "soak",
			Workload: fmt.Sprintf("%s of a node after %v, a peer (of %d, own processes) leaving or killed every %v, %d in all",
				m.what, cfg.soakDuration, soakPeers, cfg.soakChurn, churned),
			Unit:         "MB",
			BaselineName: fmt.Sprintf("the same after %v", soakWarmUp),
		}, []float64{float64(m.end) / (1 << 20)}, []float64{float64(m.warm) / (1 << 20)}))
	}
	return nil
}

// soakMemory is this process's resident set and Go heap, in bytes, after a
// collection and after the runtime returned its free pages to the OS.
func soakMemory() (rss, live uint64, err error) {
	live = heap()
	debug.FreeOSMemory()
	rss, err = residentSet()
	return rss, live, err
}
