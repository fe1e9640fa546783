package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/shardingconfig"
	"github.com/protoshard/protoshard/internal/testpb"
)

// peerCounts are the cluster sizes the peers section measures a node in,
// against the same node with one peer.
var peerCounts = []int{20, 50}

// benchPeers: the memory of one node (a process of its own, started by
// actorsharding.Join) that has exchanged a message with each of 20 and 50
// other nodes, against the same node with one peer. Each node it sends to
// costs it an endpoint (proto.actor's writer, with its queue, and
// watcher, and a gRPC connection), each node that answers an inbound
// stream. The peers are actor systems of this process with a remote each,
// so that the measured process holds nothing but its node.
//
// Two readings of the node's process: its Go heap after a collection,
// which counts what the node holds (an endpoint queue's ring whether or
// not the process has touched its pages yet, and what the garbage
// collector scans and paces itself on), and its resident set (VmRSS,
// after the runtime returned its free pages to the OS), what the machine
// pays for the process now, the Go runtime's own memory included. A ring
// counts in the resident set only as far as it has been written: proto.actor's
// 1,000,000-slot ring adds 16 MB of heap per peer at the first message,
// and its pages one by one as the messages to that peer wrap around it
// (and the garbage collector lets the heap grow to twice the live heap
// before it collects), so the heap rows are the ones that show the queue.
func benchPeers(ctx context.Context, cfg config, rep *report) error {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		return &skipError{reason: "no /proc/self/status to read the resident set from"}
	}
	peers, stop, err := startEchoPeers(peerCounts[len(peerCounts)-1])
	if err != nil {
		return err
	}
	defer stop()
	type sample struct{ heap, rss []float64 }
	samples := map[int]*sample{}
	sides := []func() error{}
	for _, n := range append([]int{1}, peerCounts...) {
		s := &sample{}
		samples[n] = s
		sides = append(sides, func() error {
			heap, rss, err := measurePeersNode(ctx, cfg, peers[:n])
			if err != nil {
				return fmt.Errorf("node with %d peers: %w", n, err)
			}
			s.heap, s.rss = append(s.heap, heap/(1<<20)), append(s.rss, rss/(1<<20))
			return nil
		})
	}
	if err := interleave(cfg.reps, sides...); err != nil {
		return err
	}
	queue := fmt.Sprintf("Join's endpoint queue of %d messages", shardingconfig.EndpointWriterQueueSize)
	if cfg.peersQueue > 0 {
		queue = fmt.Sprintf("endpoint queue of %d messages", cfg.peersQueue)
	}
	for _, n := range peerCounts {
		for _, m := range []struct {
			what     string
			got, one []float64
		}{
			{"Go heap", samples[n].heap, samples[1].heap},
			{"resident set", samples[n].rss, samples[1].rss},
		} {
			rep.add(paired(figure{
				Section:      "peers",
				Workload:     fmt.Sprintf("%s of a node with %d peers, %s, %s", m.what, n, queue, runsText(cfg.reps)),
				Unit:         "MB",
				BaselineName: "the same node with 1 peer",
			}, m.got, m.one))
		}
	}
	return nil
}

// startEchoPeers starts n actor systems with a remote each, on loopback,
// each with an actor named "echo" that answers a Ping with a Pong, and
// returns their addresses.
func startEchoPeers(n int) (addrs []string, stop func(), err error) {
	var systems []*actor.ActorSystem
	var remotes []*remote.Remote
	stop = func() {
		for i, r := range remotes {
			r.Shutdown(false)
			systems[i].Shutdown()
		}
	}
	echo := actor.PropsFromFunc(func(ctx actor.Context) {
		if p, ok := ctx.Message().(*testpb.Ping); ok {
			ctx.Respond(&testpb.Pong{Seq: p.Seq})
		}
	})
	for i := range n {
		system := newSystem(fmt.Sprintf("peers-%d", i))
		r := remote.NewRemote(system, remote.Configure("127.0.0.1", 0,
			remote.WithEndpointWriterQueueSize(shardingconfig.EndpointWriterQueueSize)))
		r.Start()
		systems, remotes = append(systems, system), append(remotes, r)
		if _, err := system.Root.SpawnNamed(echo, "echo"); err != nil {
			stop()
			return nil, nil, fmt.Errorf("peer %d: %w", i, err)
		}
		addrs = append(addrs, system.Address())
	}
	return addrs, stop, nil
}

// measurePeersNode starts the node in a process of its own, connected to
// peers, and returns its heap and resident set in bytes.
func measurePeersNode(ctx context.Context, cfg config, peers []string) (heap, rss float64, err error) {
	args := []string{"-peers=" + strings.Join(peers, ",")}
	if cfg.peersQueue > 0 {
		args = append(args, fmt.Sprintf("-peers-endpoint-queue=%d", cfg.peersQueue))
	}
	p, err := startPeer(ctx, cfg, peersRole, "", "", args...)
	if err != nil {
		return 0, 0, err
	}
	defer p.stop()
	select {
	case line := <-p.lines:
		if _, err := fmt.Sscanf(line, "MEM %g %g", &heap, &rss); err != nil {
			return 0, 0, fmt.Errorf("the node's figures %q: %w", line, err)
		}
		return heap, rss, nil
	default:
		return 0, 0, errors.New("the node was ready without its figures")
	}
}

// peersNode is the node the peers section measures: it joins (Join, with
// its in-process membership: it is a cluster of its own), asks the echo
// actor of each of cfg.peerAddrs once, and prints "MEM <heap bytes> <rss
// bytes>" before its READY line.
func peersNode(cfg config) (address string, stop func(), err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	system := newSystem("peers-node")
	var opts []actorsharding.JoinOption
	if cfg.peersQueue > 0 {
		opts = append(opts, actorsharding.WithRemoteOptions(remote.WithEndpointWriterQueueSize(cfg.peersQueue)))
	}
	s, err := actorsharding.Join(ctx, system, opts...)
	if err != nil {
		return "", nil, err
	}
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Leave(ctx)
		system.Shutdown()
	}
	var futures []*actor.Future
	for addr := range strings.SplitSeq(cfg.peerAddrs, ",") {
		futures = append(futures, system.Root.RequestFuture(actor.NewPID(addr, "echo"), &testpb.Ping{Seq: 1}, 30*time.Second))
	}
	for _, f := range futures {
		if _, err := f.Result(); err != nil {
			stop()
			return "", nil, fmt.Errorf("asking a peer: %w", err)
		}
	}
	heap := settledHeap(ctx)
	debug.FreeOSMemory()
	rss, err := residentSet()
	if err != nil {
		stop()
		return "", nil, err
	}
	fmt.Printf("MEM %d %d\n", heap, rss)
	return system.Address(), stop, nil
}

// residentSet is this process's resident set in bytes (Linux's VmRSS).
func residentSet() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmRSS %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no VmRSS in /proc/self/status")
}
