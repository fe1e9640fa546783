package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/actorsharding/delivery"
	"github.com/protoshard/protoshard/examples/jobs/jobspb"
	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/proto"
)

// jobStore is where the Job entities keep their records. It stands in for a
// database: a sharded entity lives in memory and starts afresh when its
// shard moves to another node (a rebalance, a node leaving), so a job's
// fencing state (owner, epoch, last accepted seq) must be stored outside of
// it, or a moved job would forget that it had fenced out an old owner. Here
// all nodes run in one process and share this map; nodes in separate
// processes would share a database, written with a compare-and-set on the
// version read, so that not even a bug could let an older record overwrite
// a newer one.
type jobStore struct {
	mu   sync.Mutex
	jobs map[string]*jobspb.Job
}

func newJobStore() *jobStore { return &jobStore{jobs: map[string]*jobspb.Job{}} }

// errNoJob: the store has no record of the job.
var errNoJob = errors.New("no such job")

// Load returns a copy of the job's record, or errNoJob.
func (s *jobStore) Load(ctx context.Context, id string) (*jobspb.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("load job %s: %w", id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return nil, fmt.Errorf("load job %s: %w", id, errNoJob)
	}
	return proto.Clone(j).(*jobspb.Job), nil
}

// Save stores a copy of the record.
func (s *jobStore) Save(ctx context.Context, j *jobspb.Job) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("save job %s: %w", j.GetId(), err)
	}
	if j.GetId() == "" {
		return errors.New("save job: empty id")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs[j.Id] = proto.Clone(j).(*jobspb.Job)
	return nil
}

// All returns copies of every record, by ID: what the scheduler reads when
// it starts, to rebuild what its previous incarnation knew.
func (s *jobStore) All(ctx context.Context) ([]*jobspb.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*jobspb.Job, 0, len(s.jobs))
	for _, j := range s.jobs {
		out = append(out, proto.Clone(j).(*jobspb.Job))
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Id < out[b].Id })
	return out, nil
}

// jobEntity is the sharded Job entity, the single authority on its job:
// who owns it, under which epoch, and how far it got. It takes an Assign
// only with a higher epoch than the current one, and a Report only from the
// current owner with the current epoch and a seq above the last accepted
// one. Sharding guarantees at most one incarnation of it at a time, so its
// checks cannot race each other.
type jobEntity struct {
	store     *jobStore
	scheduler *actor.PID // this node's scheduler proxy
	rec       *jobspb.Job
	// consumer takes the CreateJobs the submitter sends by reliable
	// delivery; its progress is stored in the record.
	consumer *delivery.ShardingConsumerController
}

// storeTimeout bounds a store call; an entity must not hang on its store.
const storeTimeout = 5 * time.Second

func (e *jobEntity) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); ok {
		e.start(ctx)
		return
	}
	if e.consumer != nil && e.consumer.Receive(ctx) {
		return
	}
	switch msg := ctx.Message().(type) {
	case *jobspb.Assign:
		e.onAssign(ctx, msg)
	case *jobspb.Report:
		e.onReport(ctx, msg)
	case *jobspb.GetJob:
		if err := e.load(ctx, msg.EntityId); err != nil {
			return // no answer: the caller retries
		}
		ctx.Respond(proto.Clone(e.rec))
	}
}

// start loads the record and restores the delivery progress stored in it,
// so that a CreateJob this job processed in an earlier incarnation (before
// it moved, or before its node crashed) is recognised if the submitter
// sends it again. A job that cannot read its record stops: the submitter
// resends what the job has not confirmed, and the next message starts it
// again.
func (e *jobEntity) start(ctx actor.Context) {
	id, err := actorsharding.EntityID(ctx)
	if err == nil {
		err = e.load(ctx, id)
	}
	var progress *messages.ConsumerProgress
	if err == nil && len(e.rec.DeliveryProgress) > 0 {
		progress = &messages.ConsumerProgress{}
		if uerr := proto.Unmarshal(e.rec.DeliveryProgress, progress); uerr != nil {
			err = fmt.Errorf("job %s: stored delivery progress: %w", id, uerr)
		}
	}
	if err == nil {
		e.consumer, err = delivery.NewShardingConsumerController(progress, e.onCreate)
	}
	if err != nil {
		ctx.Logger().Error("job: cannot start", slog.String("actor", ctx.Self().GetId()), slog.Any("error", err))
		ctx.Stop(ctx.Self())
	}
}

// load reads the record, if the entity has none in memory. A missing
// record is a job not created yet.
func (e *jobEntity) load(ctx actor.Context, id string) error {
	if e.rec != nil {
		return nil
	}
	sctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	rec, err := e.store.Load(sctx, id)
	switch {
	case errors.Is(err, errNoJob):
		rec = &jobspb.Job{Id: id}
	case err != nil:
		ctx.Logger().Error("job: cannot load its record", slog.String("job", id), slog.Any("error", err))
		return err
	}
	e.rec = rec
	return nil
}

// save writes the record. On failure the in-memory record is dropped, so
// that the entity never acts on a state it could not store: the next
// message reads the store again.
func (e *jobEntity) save(ctx actor.Context) error {
	sctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if err := e.store.Save(sctx, e.rec); err != nil {
		ctx.Logger().Error("job: cannot save its record", slog.String("job", e.rec.Id), slog.Any("error", err))
		e.rec = nil
		return err
	}
	return nil
}

// onCreate processes a CreateJob delivered by the submitter. The record and
// the delivery progress after this message go in one write, and only then
// is the message confirmed: a job that crashed before the write gets it
// again, one that crashed after it drops the resent copy as a duplicate.
func (e *jobEntity) onCreate(ctx actor.Context, d delivery.Delivery) {
	msg, ok := d.Message.(*jobspb.CreateJob)
	if !ok || msg.Steps < 1 {
		// Confirmed all the same: the submitter would resend it for ever.
		ctx.Logger().Warn("job: a submission that creates nothing", slog.String("producer", d.ProducerID),
			slog.Int64("seqNr", d.SeqNr), slog.String("message", fmt.Sprintf("%T %v", d.Message, d.Message)))
		_ = e.consumer.Confirm(ctx, d)
		return
	}
	if err := e.load(ctx, msg.EntityId); err != nil {
		ctx.Stop(ctx.Self()) // unconfirmed: the submitter resends it
		return
	}
	progress, err := proto.Marshal(e.consumer.ProgressAfter(d))
	if err != nil {
		ctx.Logger().Error("job: cannot encode its delivery progress", slog.String("job", msg.EntityId), slog.Any("error", err))
		ctx.Stop(ctx.Self())
		return
	}
	next := proto.Clone(e.rec).(*jobspb.Job)
	if next.Status == jobspb.Status_STATUS_UNSPECIFIED {
		next.Steps = msg.Steps
		next.Status = jobspb.Status_PENDING
	}
	next.CreateDeliveries++
	next.DeliveryProgress = progress
	e.rec = next
	if err := e.save(ctx); err != nil {
		ctx.Stop(ctx.Self()) // never confirm what is not stored
		return
	}
	if e.rec.Status == jobspb.Status_PENDING {
		// The scheduler may miss this (it is moving); if it does, it
		// still finds the job in the store when it starts.
		ctx.Send(e.scheduler, &jobspb.JobPending{Job: e.rec.Id})
	}
	if err := e.consumer.Confirm(ctx, d); err != nil {
		ctx.Logger().Error("job: cannot confirm a submission", slog.String("job", e.rec.Id), slog.Any("error", err))
	}
}

func (e *jobEntity) onAssign(ctx actor.Context, msg *jobspb.Assign) {
	if err := e.load(ctx, msg.EntityId); err != nil {
		return
	}
	r := e.rec
	reject := func(reason string) {
		ctx.Respond(&jobspb.AssignResult{Job: r.Id, Accepted: false, Epoch: r.Epoch, Owner: r.Owner, Status: r.Status, Reason: reason})
	}
	switch {
	case r.Status == jobspb.Status_STATUS_UNSPECIFIED:
		reject("unknown job")
		return
	case r.Status == jobspb.Status_DONE:
		reject("job is done")
		return
	case msg.Epoch == r.Epoch && msg.Worker == r.Owner:
		// A retried Assign whose answer was lost: same outcome again.
	case msg.Epoch <= r.Epoch:
		reject(fmt.Sprintf("stale epoch %d: the current epoch is %d (owner %s)", msg.Epoch, r.Epoch, r.Owner))
		return
	default:
		r.Owner, r.OwnerAddress, r.Epoch, r.Status = msg.Worker, msg.WorkerAddress, msg.Epoch, jobspb.Status_RUNNING
		r.History = append(r.History, &jobspb.Event{Kind: jobspb.Event_ASSIGNED, Worker: msg.Worker, Epoch: msg.Epoch})
		if err := e.save(ctx); err != nil {
			return // no answer: the scheduler retries
		}
	}
	// The job starts its owner itself, after the assignment is stored: a
	// scheduler that dies between its Assign and the answer cannot leave a
	// recorded owner that was never told.
	ctx.Send(workerPID(r.OwnerAddress, r.Owner), &jobspb.RunJob{Job: r.Id, Epoch: r.Epoch, NextSeq: r.LastSeq + 1, Steps: r.Steps})
	ctx.Respond(&jobspb.AssignResult{Job: r.Id, Accepted: true, Epoch: r.Epoch, Owner: r.Owner, Status: r.Status})
}

func (e *jobEntity) onReport(ctx actor.Context, msg *jobspb.Report) {
	if err := e.load(ctx, msg.EntityId); err != nil {
		return
	}
	r := e.rec
	reject := func(kind jobspb.RejectKind, reason string) {
		switch kind {
		case jobspb.RejectKind_FENCED:
			r.RejectedFenced++
		case jobspb.RejectKind_STALE:
			r.RejectedStale++
		case jobspb.RejectKind_JOB_DONE:
			r.RejectedDone++
		}
		// The counters are statistics: losing one to a failed save is no
		// reason to keep the sender waiting.
		_ = e.save(ctx)
		ctx.Respond(&jobspb.Rejected{Job: r.Id, Seq: msg.Seq, Kind: kind, Reason: reason, Epoch: r.Epoch, LastSeq: r.LastSeq})
	}
	// The fencing check comes first: a replaced owner's report is refused
	// whatever its seq, since its seq counts another owner's progress.
	switch {
	case r.Owner == "":
		reject(jobspb.RejectKind_FENCED, fmt.Sprintf("%s reports under epoch %d, but the job has no owner", msg.Worker, msg.Epoch))
	case msg.Worker != r.Owner || msg.Epoch != r.Epoch:
		reject(jobspb.RejectKind_FENCED, fmt.Sprintf("%s reports under epoch %d, but the job belongs to %s under epoch %d",
			msg.Worker, msg.Epoch, r.Owner, r.Epoch))
	case msg.Seq <= r.LastSeq:
		reject(jobspb.RejectKind_STALE, fmt.Sprintf("seq %d is not above the last accepted seq %d", msg.Seq, r.LastSeq))
	case r.Status == jobspb.Status_DONE:
		reject(jobspb.RejectKind_JOB_DONE, "job is done")
	default:
		r.LastSeq = msg.Seq
		if msg.Status == jobspb.Status_DONE {
			r.Status = jobspb.Status_DONE
		}
		r.History = append(r.History, &jobspb.Event{Kind: jobspb.Event_REPORTED, Worker: msg.Worker, Epoch: msg.Epoch, Seq: msg.Seq, Status: msg.Status})
		if err := e.save(ctx); err != nil {
			return // no answer: the worker retries
		}
		if r.Status == jobspb.Status_DONE {
			ctx.Send(e.scheduler, &jobspb.JobDone{Job: r.Id})
		}
		ctx.Respond(&jobspb.Accepted{Job: r.Id, Seq: msg.Seq})
	}
}
