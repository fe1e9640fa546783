package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/actorsharding/delivery"
	"github.com/protoshard/protoshard/internal/backoff"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/membership/local"
)

// deliveryType is the entity type of the delivery section, on one node and
// on the peer.
const deliveryType = "BenchDelivery"

// deliveryWindow is the consumers' flow-control window (Pekko's default).
// A consumer confirms to the producer each time half of it is used, so the
// confirmations of the last messages to an entity reach the producer at
// once only if that entity's count ends on a half-window: every
// measurement sends whole half-windows to each entity, else the producer
// would learn of the last ones only from the consumers' retry, seconds
// later.
const deliveryWindow = 50

// reliableEntity is the entity of the delivery section: it takes reliable
// deliveries, confirming each at once, and answers a Ping with a Pong as
// the other workloads' entities do, counting it (hit).
type reliableEntity struct {
	hit      func()
	consumer *delivery.ShardingConsumerController
}

func reliableProps(hit func()) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &reliableEntity{hit: hit} })
}

func (e *reliableEntity) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		c, err := delivery.NewShardingConsumerController(nil, e.deliver, delivery.WithFlowControlWindow(deliveryWindow))
		if err != nil {
			ctx.Logger().Error("bench: reliable entity cannot take deliveries", "error", err)
			ctx.Stop(ctx.Self())
			return
		}
		e.consumer = c
	case *testpb.Ping:
		e.hit()
		if ctx.Sender() != nil {
			ctx.Respond(&testpb.Pong{EntityId: msg.EntityId, Seq: msg.Seq})
		}
	default:
		if e.consumer != nil {
			e.consumer.Receive(ctx)
		}
	}
}

// deliver confirms d at once: the entity processes a delivery synchronously.
func (e *reliableEntity) deliver(ctx actor.Context, d delivery.Delivery) {
	if err := e.consumer.Confirm(ctx, d); err != nil {
		ctx.Logger().Error("bench: confirm", "producer", d.ProducerID, "seqNr", d.SeqNr, "error", err)
	}
}

// reliableTargets are the entities of a delivery workload, as an
// at-most-once baseline addresses them (msgs, refs) and as a producer
// does (by ID).
type reliableTargets struct {
	sharding *actorsharding.Sharding
	msgs     []*testpb.Ping
	refs     []actorsharding.EntityRef
}

func newReliableTargets(s *actorsharding.Sharding, msgs []*testpb.Ping) (*reliableTargets, error) {
	t := &reliableTargets{sharding: s, msgs: msgs, refs: make([]actorsharding.EntityRef, len(msgs))}
	for i, m := range t.msgs {
		var err error
		if t.refs[i], err = s.EntityRefFor(deliveryType, m.EntityId); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// reliableCount is n rounded up to whole half-windows per entity (see
// deliveryWindow).
func reliableCount(n, entities int) int {
	per := entities * deliveryWindow / 2
	return (n + per - 1) / per * per
}

// startProducer starts a producer controller of deliveryType.
func (t *reliableTargets) startProducer(id string) (*delivery.ShardingProducerController, error) {
	p, err := delivery.StartShardingProducerController(t.sharding, deliveryType, id)
	if err != nil {
		return nil, fmt.Errorf("producer %s: %w", id, err)
	}
	return p, nil
}

// reliableRate sends n messages through p with Send, round robin over the
// entities, and returns messages/s until p counts all of them confirmed.
// A Send refused for a full buffer is tried again after a short pause
// (the entities catch up meanwhile) and counted once.
func (t *reliableTargets) reliableRate(ctx context.Context, p *delivery.ShardingProducerController, n int) (float64, error) {
	before, err := p.Stats(ctx)
	if err != nil {
		return 0, err
	}
	want := before.Confirmed + int64(n)
	start := time.Now()
	for i := range n {
		m := t.msgs[i%len(t.msgs)]
		for {
			err := p.Send(ctx, m.EntityId, m)
			if err == nil {
				break
			}
			if !errors.Is(err, delivery.ErrBufferFull) {
				return 0, err
			}
			if err := backoff.Sleep(ctx, time.Millisecond); err != nil {
				return 0, fmt.Errorf("buffer full: %w", err)
			}
		}
	}
	for {
		st, err := p.Stats(ctx)
		if err != nil {
			return 0, err
		}
		if st.Confirmed >= want {
			return float64(n) / time.Since(start).Seconds(), nil
		}
		if err := backoff.Sleep(ctx, time.Millisecond); err != nil {
			return 0, fmt.Errorf("%d of %d messages confirmed: %w", st.Confirmed-before.Confirmed, n, err)
		}
	}
}

// confirmedLatencies are n sequential SendWithConfirmations through p,
// round robin over the entities; p50 and p99 in microseconds.
func (t *reliableTargets) confirmedLatencies(ctx context.Context, p *delivery.ShardingProducerController, n int) (p50, p99 float64, err error) {
	return latencies(n, func(i int) error {
		m := t.msgs[i%len(t.msgs)]
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		return p.SendWithConfirmation(rctx, m.EntityId, m)
	})
}

// requestLatencies are n sequential EntityRef.Requests, round robin over
// the entities, each answered with a Pong; p50 and p99 in microseconds.
func (t *reliableTargets) requestLatencies(ctx context.Context, n int) (p50, p99 float64, err error) {
	return latencies(n, func(i int) error {
		e := i % len(t.refs)
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		res, err := t.refs[e].Request(rctx, t.msgs[e])
		if err != nil {
			return err
		}
		if _, ok := res.(*testpb.Pong); !ok {
			return fmt.Errorf("%s answered %T", t.msgs[e].EntityId, res)
		}
		return nil
	})
}

// reliableBench is one place of the delivery workloads (one node, or
// another process): its throughput producer, warmed up so that every entity
// has its numbering and its half-window boundary, and its latency
// producer, warmed up with one confirmed message per entity. Each producer
// has its own numbering in the entities, so the latency's acknowledged
// messages do not shift the throughput's half-windows.
//
// Both producers have the default settings. Send is tried again on
// ErrBufferFull rather than BufferSize raised: the buffer (1,000 messages
// over all entities) fills only once the entities granted no more demand
// (50 messages each beyond the last confirmed), so a larger one would
// hold more messages without confirming any sooner.
type reliableBench struct {
	targets    *reliableTargets
	messages   int // per throughput measurement
	throughput *delivery.ShardingProducerController
	latency    *delivery.ShardingProducerController
}

func startReliableBench(ctx context.Context, cfg config, targets *reliableTargets) (*reliableBench, error) {
	b := &reliableBench{targets: targets, messages: reliableCount(cfg.deliveryMessages, len(targets.msgs))}
	var err error
	if b.throughput, err = targets.startProducer("bench-throughput"); err != nil {
		return nil, err
	}
	if b.latency, err = targets.startProducer("bench-latency"); err != nil {
		b.stop()
		return nil, err
	}
	if err := b.warmUp(ctx); err != nil {
		b.stop()
		return nil, err
	}
	return b, nil
}

func (b *reliableBench) warmUp(ctx context.Context) error {
	if _, err := b.targets.reliableRate(ctx, b.throughput, len(b.targets.msgs)*deliveryWindow/2); err != nil {
		return fmt.Errorf("warm-up of the reliable sends: %w", err)
	}
	if _, _, err := b.targets.confirmedLatencies(ctx, b.latency, len(b.targets.msgs)); err != nil {
		return fmt.Errorf("warm-up of the confirmed sends: %w", err)
	}
	return nil
}

// stop stops the producers: everything sent is confirmed by then.
func (b *reliableBench) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range []*delivery.ShardingProducerController{b.throughput, b.latency} {
		if p != nil {
			_ = p.Stop(ctx)
		}
	}
}

// measure runs cfg.reps interleaved repetitions of the throughput pair
// (baseline: b.messages at-most-once sends, messages/s until all
// received), then of the latency pair, and adds their figures; where
// names the place in the workloads' text.
func (b *reliableBench) measure(ctx context.Context, cfg config, rep *report, where, baselineWhere string, baseline func() (float64, error)) error {
	var reliable, atMostOnce series
	err := interleave(cfg.reps, reliable.side("reliable sends", func() (float64, error) {
		return b.targets.reliableRate(ctx, b.throughput, b.messages)
	}), atMostOnce.side("at-most-once sends", baseline))
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	var confirmed, requested percentileSeries
	err = interleave(cfg.reps, confirmed.side("confirmed sends", func() (p50, p99 float64, err error) {
		return b.targets.confirmedLatencies(ctx, b.latency, cfg.deliverySamples)
	}), requested.side("requests", func() (p50, p99 float64, err error) {
		return b.targets.requestLatencies(ctx, cfg.deliverySamples)
	}))
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	entities := len(b.targets.msgs)
	rep.add(paired(figure{
		Section: "delivery",
		Workload: fmt.Sprintf("reliable Send of %d messages to %d entities %s, until all confirmed, %s",
			b.messages, entities, where, runsText(cfg.reps)),
		Unit:           "msgs/s",
		BaselineName:   "at-most-once EntityRef.Send" + baselineWhere + " until all received",
		HigherIsBetter: true,
	}, reliable, atMostOnce))
	for _, f := range []struct {
		p                   string
		confirmed, requests []float64
	}{{"p50", confirmed.p50, requested.p50}, {"p99", confirmed.p99, requested.p99}} {
		rep.add(paired(figure{
			Section: "delivery",
			Workload: fmt.Sprintf("SendWithConfirmation to a started entity %s, %s of %d, %s",
				where, f.p, cfg.deliverySamples, runsText(cfg.reps)),
			Unit:         "µs",
			BaselineName: "EntityRef.Request" + baselineWhere + ", the entity answers",
		}, f.confirmed, f.requests))
	}
	return nil
}

// benchDelivery: reliable delivery against at-most-once EntityRefs to the
// same entities, on one node, then to entities in a peer process. The
// remote half is skipped, with the reason, when no Consul binary is found.
func benchDelivery(ctx context.Context, cfg config, rep *report) error {
	if err := deliveryLocal(ctx, cfg, rep); err != nil {
		return err
	}
	return deliveryRemote(ctx, cfg, rep)
}

func deliveryLocal(ctx context.Context, cfg config, rep *report) error {
	n, err := startNode(ctx, "delivery", local.NewRegistry().Provider())
	if err != nil {
		return err
	}
	defer n.stop()
	count := &counter{}
	region, err := n.sharding.StartRegion(deliveryType, reliableProps(count.hit), actorsharding.NewHashCodeMessageExtractor(cfg.shards))
	if err != nil {
		return fmt.Errorf("start region: %w", err)
	}
	targets, err := newReliableTargets(n.sharding, pings("delivery", cfg.entities))
	if err != nil {
		return err
	}
	if err := requestAll(n.system, targets.msgs, func(int) *actor.PID { return region }); err != nil {
		return fmt.Errorf("warm-up through the region: %w", err)
	}
	b, err := startReliableBench(ctx, cfg, targets)
	if err != nil {
		return err
	}
	defer b.stop()
	return b.measure(ctx, cfg, rep, "on one node", "", func() (float64, error) {
		return refRate(ctx, count, b.messages, targets.msgs, targets.refs)
	})
}

func deliveryRemote(ctx context.Context, cfg config, rep *report) error {
	agent, err := startConsul()
	var skip *skipError
	if errors.As(err, &skip) {
		return &skipError{reason: "the rows to another process: " + skip.reason}
	}
	if err != nil {
		return err
	}
	defer agent.stop()
	r, err := startRemoteRegionOf(ctx, cfg, agent, deliveryType, deliveryRole)
	if err != nil {
		return err
	}
	defer r.stop()
	targets, err := newReliableTargets(r.node.sharding, r.msgs)
	if err != nil {
		return err
	}
	b, err := startReliableBench(ctx, cfg, targets)
	if err != nil {
		return err
	}
	defer b.stop()
	return b.measure(ctx, cfg, rep, "on another process", " to the other process", func() (float64, error) {
		return remoteRate(ctx, r.node.system, r.stats, b.messages, func(i int) error {
			e := i % len(targets.refs)
			return targets.refs[e].Send(targets.msgs[e])
		})
	})
}

// spawnDeliveryPeerActors spawns the delivery section's peer actors: a
// region hosting every entity of the remote delivery workload, and the
// stats actor counting the Pings they receive.
func spawnDeliveryPeerActors(n *node, cfg config, client *api.Client) error {
	var count atomic.Int64
	props := reliableProps(func() { count.Add(1) })
	if _, err := n.sharding.StartRegion(deliveryType, props, actorsharding.NewHashCodeMessageExtractor(cfg.shards), remoteStateStore(client, n.sharding.Cluster().Name(), deliveryType)); err != nil {
		return fmt.Errorf("start region: %w", err)
	}
	return spawnStats(n.system, &count)
}
