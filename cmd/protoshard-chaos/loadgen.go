package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/testpb"
)

// probeAttempt bounds one probe request; an entity that did not answer is
// asked again at once.
const probeAttempt = 2 * time.Second

// entityID is the id of entity i of the run.
func entityID(i int) string { return fmt.Sprintf("e-%05d", i) }

// senderName is the name of sender i (from 1).
func senderName(i int) string { return fmt.Sprintf("s%d", i) }

// loadgen is the load generator process: a member without the node role
// whose proxy region routes the senders' numbered messages and the probes.
type loadgen struct {
	cfg   config
	m     *member
	proxy *actor.PID

	mu      sync.Mutex
	cancel  context.CancelFunc
	senders sync.WaitGroup
	sent    atomic.Int64
}

// loadgenMain runs the load generator. It prints "READY <address>" once
// its proxy runs, then obeys one command per line on stdin and answers
// each on stdout:
//
//	send              start the senders                  -> SENDING
//	stop              stop the senders                   -> STOPPED <messages sent>
//	probe <n> <ms>    ask every entity until it answered  -> PROBED <n> <answered> <total> <last answer, Unix ns>
//	                  or <ms> passed
//
// It exits when stdin closes.
func loadgenMain(cfg config) int {
	m, err := joinCluster(cfg, nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", cfg.name, err)
		return 1
	}
	defer m.stop()
	sharding, err := actorsharding.New(m.system, m.cluster)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", cfg.name, err)
		return 1
	}
	proxy, err := sharding.StartProxy(typeName, actorsharding.NewHashCodeMessageExtractor(cfg.shards), shardingOptions(m.client, cfg.ttl)...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: start proxy: %v\n", cfg.name, err)
		return 1
	}
	g := &loadgen{cfg: cfg, m: m, proxy: proxy}
	m.ledger.write(Record{Ev: evReady, Addr: m.system.Address(), Member: m.cluster.Self().ID})
	fmt.Printf("READY %s %s\n", m.system.Address(), m.cluster.Self().ID)

	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "send":
			g.startSenders()
			fmt.Println("SENDING")
		case "stop":
			g.stopSenders()
			fmt.Printf("STOPPED %d\n", g.sent.Load())
		case "probe":
			n, err1 := strconv.Atoi(get(f, 1))
			ms, err2 := strconv.Atoi(get(f, 2))
			if err := errors.Join(err1, err2); err != nil {
				fmt.Fprintf(os.Stderr, "%s: bad command %q: %v\n", cfg.name, sc.Text(), err)
				fmt.Printf("PROBED %s 0 0 0\n", get(f, 1))
				continue
			}
			answered, last := g.probe(n, time.Duration(ms)*time.Millisecond)
			fmt.Printf("PROBED %d %d %d %d\n", n, answered, cfg.entities, last.UnixNano())
		default:
			fmt.Fprintf(os.Stderr, "%s: unknown command %q\n", cfg.name, sc.Text())
		}
	}
	g.stopSenders()
	return 0
}

func get(f []string, i int) string {
	if i < len(f) {
		return f[i]
	}
	return ""
}

// startSenders starts cfg.senders goroutines, each sending cfg.rate
// numbered messages a second to entities picked at random (seeded), each
// message recorded in the ledger before it is sent.
func (g *loadgen) startSenders() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	for i := 1; i <= g.cfg.senders; i++ {
		g.senders.Add(1)
		go func() {
			defer g.senders.Done()
			g.send(ctx, senderName(i), rand.New(rand.NewPCG(uint64(g.cfg.seed), uint64(i))))
		}()
	}
}

func (g *loadgen) stopSenders() {
	g.mu.Lock()
	cancel := g.cancel
	g.cancel = nil
	g.mu.Unlock()
	if cancel != nil {
		cancel()
		g.senders.Wait()
	}
}

// send is one sender. Its messages to one entity are numbered 1, 2, ...
// and all pass the one proxy region, so they must arrive in that order.
func (g *loadgen) send(ctx context.Context, name string, rng *rand.Rand) {
	seq := make([]int64, g.cfg.entities)
	t := time.NewTicker(time.Second / time.Duration(g.cfg.rate))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e := rng.IntN(g.cfg.entities)
		seq[e]++
		msg := &testpb.Ping{EntityId: entityID(e), Seq: seq[e], From: name}
		g.m.ledger.write(Record{Ev: evSent, Snd: name, Ent: msg.EntityId, Seq: msg.Seq})
		g.m.system.Root.Send(g.proxy, msg)
		g.sent.Add(1)
	}
}

// probe asks every entity, through the proxy, until each has answered once
// or d has passed. It returns how many answered and when the last of them
// did.
func (g *loadgen) probe(n int, d time.Duration) (answered int, last time.Time) {
	deadline := time.Now().Add(d)
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for i := range g.cfg.entities {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := entityID(i)
			for time.Now().Before(deadline) {
				start := time.Now()
				res, err := g.m.system.Root.RequestFuture(g.proxy, &testpb.Ping{EntityId: id, Seq: int64(n), From: probeSender},
					min(probeAttempt, time.Until(deadline))).Result()
				if p, ok := res.(*testpb.Pong); err == nil && ok {
					at := time.Now()
					g.m.ledger.write(Record{T: at.UnixNano(), Ev: evAnswer, Ent: id, Inc: p.Incarnation, Probe: n})
					mu.Lock()
					answered++
					if at.After(last) {
						last = at
					}
					mu.Unlock()
					return
				}
				if !errors.Is(err, actor.ErrTimeout) {
					// Failed fast (a dead letter): do not spin.
					time.Sleep(max(0, 200*time.Millisecond-time.Since(start)))
				}
			}
		}()
	}
	wg.Wait()
	return answered, last
}
