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
	"github.com/protoshard/protoshard/actorsharding/delivery"
	"github.com/protoshard/protoshard/internal/backoff"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/types/known/anypb"
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

	// producers are the senders' reliable delivery controllers, by sender
	// name (a reliable run only).
	producers map[string]*delivery.ShardingProducerController

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
//	drain <ms>        (reliable run) wait until the producers -> DRAINED <unconfirmed and buffered left> <resent>
//	                  hold nothing unconfirmed or buffered,
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
	proxy, err := sharding.StartProxy(typeName, actorsharding.NewHashCodeMessageExtractor(cfg.shards), shardingOptions(m.client, sharding.Cluster().Name(), cfg.ttl, nil, nil)...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: start proxy: %v\n", cfg.name, err)
		return 1
	}
	g := &loadgen{cfg: cfg, m: m, proxy: proxy}
	if cfg.reliable {
		g.producers = map[string]*delivery.ShardingProducerController{}
		for i := 1; i <= cfg.senders; i++ {
			p, err := delivery.StartShardingProducerController(sharding, typeName, senderName(i), producerOptions...)
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", cfg.name, err)
				return 1
			}
			g.producers[senderName(i)] = p
		}
	}
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
		case "drain":
			ms, err := strconv.Atoi(get(f, 1))
			if err != nil || g.producers == nil {
				fmt.Fprintf(os.Stderr, "%s: bad command %q (a reliable run drains, with a time in ms)\n", cfg.name, sc.Text())
				fmt.Println("DRAINED -1 0")
				continue
			}
			left, resent := g.drain(time.Duration(ms) * time.Millisecond)
			m.ledger.write(Record{Ev: evDrained, Unconfirmed: left, Resent: resent})
			fmt.Printf("DRAINED %d %d\n", left, resent)
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
			g.send(ctx, senderName(i), rand.New(rand.NewPCG(uint64(g.cfg.seed), uint64(i))), g.producers[senderName(i)])
		}()
	}
	if g.cfg.stateEntities > 0 {
		g.senders.Add(1)
		go func() {
			defer g.senders.Done()
			g.sendUpdates(ctx, rand.New(rand.NewPCG(uint64(g.cfg.seed), 0)))
		}()
	}
}

// updateSender names the load generator's sender of update requests to
// the durable state entities.
const updateSender = "u1"

// updateTimeout bounds the wait for an update's answer: the entity's
// recovery and save, each a few Consul calls bounded by 5s.
const updateTimeout = 10 * time.Second

// sendUpdates sends cfg.stateRate update requests a second to durable
// state entities picked at random, numbered per entity, each recorded
// before it is sent and its answer (the update was saved) when it comes.
// It does not wait for an answer before the next request, and returns
// once every request has its answer or timed out.
func (g *loadgen) sendUpdates(ctx context.Context, rng *rand.Rand) {
	var pending sync.WaitGroup
	defer pending.Wait()
	seq := make([]int64, g.cfg.stateEntities)
	everyTick(ctx, g.cfg.stateRate, func() {
		e := rng.IntN(g.cfg.stateEntities)
		seq[e]++
		msg := &testpb.Ping{EntityId: stateEntityID(e), Seq: seq[e], From: updateSender}
		g.m.ledger.write(Record{Ev: evUpdate, Snd: msg.From, Ent: msg.EntityId, Seq: msg.Seq})
		pending.Add(1)
		go func() {
			defer pending.Done()
			res, err := g.m.system.Root.RequestFuture(g.proxy, msg, updateTimeout).Result()
			if p, ok := res.(*testpb.Pong); err == nil && ok && p.Seq == msg.Seq {
				g.m.ledger.write(Record{Ev: evUpdated, Snd: msg.From, Ent: msg.EntityId, Seq: msg.Seq, Inc: p.Incarnation})
			}
		}()
	})
}

// everyTick calls f rate times a second until ctx is done.
func everyTick(ctx context.Context, rate int, f func()) {
	t := time.NewTicker(time.Second / time.Duration(rate))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f()
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
// and all pass the one proxy region, so they must arrive in that order;
// every other one travels in a ShardingEnvelope, so that the two ways a
// region takes a message alternate within one sender's sequence.
// In a reliable run they go through the sender's producer controller p
// (see sendReliably); otherwise each is recorded, then sent.
func (g *loadgen) send(ctx context.Context, name string, rng *rand.Rand, p *delivery.ShardingProducerController) {
	seq := make([]int64, g.cfg.entities)
	everyTick(ctx, g.cfg.rate, func() {
		e := rng.IntN(g.cfg.entities)
		msg := &testpb.Ping{EntityId: entityID(e), Seq: seq[e] + 1, From: name}
		if p != nil {
			if g.sendReliably(ctx, p, msg) {
				seq[e]++
			}
			return
		}
		seq[e]++
		g.m.ledger.write(Record{Ev: evSent, Snd: name, Ent: msg.EntityId, Seq: msg.Seq})
		g.m.system.Root.Send(g.proxy, enveloped(msg))
		g.sent.Add(1)
	})
}

// enveloped returns msg, or msg in a ShardingEnvelope when its sequence
// number is even.
func enveloped(msg *testpb.Ping) any {
	if msg.Seq%2 != 0 {
		return msg
	}
	payload, err := anypb.New(msg)
	if err != nil {
		return msg // a Ping always encodes
	}
	return &messages.ShardingEnvelope{EntityId: msg.EntityId, Message: payload}
}

// Reliable sends: a Send is bounded by sendTimeout, which only a stuck
// controller reaches; a full buffer is retried after bufferFullRetry.
const (
	sendTimeout     = 5 * time.Second
	bufferFullRetry = 100 * time.Millisecond
)

// producerOptions: an entity that stopped with unconfirmed messages (its
// node killed) gets the first of them again after 2s without traffic,
// which starts it elsewhere.
var producerOptions = []delivery.ProducerOption{delivery.WithResendFirstUnconfirmedIdleTimeout(2 * time.Second)}

// sendReliably sends msg through p and reports whether its seq is used. A
// message counts as sent (is recorded) once the controller accepted it. A
// full buffer (entities whose node died have no demand) refuses it: the
// sender waits, and the seq stays free. Send has a context of its own, not
// ctx: a Send cut short by the stop would leave unknown whether it was
// accepted.
func (g *loadgen) sendReliably(ctx context.Context, p *delivery.ShardingProducerController, msg *testpb.Ping) bool {
	sctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
	err := p.Send(sctx, msg.EntityId, msg)
	cancel()
	switch {
	case err == nil:
		g.m.ledger.write(Record{Ev: evSent, Snd: msg.From, Ent: msg.EntityId, Seq: msg.Seq})
		g.sent.Add(1)
		return true
	case errors.Is(err, delivery.ErrBufferFull):
		_ = backoff.Sleep(ctx, bufferFullRetry)
		return false
	default:
		// Perhaps accepted: the seq is used, and the judge reports it.
		g.m.ledger.write(Record{Ev: evUnsure, Snd: msg.From, Ent: msg.EntityId, Seq: msg.Seq, Reason: err.Error()})
		return true
	}
}

// drain waits until no producer holds unconfirmed or buffered messages,
// or d passed, and returns how many they still hold (-1: a controller did
// not answer) and how many they resent in all.
func (g *loadgen) drain(d time.Duration) (left, resent int64) {
	deadline := time.Now().Add(d)
	for {
		left, resent = 0, 0
		for name, p := range g.producers {
			ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
			st, err := p.Stats(ctx)
			cancel()
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: stats of %s: %v\n", g.cfg.name, name, err)
				return -1, resent
			}
			left += int64(st.Unconfirmed + st.Buffered)
			resent += st.Resent
		}
		if left == 0 || time.Now().After(deadline) {
			return left, resent
		}
		time.Sleep(200 * time.Millisecond)
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
