package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/actorsharding/consulstore"
	"github.com/protoshard/protoshard/internal/backoff"
	"github.com/protoshard/protoshard/internal/coordinator"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/lease"
	"github.com/protoshard/protoshard/lease/caslease"
	leaseconsul "github.com/protoshard/protoshard/lease/consul"
	"github.com/protoshard/protoshard/lease/consulcas"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/consul"
	"github.com/protoshard/protoshard/singleton"
)

const (
	failoverType = "BenchFailover"
	// failoverTTL is the Consul check TTL of the failover section's
	// members, the one the test kit's Consul backend uses: short, so that
	// a kill -9 is noticed within seconds, yet three refreshes (every
	// TTL/3) fit in it, so that a busy machine does not make a live member
	// look dead.
	failoverTTL = 3 * time.Second
	// failoverShards is how many shards are placed (over both regions)
	// before the kill.
	failoverShards = 20
	// failoverAttempt bounds one request after the kill: the figure is
	// known to within about this much.
	failoverAttempt = 200 * time.Millisecond
	// failoverLeaseTTL is the Consul session TTL of the coordinator's
	// lease in the lease variant: Consul's minimum. After a kill -9 the
	// next holder acquires it between TTL + lock delay and 2×TTL + lock
	// delay after the killed holder's last renewal.
	failoverLeaseTTL = 10 * time.Second
)

// failoverLease is the coordinator's lease in a failover variant.
type failoverLease int

const (
	noLease      failoverLease = iota
	sessionLease               // lease/consul: a Consul session and a KV lock
	casLease                   // lease/consulcas: a compare-and-set record, default timings
)

// failoverLeases returns the Consul leases of a lease variant: the
// coordinator's singleton runs only while its member holds the lease under
// the keys of the round's own cluster (service). The session lease's lock
// delay covers a heartbeat and an operation, the holder's time to stop;
// the compare-and-set lease runs on its defaults (duration 5s, renewal
// every second, margin 1s, drift 1%).
func failoverLeases(client *api.Client, service string, kind failoverLease) (lease.Provider, error) {
	if kind == casLease {
		p, err := consulcas.NewProvider(service, consulcas.WithClient(client),
			consulcas.WithLeaseOptions(caslease.WithLogger(slog.New(slog.DiscardHandler))))
		if err != nil {
			return nil, fmt.Errorf("consul cas leases: %w", err)
		}
		return p, nil
	}
	p, err := leaseconsul.NewProvider(service,
		leaseconsul.WithClient(client),
		leaseconsul.WithHeartbeatTimeout(failoverLeaseTTL),
		leaseconsul.WithHeartbeatInterval(time.Second),
		leaseconsul.WithOperationTimeout(time.Second),
		leaseconsul.WithSafetyMargin(2*time.Second),
		leaseconsul.WithLockDelay(3*time.Second),
		leaseconsul.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, fmt.Errorf("consul leases: %w", err)
	}
	return p, nil
}

// failoverOptions are the sharding settings of both processes of the
// failover section (the coordinator may run on either). They are the
// examples/consul and actorsharding Consul-test settings:
//   - the coordinator's state in Consul KV, so that the new coordinator
//     recovers the real shard homes instead of starting empty;
//   - a removal margin of one TTL: the new oldest waits that long after it
//     saw the old one removed before it starts the coordinator, so that a
//     node that was only cut off has fenced itself by then (the safety
//     part of the failover time);
//   - Register and GetShardHome resent every 200ms, singleton hand-over
//     retries every 200ms;
//   - no rebalance during the measurement (an hour), so that no hand-off
//     is in flight when the coordinator's node dies.
//
// With a lease (the lease variants), the coordinator's singleton also runs
// only while its member holds a Consul lease (failoverLeases).
func failoverOptions(client *api.Client, service string, kind failoverLease) ([]actorsharding.Option, error) {
	st := []singleton.Option{singleton.WithRemovalMargin(failoverTTL), singleton.WithHandOverRetryInterval(200 * time.Millisecond)}
	if kind != noLease {
		leases, err := failoverLeases(client, service, kind)
		if err != nil {
			return nil, err
		}
		st = append(st, singleton.WithLease(leases), singleton.WithLeaseRetryInterval(200*time.Millisecond))
	}
	return []actorsharding.Option{
		actorsharding.WithStateStore(consulstore.NewStateStore(client, service, failoverType)),
		actorsharding.WithCoordinatorSingleton(st...),
		actorsharding.WithRetryInterval(200 * time.Millisecond),
		actorsharding.WithRebalanceInterval(time.Hour),
	}, nil
}

// failoverProvider is the Consul membership of a failover member.
func failoverProvider(client *api.Client, service string) (membership.Provider, error) {
	p, err := consul.New(consul.WithClient(client), consul.WithServiceName(service), consul.WithTTL(failoverTTL),
		consul.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, fmt.Errorf("consul membership: %w", err)
	}
	return p, nil
}

// failoverPeer starts the failover section's peer node: the first member,
// so the oldest, which runs the coordinator, with a region of the type.
func failoverPeer(cfg config, client *api.Client, kind failoverLease) (*node, error) {
	provider, err := failoverProvider(client, cfg.service)
	if err != nil {
		return nil, err
	}
	opts, err := failoverOptions(client, cfg.service, kind)
	if err != nil {
		return nil, err
	}
	n, err := startNode(context.Background(), "failover-peer", provider)
	if err != nil {
		return nil, err
	}
	ex := actorsharding.NewHashCodeMessageExtractor(cfg.shards)
	if _, err := n.sharding.StartRegion(failoverType, entityProps(&counter{}), ex, opts...); err != nil {
		n.stop()
		return nil, fmt.Errorf("start region: %w", err)
	}
	return n, nil
}

// benchFailover: with Consul membership, the time from a kill -9 of the
// coordinator's node until a shard never seen before can be allocated (a
// request to an entity of it, sent through the surviving node's region,
// is answered). Baseline: the time from the same kill until the survivor's
// membership reports the killed node removed, the failure-detection floor
// that the Consul TTL sets; the ratio shows what sharding adds on top of
// it (the removal margin, finding the new coordinator, its state read
// from Consul, the region's retries). The median of cfg.failoverRounds
// kills, each with a fresh pair of members.
func benchFailover(ctx context.Context, cfg config, rep *report) error {
	agent, err := startConsul()
	if err != nil {
		return err
	}
	defer agent.stop()
	of := medianOf(cfg.failoverRounds, "kill", "kills")
	// The lease variants first: they are the safe configurations, and the
	// figures to read; the margin alone shows what a lease costs.
	for _, kind := range []failoverLease{sessionLease, casLease, noLease} {
		var failover, removal []float64
		for round := range cfg.failoverRounds {
			f, r, err := failoverRound(ctx, cfg, agent, round, kind)
			if err != nil {
				return fmt.Errorf("round %d (lease variant %d): %w", round+1, kind, err)
			}
			failover, removal = append(failover, ms(f)), append(removal, ms(r))
		}
		how := fmt.Sprintf("Consul TTL %v, removal margin %v", failoverTTL, failoverTTL)
		switch kind {
		case sessionLease:
			how += fmt.Sprintf(", coordinator lease: session TTL %v", failoverLeaseTTL)
		case casLease:
			how += ", coordinator lease: compare-and-set record, duration 5s (the default)"
		default:
			how += ", no lease"
		}
		rep.add(paired(figure{
			Section:      "failover",
			Workload:     fmt.Sprintf("kill -9 of the coordinator's node until a new shard is allocated, %s (%s)", of, how),
			Unit:         "ms",
			BaselineName: "Consul membership sees the node removed",
		}, failover, removal))
	}
	return nil
}

// failoverRound starts a peer (the oldest member: the coordinator) and a
// node of this process, places shards on both, kills the peer and returns
// the time until a new shard is allocated and the time until the
// membership saw the peer removed.
func failoverRound(ctx context.Context, cfg config, agent *consulAgent, round int, kind failoverLease) (failover, removal time.Duration, err error) {
	// A service (so a cluster name) of its own per round, so that the
	// members of an earlier round (their registrations linger until Consul
	// deregisters them) are not in this one; and a clean coordinator state.
	service := fmt.Sprintf("protoshard-bench-failover-%d-%d-%d", os.Getpid(), round, kind)
	store := consulstore.NewStateStore(agent.client, service, failoverType)
	if _, err := agent.client.KV().Delete(store.Key(), nil); err != nil {
		return 0, 0, fmt.Errorf("clearing the coordinator state: %w", err)
	}
	role := map[failoverLease]string{noLease: failoverRole, sessionLease: failoverLeaseRole, casLease: failoverCASLeaseRole}[kind]
	peer, err := startPeer(ctx, cfg, role, agent.addr, service)
	if err != nil {
		return 0, 0, err
	}
	defer peer.stop()
	provider, err := failoverProvider(agent.client, service)
	if err != nil {
		return 0, 0, err
	}
	n, err := startNode(ctx, "failover-a", provider)
	if err != nil {
		return 0, 0, err
	}
	defer n.stop()
	if ms := n.cluster.Members(); len(ms) != 2 || ms[0].Address != peer.address {
		return 0, 0, fmt.Errorf("the peer %s should be the oldest of two members, the members are %v", peer.address, ms)
	}
	removed := watchRemoval(n, peer.address)
	defer n.system.Root.Stop(removed.pid)

	ex := actorsharding.NewHashCodeMessageExtractor(cfg.shards)
	opts, err := failoverOptions(agent.client, service, kind)
	if err != nil {
		return 0, 0, err
	}
	region, err := n.sharding.StartRegion(failoverType, entityProps(&counter{}), ex, opts...)
	if err != nil {
		return 0, 0, fmt.Errorf("start region: %w", err)
	}
	if err := waitRegions(ctx, n.system, region, 2); err != nil {
		return 0, 0, err
	}
	// One entity in each of failoverShards shards; the least-shard
	// allocation puts about half of them on each region.
	placed := entitiesOfShards(ex, "failover", min(failoverShards, cfg.shards-1), nil)
	if err := requestAll(n.system, placed, func(int) *actor.PID { return region }); err != nil {
		return 0, 0, fmt.Errorf("placing shards: %w", err)
	}
	before, _, err := coordinator.LoadState(ctx, store)
	if err != nil {
		return 0, 0, err
	}
	self := coordinator.RegionKey(region)
	var onPeer *testpb.Ping
	for _, m := range placed {
		if home := before.Shards[ex.ShardID(m.EntityId)]; home != self && home != "" {
			onPeer = m
			break
		}
	}
	if len(before.Regions) != 2 || onPeer == nil || len(before.Regions[self].Shards) == 0 {
		return 0, 0, fmt.Errorf("before the kill the coordinator's state should show shards on both regions, it shows %v", shardsPerRegion(before))
	}
	// An entity of a shard no region has hosted.
	fresh := entitiesOfShards(ex, "failover-new", 1, before.Shards)[0]

	t0 := time.Now()
	if err := peer.kill(); err != nil {
		return 0, 0, err
	}
	if err := firstAnswer(ctx, n.system, region, fresh, failoverAttempt); err != nil {
		return 0, 0, fmt.Errorf("a new shard %v after the kill: %w", time.Since(t0), err)
	}
	failover = time.Since(t0)
	select {
	case at := <-removed.at:
		removal = at.Sub(t0)
	case <-ctx.Done():
		return 0, 0, fmt.Errorf("the membership never reported the killed peer removed: %w", ctx.Err())
	}

	// The peer's shards get a new home too, and the shards of this node
	// kept theirs: the new coordinator recovered the state, it did not
	// start from scratch.
	if err := askUntil(ctx, n.system, region, onPeer, 30*time.Second); err != nil {
		return 0, 0, fmt.Errorf("an entity of a shard of the killed node: %w", err)
	}
	after, _, err := coordinator.LoadState(ctx, store)
	if err != nil {
		return 0, 0, err
	}
	for _, shard := range before.Regions[self].Shards {
		if after.Shards[shard] != self {
			return 0, 0, fmt.Errorf("shard %s of the surviving region was not recovered: now %q", shard, after.Shards[shard])
		}
	}
	if len(after.Regions) != 1 {
		return 0, 0, fmt.Errorf("after the failover the coordinator's state shows %v, want only the surviving region", shardsPerRegion(after))
	}
	return failover, removal, nil
}

// removalWatch records when a member is reported removed.
type removalWatch struct {
	pid *actor.PID
	at  chan time.Time
}

// watchRemoval subscribes to n's membership events and records the time of
// the MemberRemoved of the member at address.
func watchRemoval(n *node, address string) removalWatch {
	w := removalWatch{at: make(chan time.Time, 1)}
	w.pid = n.system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch e := ctx.Message().(type) {
		case *actor.Started:
			n.cluster.Subscribe(ctx.Self())
		case *actor.Stopping:
			n.cluster.Unsubscribe(ctx.Self())
		case membership.MemberRemoved:
			if e.Member.Address == address {
				select {
				case w.at <- time.Now():
				default:
				}
			}
		}
	}))
	return w
}

// entitiesOfShards returns one Ping for each of n shards that are not in
// skip, entity IDs "prefix-<i>".
func entitiesOfShards(ex actorsharding.MessageExtractor, prefix string, n int, skip map[string]string) []*testpb.Ping {
	seen := map[string]bool{}
	var out []*testpb.Ping
	for i := 0; len(out) < n; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		s := ex.ShardID(id)
		if _, taken := skip[s]; taken || seen[s] {
			continue
		}
		seen[s] = true
		out = append(out, &testpb.Ping{EntityId: id, Seq: int64(i), From: "bench"})
	}
	return out
}

// firstAnswer asks msg through region in attempts of attempt each until one
// is answered. A request that times out leaves its message buffered in the
// region until the shard has a home (then its answer goes to dead
// letters), so the first answered attempt comes within one attempt of the
// allocation.
func firstAnswer(ctx context.Context, system *actor.ActorSystem, region *actor.PID, msg *testpb.Ping, attempt time.Duration) error {
	for {
		start := time.Now()
		res, err := system.Root.RequestFuture(region, msg, attempt).Result()
		if _, ok := res.(*testpb.Pong); err == nil && ok {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("no answer (last: %v): %w", err, ctx.Err())
		}
		if !errors.Is(err, actor.ErrTimeout) {
			// Not a timeout: do not spin.
			_ = backoff.Sleep(ctx, attempt-time.Since(start))
		}
	}
}

// askUntil asks msg through region until it is answered or d passed.
func askUntil(ctx context.Context, system *actor.ActorSystem, region *actor.PID, msg *testpb.Ping, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		res, err := system.Root.RequestFuture(region, msg, time.Second).Result()
		if _, ok := res.(*testpb.Pong); err == nil && ok {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("answered %T", res)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s: %w", msg.EntityId, err)
		}
		_ = backoff.Sleep(ctx, 50*time.Millisecond)
	}
}

// shardsPerRegion summarises a coordinator state for an error message.
func shardsPerRegion(st coordinator.State) map[string]int {
	out := map[string]int{}
	for k, r := range st.Regions {
		out[k] = len(r.Shards)
	}
	return out
}
