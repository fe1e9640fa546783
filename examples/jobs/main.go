// Command jobs is a job scheduler on cluster sharding and a cluster
// singleton, across three in-process nodes with no set-up at all:
//
//   - every job is a sharded Job entity (entity ID = job ID) holding the
//     job's owner, the owner's epoch (a fencing token) and the last step it
//     accepted, in a store that survives the entity moving;
//   - a cluster singleton Scheduler gives each job to the least loaded live
//     worker with Assign{job, worker, epoch}, through the Job region, with
//     an epoch above the job's current one;
//   - workers (plain actors, two per node) heartbeat to the scheduler and
//     report each step of their jobs to the job entities through the region;
//   - jobs are submitted by reliable delivery: a ShardingProducerController
//     (the submitter) sends each CreateJob until its job confirms it, and
//     the job stores the delivery progress with its record, so no
//     submission is lost or processed twice, even while the job moves.
//
// The story: one worker freezes (a long GC pause) and loses its link to the
// scheduler; the scheduler declares it dead and gives its jobs to others
// under a higher epoch; the frozen worker wakes up as a zombie that still
// believes it owns them and keeps reporting, and the jobs reject every one
// of its reports. Then the oldest node, which runs the scheduler, leaves:
// the scheduler restarts on another node with an empty memory, rebuilds its
// tables and gives the jobs of the departed node's workers to others. Every
// job finishes, and the run checks each job's history: every accepted
// report came from the owner of the moment, under its epoch, with a higher
// step than the last.
//
//	go run ./examples/jobs
//	go run ./examples/jobs -short
//
// PROTOSHARD_LOG=1 shows the nodes' logs on stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/actorsharding/delivery"
	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/examples/jobs/jobspb"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/singleton"
)

const (
	// jobType is the entity type of the jobs.
	jobType = "Job"
	// schedulerManager is the name of the scheduler's singleton managers.
	schedulerManager = "scheduler"
	// zombieID is the worker that freezes and comes back as a zombie.
	zombieID = "w-b1"
)

// config is what a run does; main fills it from the flags.
type config struct {
	jobs   int   // number of jobs
	steps  int32 // steps per job
	shards int   // number of shards of the Job type
	timing timing
}

// timing is how fast everything goes. The demo wants a short run; a real
// deployment would heartbeat every few seconds and wait longer before
// declaring a worker dead.
type timing struct {
	heartbeat        time.Duration // worker heartbeat interval
	heartbeatTimeout time.Duration // silence after which the scheduler declares a worker dead
	schedulerTick    time.Duration // how often the scheduler checks workers and assigns jobs
	assignRetry      time.Duration // an unanswered Assign is sent again after this
	step             time.Duration // one step of a job
	reportRetry      time.Duration // an unanswered report is sent again after this
	deadline         time.Duration // bounds each wait of the driver
}

func defaultConfig() config {
	return config{
		jobs:   24,
		steps:  20,
		shards: 30,
		timing: timing{
			heartbeat:        100 * time.Millisecond,
			heartbeatTimeout: 800 * time.Millisecond,
			schedulerTick:    100 * time.Millisecond,
			assignRetry:      time.Second,
			step:             100 * time.Millisecond,
			reportRetry:      time.Second,
			deadline:         30 * time.Second,
		},
	}
}

func main() {
	cfg := defaultConfig()
	short := flag.Bool("short", false, "a quick run: 12 jobs")
	jobs := flag.Int("jobs", 0, "number of jobs (default 24, 12 with -short)")
	flag.Parse()
	if *short {
		cfg.jobs = 12
	}
	if *jobs > 0 {
		cfg.jobs = *jobs
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// run tells the story on out and returns an error if a check failed.
func run(ctx context.Context, out io.Writer, cfg config) error {
	res, err := simulate(ctx, out, cfg)
	if err != nil {
		return err
	}
	return res.verify(out)
}

// story prints what happens, from the driver and the actors alike, with the
// time since the start.
type story struct {
	mu    sync.Mutex
	out   io.Writer
	start time.Time
}

func (s *story) printf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.out, "[%5.2fs] %s\n", time.Since(s.start).Seconds(), fmt.Sprintf(format, args...))
}

// node is one member with its Job region, scheduler proxy and workers.
type node struct {
	name      string
	system    *actor.ActorSystem
	remote    *remote.Remote
	cluster   *membership.Cluster
	sharding  *actorsharding.Sharding
	region    *actor.PID
	scheduler *actor.PID // proxy
	workers   map[string]*actor.PID
	left      bool
}

// demo is one run.
type demo struct {
	cfg      config
	story    *story
	registry *local.Registry
	coord    coordinatoractor.StateStore
	jobs     *jobStore
	nodes    []*node
	stats    map[string]*workerStats
	zombie   *zombiePlan
	frozen   chan []heldJob
	release  chan struct{}
	woken    sync.Once
}

// wake releases the zombie from its freeze.
func (d *demo) wake() { d.woken.Do(func() { close(d.release) }) }

// result is what a run did, for the checks.
type result struct {
	jobs    []*jobspb.Job
	workers map[string]workerCounters
	took    time.Duration
	// submitted is how many jobs were submitted, duringLeave how many of
	// them while the oldest node left; submitter is the submitter's stats.
	submitted, duringLeave int
	submitter              delivery.ProducerStats
}

// simulate runs the story, printing it on out, and returns what happened
// for verify to judge. It fails only if the run could not go on.
func simulate(ctx context.Context, out io.Writer, cfg config) (*result, error) {
	// At least three jobs, so that the zombie (the third worker by ID) gets
	// one; at least four steps, so that each job can send its duplicate of
	// step 2 after step 3.
	if cfg.jobs < 3 || cfg.steps < 4 || cfg.shards < 1 {
		return nil, fmt.Errorf("bad config: %d jobs of %d steps in %d shards (need at least 3 jobs of 4 steps)", cfg.jobs, cfg.steps, cfg.shards)
	}
	d := &demo{
		cfg:      cfg,
		story:    &story{out: out, start: time.Now()},
		registry: local.NewRegistry(),
		// Shared by the nodes: the coordinator's state survives its moves.
		coord:   coordinatoractor.NewMemoryStore(),
		jobs:    newJobStore(),
		stats:   map[string]*workerStats{},
		frozen:  make(chan []heldJob, 1),
		release: make(chan struct{}),
	}
	d.zombie = &zombiePlan{frozen: d.frozen, release: d.release, maxPause: cfg.timing.deadline}
	defer d.shutdown()
	defer d.wake() // never leave the zombie frozen

	for _, name := range []string{"node-a", "node-b", "node-c"} {
		if err := d.startNode(ctx, name); err != nil {
			return nil, err
		}
	}
	if err := d.waitReady(ctx, 3, 6); err != nil {
		return nil, err
	}
	where, err := d.schedulerNode(ctx)
	if err != nil {
		return nil, err
	}
	d.story.printf("3 nodes up, 2 workers each; the scheduler runs on %s (the oldest)", where)

	// Jobs are submitted by reliable delivery, from node-b (which stays):
	// the job stores itself and tells the scheduler, which assigns it.
	// Half now; the others while the oldest node leaves.
	submitter, err := delivery.StartShardingProducerController(d.nodes[1].sharding, jobType, "submitter")
	if err != nil {
		return nil, err
	}
	defer func() { _ = submitter.Stop(context.Background()) }()
	ids := make([]string, cfg.jobs)
	for i := range ids {
		ids[i] = fmt.Sprintf("job-%02d", i+1)
	}
	// At least three jobs first, so that the zombie gets one.
	first := min(cfg.jobs, max(3, cfg.jobs/2))
	if err := d.submit(ctx, submitter, ids[:first], 0); err != nil {
		return nil, err
	}
	d.story.printf("%d jobs of %d steps submitted and confirmed by their jobs (a step every %v)", first, cfg.steps, cfg.timing.step)

	// The zombie.
	var held []heldJob
	select {
	case held = <-d.frozen:
	case <-time.After(cfg.timing.deadline):
		return nil, errors.New("the zombie worker never got a job")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	d.story.printf("%s freezes (a long GC pause) holding %s, and its link to the scheduler breaks: no more heartbeats",
		zombieID, heldString(held))
	if err := d.waitReassigned(ctx, held); err != nil {
		return nil, err
	}
	d.story.printf("%s wakes up: it still believes it owns %s and goes on reporting", zombieID, heldString(held))
	d.wake()

	// The oldest node leaves; its workers go with it. Meanwhile the other
	// jobs are submitted, a step apart: their shards may be handing off.
	leaving := d.nodes[0]
	d.story.printf("%s leaves gracefully; its workers %s stop mid-job; the submitter sends the other %d jobs meanwhile",
		leaving.name, strings.Join(sortedKeys(leaving.workers), ", "), cfg.jobs-first)
	submitted := make(chan error, 1)
	go func() { submitted <- d.submit(ctx, submitter, ids[first:], cfg.timing.step/2) }()
	if err := d.leave(ctx, leaving); err != nil {
		return nil, err
	}
	if err := <-submitted; err != nil {
		return nil, err
	}
	if where, err = d.schedulerNode(ctx); err != nil {
		return nil, err
	}
	d.story.printf("%s left; the scheduler runs on %s now; all %d jobs confirmed their submission", leaving.name, where, cfg.jobs)

	jobs, err := d.waitAllDone(ctx, ids)
	if err != nil {
		return nil, err
	}
	res := &result{jobs: jobs, workers: map[string]workerCounters{}, took: time.Since(d.story.start),
		submitted: cfg.jobs, duringLeave: cfg.jobs - first}
	if res.submitter, err = submitter.Stats(ctx); err != nil {
		return nil, fmt.Errorf("submitter stats: %w", err)
	}
	for id, st := range d.stats {
		res.workers[id] = st.snapshot()
	}
	return res, nil
}

// logging keeps the nodes quiet unless PROTOSHARD_LOG is set ("debug" for
// the debug level): the story is printed, the logs would drown it.
func logging(node string) actor.ConfigOption {
	return actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		level := slog.LevelInfo
		switch os.Getenv("PROTOSHARD_LOG") {
		case "", "0":
			return slog.New(slog.DiscardHandler)
		case "debug":
			level = slog.LevelDebug
		}
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With(slog.String("node", node))
	})
}

func (d *demo) startNode(ctx context.Context, name string) error {
	system := actor.NewActorSystem(logging(name))
	// The quarantine fences this node against removed members at the remote
	// layer (nothing a removed node still sends is processed).
	quarantine := membership.NewQuarantine()
	r := remote.NewRemote(system, remote.Configure("127.0.0.1", 0, quarantine.RemoteOption()))
	// The remote first: a member is known by its address, which is
	// "nonhost" until the remote listens.
	r.Start()
	cluster := membership.NewCluster(system, d.registry.Provider(), membership.Config{Quarantine: quarantine})
	n := &node{name: name, system: system, remote: r, cluster: cluster, workers: map[string]*actor.PID{}}
	d.nodes = append(d.nodes, n) // listed now, so shutdown stops it even if the join fails
	jctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := cluster.Join(jctx); err != nil {
		return fmt.Errorf("%s join: %w", name, err)
	}

	// The scheduler: a manager on every node runs it on the oldest; the
	// proxy reaches it wherever it is.
	schedulerOpts := []singleton.Option{
		singleton.WithHandOverRetryInterval(200 * time.Millisecond),           // the managers'
		singleton.WithSingletonIdentificationInterval(200 * time.Millisecond), // the proxy's
	}
	var err error
	n.scheduler, err = singleton.StartProxy(system, cluster, schedulerManager, schedulerOpts...)
	if err != nil {
		return fmt.Errorf("%s: scheduler proxy: %w", name, err)
	}

	sharding, err := actorsharding.New(system, cluster)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	n.sharding = sharding
	jobProps := actor.PropsFromProducer(func() actor.Actor { return &jobEntity{store: d.jobs, scheduler: n.scheduler} })
	n.region, err = sharding.StartRegion(jobType, jobProps, actorsharding.NewHashCodeMessageExtractor(d.cfg.shards),
		actorsharding.WithStateStore(d.coord),
		// Regions register again with a moved coordinator at this
		// interval (default 2s): short, so that the move is brief.
		actorsharding.WithRetryInterval(200*time.Millisecond),
		actorsharding.WithCoordinatorSingleton(singleton.WithHandOverRetryInterval(200*time.Millisecond)),
	)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}

	schedProps := actor.PropsFromProducer(func() actor.Actor {
		return &schedulerActor{node: name, region: n.region, store: d.jobs, story: d.story, timing: d.cfg.timing}
	})
	if _, err := singleton.StartManager(system, cluster, schedProps, schedulerManager, schedulerOpts...); err != nil {
		return fmt.Errorf("%s: scheduler manager: %w", name, err)
	}

	short := strings.TrimPrefix(name, "node-")
	for i := 1; i <= 2; i++ {
		id := fmt.Sprintf("w-%s%d", short, i)
		st := &workerStats{}
		d.stats[id] = st
		tmpl := worker{id: id, node: name, scheduler: n.scheduler, region: n.region, story: d.story, stats: st, timing: d.cfg.timing}
		if id == zombieID {
			tmpl.zombie = d.zombie
		}
		// A fresh worker per incarnation (a restarted actor gets a new one):
		// only its counters and the zombie's plan carry over.
		props := actor.PropsFromProducer(func() actor.Actor { w := tmpl; return &w })
		pid, err := system.Root.SpawnNamed(props, workerPID("", id).Id)
		if err != nil {
			return fmt.Errorf("%s: worker %s: %w", name, id, err)
		}
		n.workers[id] = pid
	}
	return nil
}

// running returns the nodes that have not left.
func (d *demo) running() []*node {
	var out []*node
	for _, n := range d.nodes {
		if !n.left {
			out = append(out, n)
		}
	}
	return out
}

// ask sends msg through n's region (or, for the scheduler's messages, its
// proxy) and waits for the answer, retrying: a message caught in a
// hand-off is dropped (at-most-once delivery). Every message asked here is
// safe to repeat.
func (d *demo) ask(ctx context.Context, n *node, msg any) (any, error) {
	to := n.region
	if _, ok := msg.(*jobspb.GetSchedulerState); ok {
		to = n.scheduler
	}
	var lastErr error
	for range 5 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		res, err := n.system.Root.RequestFuture(to, msg, 2*time.Second).Result()
		if err == nil {
			return res, nil
		}
		lastErr = err
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%T through %s: %w", msg, n.name, lastErr)
}

// submit sends a CreateJob for each job through the submitter, every gap
// (none: all at once), and waits until each job confirmed it: stored it
// with its delivery progress. Nothing is retried here: the submitter
// resends what a job did not confirm, and the job drops what it already
// processed.
func (d *demo) submit(ctx context.Context, submitter *delivery.ShardingProducerController, ids []string, gap time.Duration) error {
	sctx, cancel := context.WithTimeout(ctx, d.cfg.timing.deadline)
	defer cancel()
	errs := make(chan error, len(ids))
	for i, id := range ids {
		if i > 0 && gap > 0 {
			if err := sleep(sctx, gap); err != nil {
				return fmt.Errorf("submit %s: %w", id, err)
			}
		}
		go func() {
			errs <- submitter.SendWithConfirmation(sctx, id, &jobspb.CreateJob{EntityId: id, Steps: d.cfg.steps})
		}()
	}
	var all []error
	for range ids {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		return fmt.Errorf("submit jobs: %w", err)
	}
	return nil
}

// waitFor polls cond until it holds, for at most the configured deadline.
func (d *demo) waitFor(ctx context.Context, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(d.cfg.timing.deadline)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v waiting for %s", d.cfg.timing.deadline, what)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// waitReady waits until the coordinator knows every region (shards are
// allocated only among registered regions) and the scheduler every worker
// (so that the first jobs spread over all of them).
func (d *demo) waitReady(ctx context.Context, regions, workers int) error {
	n := d.running()[0]
	return d.waitFor(ctx, "the regions and workers to register", func() (bool, error) {
		res, err := n.system.Root.RequestFuture(n.region, &messages.GetCurrentRegions{}, 2*time.Second).Result()
		if cr, ok := res.(*messages.CurrentRegions); err != nil || !ok || len(cr.Addresses) < regions {
			return false, nil
		}
		res, err = n.system.Root.RequestFuture(n.scheduler, &jobspb.GetSchedulerState{}, 2*time.Second).Result()
		st, ok := res.(*jobspb.SchedulerState)
		return err == nil && ok && len(st.LiveWorkers) >= workers, nil
	})
}

// schedulerNode asks the scheduler where it runs.
func (d *demo) schedulerNode(ctx context.Context) (string, error) {
	res, err := d.ask(ctx, d.running()[0], &jobspb.GetSchedulerState{})
	if err != nil {
		return "", err
	}
	st, ok := res.(*jobspb.SchedulerState)
	if !ok {
		return "", fmt.Errorf("GetSchedulerState answered %T", res)
	}
	return st.Node, nil
}

// getJob reads a job's record through a running node's region.
func (d *demo) getJob(ctx context.Context, id string) (*jobspb.Job, error) {
	running := d.running()
	res, err := d.ask(ctx, running[len(running)-1], &jobspb.GetJob{EntityId: id})
	if err != nil {
		return nil, err
	}
	j, ok := res.(*jobspb.Job)
	if !ok {
		return nil, fmt.Errorf("GetJob %s answered %T", id, res)
	}
	return j, nil
}

// waitReassigned waits until every job the zombie holds has a higher epoch
// than the zombie's (or is done): only then does the driver wake it, so
// that the run shows every one of the zombie's later reports rejected.
func (d *demo) waitReassigned(ctx context.Context, held []heldJob) error {
	return d.waitFor(ctx, "the zombie's jobs to be reassigned", func() (bool, error) {
		for _, h := range held {
			j, err := d.getJob(ctx, h.job)
			if err != nil {
				return false, err
			}
			if j.Epoch <= h.epoch && j.Status != jobspb.Status_DONE {
				return false, nil
			}
		}
		return true, nil
	})
}

// leave stops n's workers (its jobs are orphaned mid-run), leaves the
// cluster gracefully (its shards are handed off, the singletons it runs
// hand over) and shuts the node down.
func (d *demo) leave(ctx context.Context, n *node) error {
	for _, id := range sortedKeys(n.workers) {
		if err := n.system.Root.StopFuture(n.workers[id]).Wait(); err != nil {
			return fmt.Errorf("stop %s: %w", id, err)
		}
	}
	lctx, cancel := context.WithTimeout(ctx, d.cfg.timing.deadline)
	defer cancel()
	err := n.cluster.Leave(lctx)
	n.left = true
	n.remote.Shutdown(true)
	n.system.Shutdown()
	if err != nil {
		return fmt.Errorf("%s leave: %w", n.name, err)
	}
	return nil
}

// waitAllDone waits until every job is done and returns their records.
func (d *demo) waitAllDone(ctx context.Context, ids []string) ([]*jobspb.Job, error) {
	var jobs []*jobspb.Job
	err := d.waitFor(ctx, "every job to finish", func() (bool, error) {
		jobs = jobs[:0]
		for _, id := range ids {
			j, err := d.getJob(ctx, id)
			if err != nil {
				return false, err
			}
			if j.Status != jobspb.Status_DONE {
				return false, nil
			}
			jobs = append(jobs, j)
		}
		return true, nil
	})
	return jobs, err
}

// shutdown stops the nodes still running, without a goodbye: the run is
// over.
func (d *demo) shutdown() {
	for _, n := range d.nodes {
		if n.left {
			continue
		}
		n.cluster.Close()
		n.remote.Shutdown(false)
		n.system.Shutdown()
	}
}

// verify checks the run and prints the summary: every job done; in every
// job's history each assignment raised the epoch and each accepted report
// came from the owner of the moment, under its epoch, with a step above the
// last; no duplicate was accepted; every report the zombie sent after it
// woke up was rejected.
func (r *result) verify(out io.Writer) error {
	var problems []string
	var assigned, reassigned, accepted, fenced, stale, doneRejected int64
	for _, j := range r.jobs {
		problems = append(problems, checkHistory(j)...)
		for _, e := range j.History {
			switch e.Kind {
			case jobspb.Event_ASSIGNED:
				assigned++
			case jobspb.Event_REPORTED:
				accepted++
			}
		}
		reassigned += int64(max(0, countKind(j, jobspb.Event_ASSIGNED)-1))
		fenced += j.RejectedFenced
		stale += j.RejectedStale
		doneRejected += j.RejectedDone
	}
	var created int64
	for _, j := range r.jobs {
		created += j.CreateDeliveries
		if j.CreateDeliveries != 1 {
			problems = append(problems, fmt.Sprintf("%s: its submission was processed %d times", j.Id, j.CreateDeliveries))
		}
	}
	var dup workerCounters
	for _, c := range r.workers {
		dup.DuplicatesSent += c.DuplicatesSent
		dup.DuplicatesRejected += c.DuplicatesRejected
		dup.DuplicatesAccepted += c.DuplicatesAccepted
		dup.Retries += c.Retries
	}
	z := r.workers[zombieID]
	if dup.DuplicatesAccepted > 0 {
		problems = append(problems, fmt.Sprintf("%d duplicate reports were accepted", dup.DuplicatesAccepted))
	}
	if z.SentAwake == 0 {
		problems = append(problems, "the zombie sent no report after waking up")
	}
	if z.AcceptedAwake > 0 {
		problems = append(problems, fmt.Sprintf("%d of the zombie's reports after waking up were accepted", z.AcceptedAwake))
	}

	fmt.Fprintf(out, "\n%d of %d jobs done in %.1fs\n", countDone(r.jobs), len(r.jobs), r.took.Seconds())
	fmt.Fprintf(out, "submissions: %d jobs (%d during the leave) by reliable delivery, %d processed by the jobs; the submitter sent %d, resent %d\n",
		r.submitted, r.duringLeave, created, r.submitter.Sent, r.submitter.Resent)
	fmt.Fprintf(out, "assignments: %d (%d of them reassignments under a higher epoch)\n", assigned, reassigned)
	fmt.Fprintf(out, "reports: %d accepted; rejected: %d fenced (not the owner, or an old epoch), %d stale (seq not above the last accepted), %d for a finished job\n",
		accepted, fenced, stale, doneRejected)
	fmt.Fprintf(out, "duplicates: %d sent, %d rejected as stale, %d accepted\n", dup.DuplicatesSent, dup.DuplicatesRejected, dup.DuplicatesAccepted)
	fmt.Fprintf(out, "zombie %s after waking up: %d reports sent, %d rejected, %d accepted\n", zombieID, z.SentAwake, z.RejectedAwake, z.AcceptedAwake)
	if dup.Retries > 0 {
		fmt.Fprintf(out, "retried reports (lost in a hand-off): %d\n", dup.Retries)
	}
	for _, p := range problems[:min(len(problems), 10)] {
		fmt.Fprintln(out, "PROBLEM:", p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d problems", len(problems))
	}
	fmt.Fprintln(out, "histories checked: every job created by exactly one submission; every accepted report came from the owner of the moment, under its epoch, with a step above the last")
	return nil
}

// checkHistory replays a job's history with rules of its own, not the
// entity's code, and returns what breaks them.
func checkHistory(j *jobspb.Job) []string {
	var problems []string
	var owner string
	var epoch, last int64
	done := false
	for i, e := range j.History {
		switch e.Kind {
		case jobspb.Event_ASSIGNED:
			if e.Epoch <= epoch {
				problems = append(problems, fmt.Sprintf("%s #%d: assigned to %s under epoch %d after epoch %d", j.Id, i, e.Worker, e.Epoch, epoch))
			}
			if done {
				problems = append(problems, fmt.Sprintf("%s #%d: assigned after it was done", j.Id, i))
			}
			owner, epoch = e.Worker, e.Epoch
		case jobspb.Event_REPORTED:
			if e.Worker != owner || e.Epoch != epoch {
				problems = append(problems, fmt.Sprintf("%s #%d: accepted step %d from %s under epoch %d while %s owned it under epoch %d",
					j.Id, i, e.Seq, e.Worker, e.Epoch, owner, epoch))
			}
			if e.Seq <= last {
				problems = append(problems, fmt.Sprintf("%s #%d: accepted stale step %d after step %d", j.Id, i, e.Seq, last))
			}
			if done {
				problems = append(problems, fmt.Sprintf("%s #%d: accepted step %d after the job was done", j.Id, i, e.Seq))
			}
			last = e.Seq
			done = e.Status == jobspb.Status_DONE
		default:
			problems = append(problems, fmt.Sprintf("%s #%d: unknown event %v", j.Id, i, e.Kind))
		}
	}
	if !done || j.Status != jobspb.Status_DONE || last != int64(j.Steps) {
		problems = append(problems, fmt.Sprintf("%s: not done (status %v, last step %d of %d)", j.Id, j.Status, last, j.Steps))
	}
	return problems
}

func countKind(j *jobspb.Job, k jobspb.Event_Kind) int {
	n := 0
	for _, e := range j.History {
		if e.Kind == k {
			n++
		}
	}
	return n
}

func countDone(jobs []*jobspb.Job) int {
	n := 0
	for _, j := range jobs {
		if j.Status == jobspb.Status_DONE {
			n++
		}
	}
	return n
}

func heldString(held []heldJob) string {
	parts := make([]string, len(held))
	for i, h := range held {
		parts[i] = fmt.Sprintf("%s (epoch %d)", h.job, h.epoch)
	}
	return strings.Join(parts, ", ")
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
