package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/actorsharding/consulstore"
	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/internal/backoff"
	"github.com/protoshard/protoshard/internal/coordinator"
	"github.com/protoshard/protoshard/internal/shardingadmin"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
)

const (
	scaleType = "BenchScale"
	// scaleStarters is how many nodes start at once: each start is mostly
	// waiting (the remote's listener, the join, the region's registration).
	scaleStarters = 8
	// scalePoll is how often the rebalance workload reads the
	// coordinator's state (a copy of it: about half a millisecond of the
	// coordinator's time at 10,000 shards).
	scalePoll = 10 * time.Millisecond
	// scaleAttempt bounds one request after the crash of the coordinator's
	// node: the failover figure is known to within about this much.
	scaleAttempt = 200 * time.Millisecond
	// rebalanceRoundLog is the message of the coordinator's debug line for
	// each rebalance round; its "shards" attribute is the hand-offs the
	// round started.
	rebalanceRoundLog = "shard coordinator: rebalance round"
	// scaleRequestTimeout bounds each request of the allocation: they
	// all start at once, and the last waits for every allocation before
	// its own.
	scaleRequestTimeout = time.Minute
)

// scaleSize is a cluster of the scale section: regions (one per node)
// holding shards, and joining regions that join it for the rebalance.
type scaleSize struct{ regions, shards, joining int }

func newScaleSize(regions, shards int) scaleSize {
	return scaleSize{regions: regions, shards: shards, joining: max(1, regions/10)}
}

// tenth is the baseline of s: a tenth of its regions and of its shards.
func (s scaleSize) tenth() scaleSize { return newScaleSize(max(1, s.regions/10), max(1, s.shards/10)) }

// senders is how many of the regions send the allocating requests: every
// tenth. With every region sending, each node would connect to each
// other, 100 × 99 gRPC streams in this one process.
func (s scaleSize) senders() int { return max(1, s.regions/10) }

func (s scaleSize) String() string {
	return fmt.Sprintf("%d regions, %d shards", s.regions, s.shards)
}

// scaleRun is what one round of the scale section measured.
type scaleRun struct {
	allocate  time.Duration // until every shard was allocated
	rebalance time.Duration // from the joining regions' start until the shards are even
	failover  time.Duration // from the crashed coordinator's removal until a shard of its region answers again
	rounds    []int         // the hand-offs each rebalance round started
	state     []byte        // the encoded coordinator state once every shard was allocated
	template  coordinator.RegionEntry
}

// benchScale: one process, a cluster of cfg.scaleRegions nodes, each an
// actor system with its remote on loopback and a region, in-process
// membership and the coordinator's state in memory, allocates
// cfg.scaleShards shards (one entity each); then a tenth more regions
// join and the coordinator rebalances. On a cluster of cfg.scaleFailover
// regions (see scaleRound) the coordinator's node crashes after the
// allocation. Each figure against the same on a tenth of the cluster (a
// tenth of the regions and of the shards), measured in the same
// repetitions, so that a ratio of about 10 means linear growth. The
// rebalance rounds are also compared with the allocation strategy alone,
// and the encoded state with Consul's limit.
func benchScale(ctx context.Context, cfg config, rep *report) error {
	big := newScaleSize(cfg.scaleRegions, cfg.scaleShards)
	small := big.tenth()
	// The failover on a cluster of its own, without joining regions.
	bigFailover := scaleSize{regions: cfg.scaleFailover, shards: cfg.scaleShards}
	smallFailover := scaleSize{regions: max(2, bigFailover.regions/10), shards: max(1, bigFailover.shards/10)}
	var bigRuns, smallRuns, bigFailovers, smallFailovers []scaleRun
	side := func(size scaleSize, failover bool, runs *[]scaleRun) func() error {
		return func() error {
			r, err := scaleRound(ctx, cfg, size, failover)
			if err != nil {
				return fmt.Errorf("%v: %w", size, err)
			}
			*runs = append(*runs, r)
			return nil
		}
	}
	err := interleave(cfg.scaleRounds, side(big, false, &bigRuns), side(small, false, &smallRuns),
		side(bigFailover, true, &bigFailovers), side(smallFailover, true, &smallFailovers))
	if err != nil {
		return err
	}
	of := medianOf(cfg.scaleRounds, "round", "rounds")
	values := func(runs []scaleRun, v func(scaleRun) float64) []float64 {
		out := make([]float64, len(runs))
		for i, r := range runs {
			out[i] = v(r)
		}
		return out
	}
	tenth := func(what string) string { return fmt.Sprintf("the same %s on %v", what, small) }

	rep.add(paired(figure{
		Section:      "scale",
		Workload:     fmt.Sprintf("allocate %d shards over %d regions (one node each, requests through %d of them), %s", big.shards, big.regions, big.senders(), of),
		Unit:         "ms",
		BaselineName: tenth("allocation"),
	}, values(bigRuns, func(r scaleRun) float64 { return ms(r.allocate) }),
		values(smallRuns, func(r scaleRun) float64 { return ms(r.allocate) })))
	rep.add(paired(figure{
		Section: "scale",
		Workload: fmt.Sprintf("rebalance after %d regions join %v (interval %v), until even, %s",
			big.joining, big, cfg.rebalanceInterval, of),
		Unit:         "ms",
		BaselineName: tenth(fmt.Sprintf("with %d joining", small.joining)),
	}, values(bigRuns, func(r scaleRun) float64 { return ms(r.rebalance) }),
		values(smallRuns, func(r scaleRun) float64 { return ms(r.rebalance) })))

	strategy := coordinatoractor.NewLeastShardAllocationStrategy(coordinatoractor.DefaultRebalanceAbsoluteLimit, coordinatoractor.DefaultRebalanceRelativeLimit)
	simulated, err := simulateRebalance(strategy, big)
	if err != nil {
		return err
	}
	rep.add(paired(figure{
		Section:      "scale",
		Workload:     fmt.Sprintf("rebalance rounds after %d regions join %v, %s", big.joining, big, of),
		Unit:         "rounds",
		BaselineName: fmt.Sprintf("the rounds of %v alone, in memory (%d shards moved)", strategy, sum(simulated)),
	}, values(bigRuns, func(r scaleRun) float64 { return float64(len(r.rounds)) }),
		values(bigRuns, func(scaleRun) float64 { return float64(len(simulated)) })))
	limit := roundLimit(big.shards)
	rep.add(paired(figure{
		Section:      "scale",
		Workload:     fmt.Sprintf("most shards one rebalance round moved, %v + %d joining, %s", big, big.joining, of),
		Unit:         "shards",
		BaselineName: fmt.Sprintf("the per-round limit of %v: max(1, min(%d, %g × %d shards))", strategy, coordinatoractor.DefaultRebalanceAbsoluteLimit, coordinatoractor.DefaultRebalanceRelativeLimit, big.shards),
	}, values(bigRuns, func(r scaleRun) float64 { return float64(slices.Max(r.rounds)) }),
		values(bigRuns, func(scaleRun) float64 { return float64(limit) })))
	rep.add(paired(figure{
		Section:      "scale",
		Workload:     fmt.Sprintf("crash of the coordinator's node until a shard of its region answers elsewhere, %v, %s", bigFailover, of),
		Unit:         "ms",
		BaselineName: fmt.Sprintf("the same failover on %v", smallFailover),
	}, values(bigFailovers, func(r scaleRun) float64 { return ms(r.failover) }),
		values(smallFailovers, func(r scaleRun) float64 { return ms(r.failover) })))
	rep.add(paired(figure{
		Section:      "scale",
		Workload:     fmt.Sprintf("encoded coordinator state, %v, %s", big, of),
		Unit:         "bytes",
		BaselineName: "Consul's limit, consulstore.MaxStateBytes",
	}, values(bigRuns, func(r scaleRun) float64 { return float64(len(r.state)) }),
		values(bigRuns, func(scaleRun) float64 { return consulstore.MaxStateBytes })))

	// The 10x cluster, built in memory: regions like those of the run.
	projected := newScaleSize(10*big.regions, 10*big.shards)
	data, err := coordinator.EncodeState(syntheticState(bigRuns[0].template, projected))
	if err != nil {
		return fmt.Errorf("encoding the state of %v: %w", projected, err)
	}
	rep.add(paired(figure{
		Section:      "scale",
		Workload:     fmt.Sprintf("encoded coordinator state, %v, built in memory with the run's region and shard names", projected),
		Unit:         "bytes",
		BaselineName: "Consul's limit, consulstore.MaxStateBytes",
	}, []float64{float64(len(data))}, []float64{consulstore.MaxStateBytes}))
	return nil
}

// scaleRound starts a cluster of size and allocates its shards; then, if
// size has joining regions, the rebalance; then, if failover, the crash of
// the coordinator's node.
//
// The failover has a cluster of its own: the new coordinator sends every
// region that registers the homes of all shards (ShardHomes), and each
// region watches every region named there, so after a failover every node
// connects to every other: 110 nodes in one process need about 24,000
// file descriptors (4 per pair of nodes), beyond the 20,000 of the
// machine the figures of docs/benchmarks.md come from.
func scaleRound(ctx context.Context, cfg config, size scaleSize, failover bool) (run scaleRun, err error) {
	registry := local.NewRegistry()
	store := coordinatoractor.NewMemoryStore()
	ex := actorsharding.NewHashCodeMessageExtractor(size.shards)
	opts := rebalanceOptions(store, cfg.rebalanceInterval)
	props := entityProps(&counter{})
	var rounds roundsLog

	var mu sync.Mutex
	nodes := map[int]*node{}
	regions := map[int]*actor.PID{}
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		var running []*node
		for _, n := range nodes {
			running = append(running, n)
		}
		stopNodes(running...)
	}()
	start := func(i int, system *actor.ActorSystem) error {
		name := fmt.Sprintf("scale-%d", i)
		n, err := startNodeOn(ctx, system, name, registry.Provider())
		if err != nil {
			return err
		}
		mu.Lock()
		nodes[i] = n
		mu.Unlock()
		region, err := n.sharding.StartRegion(scaleType, props, ex, opts...)
		if err != nil {
			return fmt.Errorf("%s: start region: %w", name, err)
		}
		mu.Lock()
		regions[i] = region
		mu.Unlock()
		return nil
	}
	startAll := func(from, to int) error {
		var wg sync.WaitGroup
		errs := make(chan error, to-from)
		sem := make(chan struct{}, scaleStarters)
		for i := from; i < to; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				if err := start(i, newSystem(fmt.Sprintf("scale-%d", i))); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		return <-errs // nil when none failed
	}
	// The first node is the oldest: it runs the coordinator, whose
	// rebalance rounds its log tells.
	if err := start(0, newObservedSystem("scale-0", rounds.observe)); err != nil {
		return run, err
	}
	if err := startAll(1, size.regions); err != nil {
		return run, err
	}
	first := nodes[0]
	if err := waitRegions(ctx, first.system, regions[0], size.regions); err != nil {
		return run, err
	}
	coordPID := actor.NewPID(first.system.Address(), shardingadmin.CoordinatorManagerName(scaleType)+"/singleton/coordinator")

	// Allocation: one entity per shard, each sender region requesting its
	// share at once.
	msgs := entitiesOfShards(ex, "scale", size.shards, nil)
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, size.senders())
	for s := range size.senders() {
		i := s * size.regions / size.senders()
		var mine []*testpb.Ping
		for j := s; j < len(msgs); j += size.senders() {
			mine = append(mine, msgs[j])
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := requestAllWithin(nodes[i].system, mine, func(int) *actor.PID { return regions[i] }, scaleRequestTimeout); err != nil {
				errs <- fmt.Errorf("allocating through region %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return run, err
	}
	run.allocate = time.Since(t0)
	cur, err := coordinatorState(first.system, coordPID)
	if err != nil {
		return run, err
	}
	if counts := shardsPerRegionCounts(cur.State); !even(counts, size.regions, size.shards) {
		return run, fmt.Errorf("after the allocation the coordinator's state shows %v shards per region, want %d in all, evenly over %d", counts, size.shards, size.regions)
	}
	if run.state, err = coordinator.EncodeState(cur.State); err != nil {
		return run, err
	}
	run.template = cur.State.Regions[coordinator.RegionKey(regions[0])]

	shardOf := make(map[string]*testpb.Ping, len(msgs))
	for _, m := range msgs {
		shardOf[ex.ShardID(m.EntityId)] = m
	}
	if size.joining > 0 {
		// Rebalance: a tenth more regions join. A shard handed off is
		// placed again on its next message; as traffic would, the
		// workload sends one to each shard the state shows unallocated.
		rounds.record()
		if err := startAll(size.regions, size.regions+size.joining); err != nil {
			return run, err
		}
		t1 := time.Now()
		var last []int
		for {
			cur, err := coordinatorState(first.system, coordPID)
			if err == nil {
				last = shardsPerRegionCounts(cur.State)
				if even(last, size.regions+size.joining, size.shards) && len(cur.RebalanceInProgress) == 0 {
					break
				}
				for shard, m := range shardOf {
					if _, ok := cur.State.Shards[shard]; !ok {
						first.system.Root.Send(regions[0], m)
					}
				}
			}
			if err := backoff.Sleep(ctx, scalePoll); err != nil {
				return run, fmt.Errorf("shards not even after %d regions joined (last %v): %w", size.joining, last, err)
			}
		}
		run.rebalance = time.Since(t1)
		run.rounds = rounds.stop()
		if len(run.rounds) == 0 {
			return run, fmt.Errorf("no rebalance round seen in the coordinator's log (%q)", rebalanceRoundLog)
		}
	}
	if !failover {
		return run, nil
	}

	// Failover: the coordinator's node crashes; the time from its removal
	// until an entity of a shard of its region answers through another.
	cur, err = coordinatorState(first.system, coordPID)
	if err != nil {
		return run, err
	}
	lost := cur.State.Regions[coordinator.RegionKey(regions[0])].Shards
	if len(lost) == 0 {
		return run, fmt.Errorf("the coordinator's node holds no shard: %v", shardsPerRegionCounts(cur.State))
	}
	via := size.regions + size.joining - 1
	memberID := first.cluster.Self().ID
	mu.Lock()
	delete(nodes, 0)
	mu.Unlock()
	crash(first)
	t2 := time.Now()
	registry.Remove(memberID)
	if err := firstAnswer(ctx, nodes[via].system, regions[via], shardOf[lost[0]], scaleAttempt); err != nil {
		return run, fmt.Errorf("a shard of the crashed node, %v after its removal: %w", time.Since(t2), err)
	}
	run.failover = time.Since(t2)
	return run, nil
}

// crash stops n as a crash would: nothing it sends leaves it any more,
// and its actors stop (its coordinator must not write the shared state
// store after its successor started).
func crash(n *node) {
	n.remote.Shutdown(false)
	n.cluster.Close()
	stopActors(n.system)
	n.system.Shutdown()
}

// coordinatorState asks the coordinator for a copy of its state.
func coordinatorState(system *actor.ActorSystem, coordPID *actor.PID) (*coordinator.CurrentCoordinatorState, error) {
	res, err := system.Root.RequestFuture(coordPID, &coordinator.GetCoordinatorState{}, requestTimeout).Result()
	if err != nil {
		return nil, fmt.Errorf("coordinator state: %w", err)
	}
	cur, ok := res.(*coordinator.CurrentCoordinatorState)
	if !ok {
		return nil, fmt.Errorf("the coordinator answered %T", res)
	}
	return cur, nil
}

// shardsPerRegionCounts is each region's number of shards.
func shardsPerRegionCounts(st coordinator.State) []int {
	out := make([]int, 0, len(st.Regions))
	for _, r := range st.Regions {
		out = append(out, len(r.Shards))
	}
	return out
}

// roundsLog collects, from a coordinator's log, the hand-offs each
// rebalance round started, while it records.
type roundsLog struct {
	mu        sync.Mutex
	recording bool
	rounds    []int
}

func (l *roundsLog) observe(r slog.Record) {
	if r.Message != rebalanceRoundLog {
		return
	}
	n := -1
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "shards" {
			n = int(a.Value.Int64())
			return false
		}
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.recording {
		l.rounds = append(l.rounds, n)
	}
}

// record starts recording.
func (l *roundsLog) record() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recording, l.rounds = true, nil
}

// stop ends recording and returns the rounds recorded.
func (l *roundsLog) stop() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recording = false
	return slices.Clone(l.rounds)
}

// roundLimit is the most shards one round of the strategy with the
// default limits moves with shards allocated: max(1, min(int(relative
// limit × shards), absolute limit)).
func roundLimit(shards int) int {
	return max(1, min(int(coordinatoractor.DefaultRebalanceRelativeLimit*float64(shards)), coordinatoractor.DefaultRebalanceAbsoluteLimit))
}

// simulateRebalance runs strategy alone on size's cluster, the shards
// spread evenly over its regions and its joining regions empty: each round
// hands the shards it picks off and allocates them again (as their next
// message would), and it returns the shards each round moved.
func simulateRebalance(strategy coordinatoractor.ShardAllocationStrategy, size scaleSize) ([]int, error) {
	current := make([]coordinatoractor.RegionAllocation, size.regions+size.joining)
	for i := range current {
		addr := fmt.Sprintf("10.0.%d.%d:8090", i/256, i%256)
		current[i] = coordinatoractor.RegionAllocation{
			Region: actor.NewPID(addr, "region"),
			Member: membership.Member{ID: addr, Address: addr, Age: uint64(i + 1), Status: membership.Up},
		}
	}
	for s := range size.shards {
		r := &current[s%size.regions]
		r.Shards = append(r.Shards, strconv.Itoa(s))
	}
	var rounds []int
	for len(rounds) <= size.shards {
		moved := strategy.Rebalance(current, nil)
		if len(moved) == 0 {
			return rounds, nil
		}
		rounds = append(rounds, len(moved))
		for i := range current {
			current[i].Shards = slices.DeleteFunc(current[i].Shards, func(s string) bool { return slices.Contains(moved, s) })
		}
		for _, s := range moved {
			to := strategy.AllocateShard(nil, s, current)
			i := slices.IndexFunc(current, func(r coordinatoractor.RegionAllocation) bool { return r.Region == to })
			if i < 0 {
				return nil, fmt.Errorf("the strategy allocated shard %s to %v, not a region", s, to)
			}
			current[i].Shards = append(current[i].Shards, s)
		}
	}
	return nil, fmt.Errorf("the strategy still moves shards after %d rounds", len(rounds))
}

// syntheticState is a coordinator state of size.regions regions shaped
// like template (a region of the run: its PID's ID and port, its member
// ID's length and its extractor), on addresses 10.0.x.y, holding
// size.shards shards named as the hash-code extractor names them.
func syntheticState(template coordinator.RegionEntry, size scaleSize) coordinator.State {
	st := coordinator.NewState(false)
	port, id := "8090", scaleType
	if template.PID != nil {
		if _, p, err := net.SplitHostPort(template.PID.Address); err == nil {
			port = p
		}
		id = template.PID.Id
	}
	for i := range size.regions {
		addr := net.JoinHostPort(fmt.Sprintf("10.0.%d.%d", i/256, i%256), port)
		pid := actor.NewPID(addr, id)
		key := coordinator.RegionKey(pid)
		entry := coordinator.RegionEntry{
			PID:       pid,
			MemberID:  fmt.Sprintf("%0*d", len(template.MemberID), i),
			Extractor: template.Extractor,
		}
		for s := i; s < size.shards; s += size.regions {
			entry.Shards = append(entry.Shards, strconv.Itoa(s))
			st.Shards[strconv.Itoa(s)] = key
		}
		st.Regions[key] = entry
	}
	return st
}

func sum(v []int) int {
	t := 0
	for _, x := range v {
		t += x
	}
	return t
}
