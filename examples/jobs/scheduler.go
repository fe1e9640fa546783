package main

import (
	"context"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/protoshard/protoshard/examples/jobs/jobspb"
)

// schedulerActor is the cluster singleton that decides which worker runs
// which job. It keeps its tables in memory, so they are lost whenever the
// singleton moves to another node; it rebuilds them when it starts: the
// jobs from the job store, the workers from their heartbeats.
//
// Epochs. Each Assign carries the job's next epoch, the fencing token the
// job entity checks every report against, so epochs must only ever grow. A
// counter of the scheduler's own would restart from zero after a move, and
// time-based epochs would rely on the nodes' clocks agreeing. So the
// scheduler takes the job's current epoch from the job itself (from the
// store when it starts, from every AssignResult after) and asks for that
// plus one. The job entity accepts an Assign only above its current epoch,
// which makes the Assign a compare-and-set: if a previous scheduler
// incarnation's Assign is still in flight and lands first, ours is
// rejected, the rejection names the current epoch, and we ask again above
// it. Two owners can never hold the same epoch.
type schedulerActor struct {
	node   string
	region *actor.PID // the Job region on this node
	store  *jobStore
	story  *story
	timing timing

	workers map[string]*workerInfo
	jobs    map[string]*jobInfo
	started time.Time
	timers  *scheduler.TimerScheduler
	cancel  scheduler.CancelFunc // the pending tick, re-armed as it arrives
}

type workerInfo struct {
	id, address, node string
	lastSeen          time.Time
	alive             bool
}

type jobInfo struct {
	id     string
	status jobspb.Status
	owner  string
	epoch  int64 // the highest epoch of the job known here
	// needsOwner: pending, or its owner was declared dead.
	needsOwner bool
	// assigning is the Assign in flight, if any.
	assigning *assignAttempt
}

type assignAttempt struct {
	worker string
	epoch  int64
	sentAt time.Time
}

// schedulerTick drives the scheduler's periodic work.
type schedulerTick struct{}

func (s *schedulerActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		s.start(ctx)
	case *actor.Stopping:
		if s.cancel != nil {
			s.cancel()
		}
	case schedulerTick:
		s.checkWorkers(ctx)
		s.assignJobs(ctx)
		s.cancel = s.timers.SendOnce(s.timing.schedulerTick, ctx.Self(), schedulerTick{})
	case *jobspb.Heartbeat:
		s.onHeartbeat(msg)
	case *jobspb.JobPending:
		if _, known := s.jobs[msg.Job]; !known {
			s.jobs[msg.Job] = &jobInfo{id: msg.Job, status: jobspb.Status_PENDING, needsOwner: true}
		}
	case *jobspb.JobDone:
		if j, ok := s.jobs[msg.Job]; ok {
			j.status, j.needsOwner = jobspb.Status_DONE, false
		}
	case *jobspb.AssignResult:
		s.onAssignResult(ctx, msg)
	case *jobspb.GetSchedulerState:
		ctx.Respond(s.state())
	}
}

// start rebuilds the job table from the store. The owners it finds count
// as alive from now: each gets a full heartbeat timeout to show up before
// its jobs go to someone else.
func (s *schedulerActor) start(ctx actor.Context) {
	s.started = time.Now()
	s.workers = map[string]*workerInfo{}
	s.jobs = map[string]*jobInfo{}
	lctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	recs, err := s.store.All(lctx)
	if err != nil {
		// Not fatal: jobs still arrive as JobPending, and reports go on.
		ctx.Logger().Error("scheduler: cannot read the job store", slog.Any("error", err))
	}
	counts := map[jobspb.Status]int{}
	for _, r := range recs {
		j := &jobInfo{id: r.Id, status: r.Status, owner: r.Owner, epoch: r.Epoch}
		switch r.Status {
		case jobspb.Status_PENDING:
			j.needsOwner = true
		case jobspb.Status_RUNNING:
			// Known only from the store: it gets nothing new before its
			// first heartbeat (no address yet), but its jobs stay with it
			// unless it stays silent.
			if _, ok := s.workers[r.Owner]; !ok {
				s.workers[r.Owner] = &workerInfo{id: r.Owner, lastSeen: s.started, alive: true}
			}
		}
		s.jobs[r.Id] = j
		counts[r.Status]++
	}
	if len(recs) == 0 {
		s.story.printf("scheduler starts on %s", s.node)
	} else {
		s.story.printf("scheduler starts on %s with an empty memory; from the job store: %d running, %d pending, %d done",
			s.node, counts[jobspb.Status_RUNNING], counts[jobspb.Status_PENDING], counts[jobspb.Status_DONE])
	}
	// A one-shot tick re-armed on arrival: SendRepeatedly's cancel races
	// with a tick that fires meanwhile.
	s.timers = scheduler.NewTimerScheduler(ctx)
	s.cancel = s.timers.SendOnce(s.timing.schedulerTick, ctx.Self(), schedulerTick{})
}

func (s *schedulerActor) onHeartbeat(hb *jobspb.Heartbeat) {
	w, ok := s.workers[hb.Worker]
	if !ok {
		w = &workerInfo{id: hb.Worker}
		s.workers[hb.Worker] = w
	}
	if !w.alive && ok {
		s.story.printf("scheduler: %s is back", hb.Worker)
	}
	w.address, w.node, w.lastSeen, w.alive = hb.Address, hb.Node, time.Now(), true
}

// checkWorkers declares dead the workers silent for longer than the
// heartbeat timeout, and frees their jobs. A dead worker may well be
// alive, only cut off, and go on working: the job's epoch check is what
// stops it from doing harm.
func (s *schedulerActor) checkWorkers(ctx actor.Context) {
	now := time.Now()
	for _, id := range sortedKeys(s.workers) {
		w := s.workers[id]
		if !w.alive || now.Sub(w.lastSeen) <= s.timing.heartbeatTimeout {
			continue
		}
		w.alive = false
		var freed []string
		for _, j := range s.jobs {
			if j.owner == id && j.status != jobspb.Status_DONE && !j.needsOwner {
				j.needsOwner = true
				freed = append(freed, j.id)
			}
		}
		sort.Strings(freed)
		s.story.printf("scheduler: no heartbeat from %s for %v: declared dead; its jobs need a new owner: %v",
			id, now.Sub(w.lastSeen).Round(10*time.Millisecond), freed)
		ctx.Logger().Info("scheduler: worker declared dead", slog.String("worker", id), slog.Any("jobs", freed))
	}
}

// assignJobs sends an Assign for every job that needs an owner and has
// none in flight (or one unanswered for too long), to the least loaded
// live worker.
func (s *schedulerActor) assignJobs(ctx actor.Context) {
	now := time.Now()
	for _, id := range sortedKeys(s.jobs) {
		j := s.jobs[id]
		if !j.needsOwner {
			continue
		}
		if a := j.assigning; a != nil {
			if now.Sub(a.sentAt) < s.timing.assignRetry {
				continue
			}
			// No answer: the Assign or its answer was lost (a hand-off
			// drops messages). The same worker and epoch again, if it is
			// still alive: the job takes a repeated Assign as a no-op.
			if w := s.workers[a.worker]; w != nil && w.alive {
				s.sendAssign(ctx, j, w, a.epoch)
				continue
			}
			j.assigning = nil
		}
		w := s.leastLoaded()
		if w == nil {
			return // nobody to run it; try again on the next tick
		}
		s.sendAssign(ctx, j, w, j.epoch+1)
	}
}

func (s *schedulerActor) sendAssign(ctx actor.Context, j *jobInfo, w *workerInfo, epoch int64) {
	j.assigning = &assignAttempt{worker: w.id, epoch: epoch, sentAt: time.Now()}
	// Request, not Send: the job's answer comes back here.
	ctx.Request(s.region, &jobspb.Assign{EntityId: j.id, Worker: w.id, WorkerAddress: w.address, Epoch: epoch})
}

func (s *schedulerActor) onAssignResult(ctx actor.Context, res *jobspb.AssignResult) {
	j, ok := s.jobs[res.Job]
	if !ok {
		return
	}
	a := j.assigning
	j.epoch = max(j.epoch, res.Epoch)
	switch {
	case res.Status == jobspb.Status_DONE:
		j.status, j.needsOwner, j.assigning = jobspb.Status_DONE, false, nil
	case res.Accepted:
		if a == nil || a.epoch != res.Epoch || a.worker != res.Owner {
			return // the answer to an earlier attempt
		}
		previous := j.owner
		j.status, j.owner, j.needsOwner, j.assigning = jobspb.Status_RUNNING, res.Owner, false, nil
		if previous == "" || previous == res.Owner {
			s.story.printf("scheduler: %s -> %s (epoch %d)", j.id, res.Owner, res.Epoch)
		} else {
			s.story.printf("scheduler: %s -> %s (epoch %d), taken from %s", j.id, res.Owner, res.Epoch, previous)
		}
	default:
		// Someone got there first (an earlier incarnation of this
		// scheduler, say): the next tick asks again above res.Epoch.
		s.story.printf("scheduler: Assign of %s rejected (%s); asking again above epoch %d", j.id, res.Reason, res.Epoch)
		j.assigning = nil
	}
}

// leastLoaded returns the live worker with the fewest unfinished jobs (ties
// by ID), or nil.
func (s *schedulerActor) leastLoaded() *workerInfo {
	load := map[string]int{}
	for _, j := range s.jobs {
		switch {
		case j.assigning != nil:
			load[j.assigning.worker]++
		case !j.needsOwner && j.status == jobspb.Status_RUNNING:
			load[j.owner]++
		}
	}
	var best *workerInfo
	for _, id := range sortedKeys(s.workers) {
		w := s.workers[id]
		if w.alive && w.address != "" && (best == nil || load[id] < load[best.id]) {
			best = w
		}
	}
	return best
}

func (s *schedulerActor) state() *jobspb.SchedulerState {
	st := &jobspb.SchedulerState{Node: s.node}
	for _, id := range sortedKeys(s.workers) {
		if s.workers[id].alive {
			st.LiveWorkers = append(st.LiveWorkers, id)
		}
	}
	for _, j := range s.jobs {
		switch {
		case j.status == jobspb.Status_DONE:
			st.Done++
		case j.needsOwner:
			st.Pending++
		default:
			st.Running++
		}
	}
	return st
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
