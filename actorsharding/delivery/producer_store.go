package delivery

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/protoshard/protoshard/internal/backoff"
	"github.com/protoshard/protoshard/messages"
)

// errStoreOrder: a store result that does not answer the write in flight.
var errStoreOrder = errors.New("durable queue results out of order")

// storedSend is an accepted message on its way to the durable queue, and
// the Send waiting for it to be stored.
type storedSend struct {
	seq   *messages.SequencedMessage
	reply *sendRequest
}

// storeWrite is one round of writes to the durable queue, run off the
// actor: the cleanups, then the messages, then the confirmations. A
// cleanup goes first because an entity cleaned up may already have a new
// numbering among the messages; confirmations of a numbering cleaned up
// are ignored by the queue.
type storeWrite struct {
	cleanup   []string
	sent      []*messages.MessageSent
	confirmed []*messages.Confirmed
	sends     []storedSend // the Sends whose messages sent carries, in order

	delay   time.Duration // to wait before running: a retry's back-off
	attempt int           // 1 for the first try
	running bool
	// The parts written by an earlier try; a retry skips them.
	cleanupDone, sentDone, confirmedDone bool
}

// storeResult is how a storeWrite went: the parts it wrote, and the error
// of the part that failed.
type storeResult struct {
	write                                *storeWrite
	cleanupDone, sentDone, confirmedDone bool
	err                                  error
}

// queueRetry is how the controller retries a call to its durable queue:
// attempts tries, with the back-off between them; a fenced queue is not
// retried.
type queueRetry struct {
	backoff.Exponential
	attempts int
}

// next is the delay before try attempt+1 after try attempt failed with
// err, or the error the controller stops with.
func (r queueRetry) next(attempt int, err error) (time.Duration, error) {
	if errors.Is(err, ErrQueueFenced) {
		return 0, err
	}
	if attempt >= r.attempts {
		return 0, fmt.Errorf("%w after %d tries: %w", ErrQueueFailed, attempt, err)
	}
	return r.Delay(attempt - 1), nil
}

// storePipeline is the bookkeeping of a producer's writes to its durable
// queue, as the coordinator's stateWrites: one write in flight, and what
// comes meanwhile waits and goes in the next write, so batches grow with
// the load. A write that fails is retried as it was (the queue's calls are
// idempotent) until queueRetry gives up; then the pipeline is failed.
type storePipeline struct {
	retry queueRetry

	sends     []storedSend
	confirmed map[string]*messages.Confirmed // the highest per entity
	cleanup   []string
	flight    *storeWrite
	failed    error
}

func (s *storePipeline) addSent(seq *messages.SequencedMessage, reply *sendRequest) {
	s.sends = append(s.sends, storedSend{seq: seq, reply: reply})
}

func (s *storePipeline) addConfirmed(c *messages.Confirmed) {
	if s.confirmed == nil {
		s.confirmed = make(map[string]*messages.Confirmed)
	}
	if old := s.confirmed[c.GetEntityId()]; old == nil || old.GetProducerIncarnation() != c.GetProducerIncarnation() || old.GetSeqNr() < c.GetSeqNr() {
		s.confirmed[c.GetEntityId()] = c
	}
}

func (s *storePipeline) addCleanup(ids []string) { s.cleanup = append(s.cleanup, ids...) }

// pending: something waits for the next write.
func (s *storePipeline) pending() bool {
	return len(s.sends) > 0 || len(s.confirmed) > 0 || len(s.cleanup) > 0
}

// idle: nothing waits and nothing is in flight.
func (s *storePipeline) idle() bool { return s.flight == nil && !s.pending() }

// quiet: no write runs and none waits (or the pipeline failed, so none
// will): the queue may be closed.
func (s *storePipeline) quiet() bool {
	if s.flight != nil && s.flight.running {
		return false
	}
	return s.failed != nil || s.idle()
}

// begin returns the write to run now: the one in flight when it waits for
// its retry, else everything pending; nil when a write runs, nothing
// waits, or the pipeline failed.
func (s *storePipeline) begin(now time.Time) *storeWrite {
	if s.failed != nil {
		return nil
	}
	if s.flight != nil {
		if s.flight.running {
			return nil
		}
		s.flight.running = true
		return s.flight
	}
	if !s.pending() {
		return nil
	}
	w := &storeWrite{cleanup: s.cleanup, sends: s.sends, attempt: 1, running: true}
	for _, p := range s.sends {
		w.sent = append(w.sent, messageSent(p.seq, now))
	}
	for _, c := range s.confirmed {
		w.confirmed = append(w.confirmed, c)
	}
	sort.Slice(w.confirmed, func(i, j int) bool { return w.confirmed[i].GetEntityId() < w.confirmed[j].GetEntityId() })
	s.sends, s.confirmed, s.cleanup = nil, nil, nil
	s.flight = w
	return w
}

// messageSent is what the queue stores of seq.
func messageSent(seq *messages.SequencedMessage, now time.Time) *messages.MessageSent {
	return &messages.MessageSent{
		EntityId:            seq.GetEntityId(),
		ProducerIncarnation: seq.GetProducerIncarnation(),
		SeqNr:               seq.GetSeqNr(),
		Ack:                 seq.GetAck(),
		TimestampMs:         now.UnixMilli(),
		Message:             seq.GetMessage(),
	}
}

// done takes the result of the write in flight. stored are the Sends whose
// messages the queue now holds (the messages part succeeded, in this try);
// failed, when not nil, is the error the pipeline failed with.
func (s *storePipeline) done(r storeResult) (stored []storedSend, failed error) {
	w := s.flight
	if w == nil || w != r.write || !w.running {
		return nil, fmt.Errorf("%w: a result for a write not running", errStoreOrder)
	}
	w.running = false
	w.cleanupDone = w.cleanupDone || r.cleanupDone
	if r.sentDone && !w.sentDone {
		w.sentDone = true
		stored = w.sends
	}
	w.confirmedDone = w.confirmedDone || r.confirmedDone
	if r.err == nil {
		s.flight = nil
		return stored, nil
	}
	delay, err := s.retry.next(w.attempt, r.err)
	if err != nil {
		s.failed = err
		return stored, err
	}
	w.attempt++
	w.delay = delay
	return stored, nil
}

// unstored are the Sends whose messages never reach the queue once it
// failed: in the write in flight and waiting, in order.
func (s *storePipeline) unstored() []storedSend {
	var out []storedSend
	if s.flight != nil && !s.flight.sentDone {
		out = append(out, s.flight.sends...)
	}
	return append(out, s.sends...)
}
