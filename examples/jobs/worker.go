package main

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/protoshard/protoshard/examples/jobs/jobspb"
)

// workerPID is where a worker runs: workers are plain actors with
// well-known names, so a job can reach its owner from the owner's address
// and ID alone.
func workerPID(address, id string) *actor.PID { return actor.NewPID(address, "workers/"+id) }

// worker runs the jobs it is given: one step per step tick, each reported
// to the job entity through this node's Job region, the next step only
// once the job accepted the last. It heartbeats to the scheduler.
//
// Once per job, right after step 3 was accepted, it sends step 2 again: a
// duplicate, as a network retry could make, which the job must reject as
// stale.
//
// A zombie worker (zombie != nil) freezes after its first accepted report,
// as a process in a long garbage-collection pause would, and never
// heartbeats again, as if its link to the scheduler were cut. When it
// wakes up it carries on as if nothing had happened, and it ignores
// rejections: it reports every remaining step of the jobs it believes it
// still owns.
type worker struct {
	id, node  string
	scheduler *actor.PID // this node's scheduler proxy
	region    *actor.PID // this node's Job region
	story     *story
	stats     *workerStats
	timing    timing
	zombie    *zombiePlan

	jobs        map[string]*runningJob
	partitioned bool
	timers      *scheduler.TimerScheduler
	// One pending tick of each kind, re-armed as it arrives:
	// SendRepeatedly's cancel races with a tick that fires meanwhile.
	cancelHeartbeat, cancelStep scheduler.CancelFunc
}

type runningJob struct {
	epoch    int64
	steps    int32
	next     int64 // the next step to report
	awaiting int64 // the step reported and not answered yet; 0: none
	sentAt   time.Time
	// awaitingAwake: the zombie sent the awaited report after waking up.
	awaitingAwake bool
	dupSeq        int64 // the duplicate sent, if any
	toldRejected  bool  // the zombie printed its first rejection
}

// zombiePlan makes a worker the zombie.
type zombiePlan struct {
	// frozen receives the jobs the worker holds when it freezes.
	frozen chan<- []heldJob
	// release wakes it up; maxPause bounds the pause anyway, so that a
	// driver that never releases it cannot hang it.
	release  <-chan struct{}
	maxPause time.Duration
	froze    bool
	awake    bool
}

// heldJob is a job a worker runs, with its epoch.
type heldJob struct {
	job   string
	epoch int64
}

// workerCounters are what a worker saw: for the story and the checks.
type workerCounters struct {
	Sent, Accepted, Retries                                int
	RejectedFenced, RejectedStale, RejectedDone            int
	DuplicatesSent, DuplicatesRejected, DuplicatesAccepted int
	// Sent, accepted and rejected after a zombie woke up.
	SentAwake, AcceptedAwake, RejectedAwake int
}

// workerStats holds a worker's counters for the driver to read.
type workerStats struct {
	mu sync.Mutex
	c  workerCounters
}

func (s *workerStats) add(f func(*workerCounters)) {
	s.mu.Lock()
	f(&s.c)
	s.mu.Unlock()
}

func (s *workerStats) snapshot() workerCounters {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c
}

type heartbeatTick struct{}

type stepTick struct{}

func (w *worker) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		w.jobs = map[string]*runningJob{}
		w.timers = scheduler.NewTimerScheduler(ctx)
		w.cancelHeartbeat = w.timers.SendOnce(0, ctx.Self(), heartbeatTick{})
		w.cancelStep = w.timers.SendOnce(w.timing.step, ctx.Self(), stepTick{})
	case *actor.Stopping:
		w.cancelHeartbeat()
		w.cancelStep()
	case heartbeatTick:
		if !w.partitioned {
			ctx.Send(w.scheduler, &jobspb.Heartbeat{Worker: w.id, Address: ctx.Self().Address, Node: w.node})
		}
		w.cancelHeartbeat = w.timers.SendOnce(w.timing.heartbeat, ctx.Self(), heartbeatTick{})
	case stepTick:
		w.onStep(ctx)
		w.cancelStep = w.timers.SendOnce(w.timing.step, ctx.Self(), stepTick{})
	case *jobspb.RunJob:
		if j, ok := w.jobs[msg.Job]; ok && j.epoch >= msg.Epoch {
			return // a repeated RunJob
		}
		w.jobs[msg.Job] = &runningJob{epoch: msg.Epoch, steps: msg.Steps, next: msg.NextSeq}
	case *jobspb.Accepted:
		w.onAccepted(ctx, msg)
	case *jobspb.Rejected:
		w.onRejected(ctx, msg)
	}
}

func (w *worker) onStep(ctx actor.Context) {
	now := time.Now()
	for _, id := range sortedKeys(w.jobs) {
		j := w.jobs[id]
		switch {
		case j.awaiting == 0:
			w.report(ctx, id, j, j.next)
		case now.Sub(j.sentAt) > w.timing.reportRetry:
			// No answer: the report or its answer was lost (a hand-off
			// drops messages). The same report again; if the first did
			// arrive, the job says "stale" and we know it landed.
			w.stats.add(func(c *workerCounters) { c.Retries++ })
			w.report(ctx, id, j, j.awaiting)
		}
	}
}

func (w *worker) report(ctx actor.Context, id string, j *runningJob, seq int64) {
	status := jobspb.Status_RUNNING
	if seq >= int64(j.steps) {
		status = jobspb.Status_DONE
	}
	j.awaiting, j.sentAt = seq, time.Now()
	j.awaitingAwake = w.zombie != nil && w.zombie.awake
	w.stats.add(func(c *workerCounters) {
		c.Sent++
		if j.awaitingAwake {
			c.SentAwake++
		}
	})
	// Request, not Send: the job's answer comes back to this worker.
	ctx.Request(w.region, &jobspb.Report{EntityId: id, Worker: w.id, Epoch: j.epoch, Seq: seq, Status: status})
}

// stepDone moves a job to its next step, and forgets it after its last.
func (w *worker) stepDone(id string, j *runningJob) {
	j.next, j.awaiting = j.awaiting+1, 0
	if j.next > int64(j.steps) {
		delete(w.jobs, id)
	}
}

func (w *worker) onAccepted(ctx actor.Context, msg *jobspb.Accepted) {
	j, ok := w.jobs[msg.Job]
	if !ok {
		return // a late answer for a job this worker no longer runs
	}
	if msg.Seq == j.dupSeq && msg.Seq != j.awaiting {
		w.stats.add(func(c *workerCounters) { c.DuplicatesAccepted++ })
		return
	}
	if msg.Seq != j.awaiting {
		return // the answer to an earlier attempt
	}
	awake := j.awaitingAwake
	w.stats.add(func(c *workerCounters) {
		c.Accepted++
		if awake {
			c.AcceptedAwake++
		}
	})
	w.stepDone(msg.Job, j)
	if msg.Seq == 3 && j.dupSeq == 0 && j.next <= int64(j.steps) {
		j.dupSeq = 2
		w.stats.add(func(c *workerCounters) { c.DuplicatesSent++; c.Sent++ })
		ctx.Request(w.region, &jobspb.Report{EntityId: msg.Job, Worker: w.id, Epoch: j.epoch, Seq: 2, Status: jobspb.Status_RUNNING})
	}
	if z := w.zombie; z != nil && !z.froze {
		w.freeze()
	}
}

func (w *worker) onRejected(ctx actor.Context, msg *jobspb.Rejected) {
	j, ok := w.jobs[msg.Job]
	if !ok {
		return
	}
	if msg.Seq == j.dupSeq && msg.Seq != j.awaiting {
		w.stats.add(func(c *workerCounters) { c.DuplicatesRejected++; c.RejectedStale++ })
		return
	}
	if msg.Seq != j.awaiting {
		return
	}
	awake := j.awaitingAwake
	w.stats.add(func(c *workerCounters) {
		switch msg.Kind {
		case jobspb.RejectKind_FENCED:
			c.RejectedFenced++
		case jobspb.RejectKind_STALE:
			c.RejectedStale++
		case jobspb.RejectKind_JOB_DONE:
			c.RejectedDone++
		}
		if awake {
			c.RejectedAwake++
		}
	})
	switch {
	case msg.Kind == jobspb.RejectKind_STALE && msg.LastSeq >= msg.Seq && !awake:
		// Our earlier attempt of this step landed; its answer was lost.
		w.stepDone(msg.Job, j)
	case w.zombie != nil && w.zombie.awake:
		if !j.toldRejected {
			j.toldRejected = true
			w.story.printf("%s (zombie): step %d of %s under epoch %d rejected: %s; it carries on regardless",
				w.id, msg.Seq, msg.Job, j.epoch, msg.Reason)
		}
		w.stepDone(msg.Job, j) // a zombie does not listen
	default:
		// A well-behaved worker stops at once: someone else owns the job.
		w.story.printf("%s: step %d of %s rejected: %s; dropping the job", w.id, msg.Seq, msg.Job, msg.Reason)
		delete(w.jobs, msg.Job)
	}
}

// freeze blocks the zombie's actor, and so its heartbeats and reports,
// until the driver releases it.
func (w *worker) freeze() {
	z := w.zombie
	z.froze = true
	w.partitioned = true
	held := make([]heldJob, 0, len(w.jobs))
	for _, id := range sortedKeys(w.jobs) {
		held = append(held, heldJob{job: id, epoch: w.jobs[id].epoch})
	}
	select {
	case z.frozen <- held:
	default:
	}
	t := time.NewTimer(z.maxPause)
	defer t.Stop()
	select {
	case <-z.release:
	case <-t.C:
	}
	z.awake = true
}
