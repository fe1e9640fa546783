package delivery

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/messages"
)

// DurableProducerQueue keeps what a ShardingProducerController accepted
// until the entities confirmed it, so that a producer that stops or
// crashes loses nothing (Akka's DurableProducerQueue). The controller calls
// it off its mailbox, one call in flight at a time, and retries a call
// that failed: every method must be idempotent.
//
// Each entity's messages are numbered by the controller: an incarnation
// (a random number naming the numbering) and a seqNr from 1, without gaps.
// The queue keeps, per entity, the incarnation and the highest confirmed
// seqNr, and the messages stored and not yet confirmed. A controller that
// loads them continues each numbering where it stopped, so an entity that
// stores its progress recognises what it already processed.
//
// A queue that stores messages only up to a size of its own has a method
// MaxMessageSentBytes() int, the largest encoded messages.MessageSent it
// takes; the controller then refuses a larger message at Send with
// ErrMessageTooLarge, before it is numbered.
type DurableProducerQueue interface {
	// LoadState claims the queue for this holder and returns its content:
	// per entity the incarnation and confirmed seqNr, and the unconfirmed
	// messages in entity and seqNr order. While the claim lasts, another
	// holder's LoadState fails with ErrQueueFenced, or, where a claim can
	// be taken over (a holder that crashed cannot release it), this
	// holder's later writes do. A second LoadState of a holder that has
	// the claim fails with ErrQueueFenced and changes nothing: a value
	// handed to two controllers is claimed by the first only.
	LoadState(ctx context.Context) (*messages.DurableProducerQueueState, error)
	// StoreMessageSent stores a batch, all or none where the store allows:
	// the memory and file queues always, the Consul queue
	// (consulstore.DurableProducerQueue) for a batch that fits one Consul
	// transaction only. A larger one is split over several, and should it
	// fail between them (the claim taken over: ErrQueueFenced), what went
	// through stays, and the holder that loads next delivers it. So a Send
	// that fails with ErrQueueFenced or ErrQueueFailed may still be
	// delivered. A message stored already with the same content is no
	// error (a retry). Each entity's
	// messages continue its numbering: seqNr 1 of a new incarnation
	// replaces the entity's numbering, any other must follow the last one
	// stored.
	StoreMessageSent(ctx context.Context, sent []*messages.MessageSent) error
	// StoreMessageConfirmed records that each entity processed its
	// messages up to seqNr, which the queue then forgets. A confirmation of
	// an incarnation the queue does not hold is ignored. The controller
	// writes them behind (as Akka): a confirmation lost to a crash means
	// messages sent again, which an entity that stores its progress drops.
	StoreMessageConfirmed(ctx context.Context, confirmed []*messages.Confirmed) error
	// Cleanup forgets the entities' numberings (unused for long); their
	// next message starts a new incarnation.
	Cleanup(ctx context.Context, entityIDs []string) error
	// Close releases the claim this holder's successful LoadState took; a
	// holder without one (never loaded, its LoadState failed, closed
	// already) releases nothing, so the claim of another holder stays. A
	// value cannot tell its callers apart: only the caller whose LoadState
	// succeeded closes it (the controller closes its queue when it stops,
	// if it loaded it).
	Close() error
}

// ErrQueueFenced: another producer with the same ID claimed the durable
// queue. A controller that sees it stops, and every Send fails with it.
var ErrQueueFenced = errors.New("delivery: durable producer queue claimed by another producer")

// ErrQueueFailed: the durable queue kept failing after
// WithDurableQueueRetryAttempts tries. A controller that sees
// it stops, and every Send fails with it (wrapping the last error).
var ErrQueueFailed = errors.New("delivery: durable producer queue failed")

// ErrMessageTooLarge: Send refused a message larger than
// WithMaxMessageSize allows to send, or than its durable queue
// stores. It wraps deadletter.ErrMessageTooLarge.
var ErrMessageTooLarge = fmt.Errorf("delivery: message too large: %w", deadletter.ErrMessageTooLarge)

// errQueueWrite: a write that does not fit the queue's content (a gap in a
// numbering, another message under a stored seqNr...). The controller
// never makes one; a queue that gets one changes nothing.
var errQueueWrite = errors.New("delivery: write refused by the durable producer queue")

// queueEntity is one entity's numbering in a queue.
type queueEntity struct {
	incarnation uint64
	confirmed   int64
	confirmedAt int64                   // unix ms
	unconfirmed []*messages.MessageSent // confirmed+1, confirmed+2, ...
}

func (e *queueEntity) last() int64 { return e.confirmed + int64(len(e.unconfirmed)) }

// queueState is the content of a queue, Akka's DurableProducerQueue.State
// with per-entity numbering: what the memory and file queues keep and
// replay. Its methods check a write before they change anything.
type queueState struct {
	entities map[string]*queueEntity
}

func newQueueState() *queueState { return &queueState{entities: make(map[string]*queueEntity)} }

// checkSent refuses a message the queue can never hold.
func checkSent(m *messages.MessageSent) error {
	switch {
	case m == nil:
		return fmt.Errorf("%w: nil MessageSent", errQueueWrite)
	case m.GetEntityId() == "":
		return fmt.Errorf("%w: MessageSent without an entity ID", errQueueWrite)
	case m.GetProducerIncarnation() == 0:
		return fmt.Errorf("%w: entity %q: MessageSent without an incarnation", errQueueWrite, m.GetEntityId())
	case m.GetSeqNr() < 1:
		return fmt.Errorf("%w: entity %q: seqNr %d", errQueueWrite, m.GetEntityId(), m.GetSeqNr())
	case m.GetMessage() == nil:
		return fmt.Errorf("%w: entity %q seqNr %d: no message", errQueueWrite, m.GetEntityId(), m.GetSeqNr())
	}
	return nil
}

// touch is the entity id as a write in progress changed it: a copy taken
// into touched on first use, so that a refused write leaves s unchanged.
func (s *queueState) touch(touched map[string]*queueEntity, id string) *queueEntity {
	if e, ok := touched[id]; ok {
		return e
	}
	if old := s.entities[id]; old != nil {
		cp := *old
		return &cp
	}
	return nil
}

// queueChange is a write checked against a queueState and not yet
// applied: the entities it touches as they become, and what is new.
type queueChange struct {
	touched   map[string]*queueEntity
	added     []*messages.MessageSent // not held before, in order
	confirmed []*messages.Confirmed   // that change the content, in order
}

// commit applies a change planned on s (and nothing since).
func (s *queueState) commit(c queueChange) {
	for id, e := range c.touched {
		s.entities[id] = e
	}
}

// storeSent adds the batch, all or none.
func (s *queueState) storeSent(batch []*messages.MessageSent) (queueChange, error) {
	c, err := s.planSent(batch)
	if err == nil {
		s.commit(c)
	}
	return c, err
}

// storeConfirmed applies the confirmations, all or none.
func (s *queueState) storeConfirmed(batch []*messages.Confirmed) (queueChange, error) {
	c, err := s.planConfirmed(batch)
	if err == nil {
		s.commit(c)
	}
	return c, err
}

// planSent checks the batch against copies of the entities it touches.
func (s *queueState) planSent(batch []*messages.MessageSent) (queueChange, error) {
	touched := make(map[string]*queueEntity)
	var added []*messages.MessageSent
	for _, m := range batch {
		if err := checkSent(m); err != nil {
			return queueChange{}, err
		}
		id := m.GetEntityId()
		e := s.touch(touched, id)
		seq := m.GetSeqNr()
		switch {
		case e == nil || e.incarnation != m.GetProducerIncarnation():
			if seq != 1 {
				return queueChange{}, fmt.Errorf("%w: entity %q: incarnation %d starts at seqNr %d, not 1", errQueueWrite, id, m.GetProducerIncarnation(), seq)
			}
			e = &queueEntity{incarnation: m.GetProducerIncarnation(), unconfirmed: []*messages.MessageSent{m}}
			added = append(added, m)
		case seq <= e.confirmed:
			// Confirmed already: a retry of a write that succeeded.
		case seq <= e.last():
			if stored := e.unconfirmed[seq-e.confirmed-1]; !proto.Equal(stored, m) {
				return queueChange{}, fmt.Errorf("%w: entity %q seqNr %d is stored with another content", errQueueWrite, id, seq)
			}
		case seq == e.last()+1:
			e.unconfirmed = append(e.unconfirmed[:len(e.unconfirmed):len(e.unconfirmed)], m)
			added = append(added, m)
		default:
			return queueChange{}, fmt.Errorf("%w: entity %q: seqNr %d after %d", errQueueWrite, id, seq, e.last())
		}
		touched[id] = e
	}
	return queueChange{touched: touched, added: added}, nil
}

// planConfirmed checks the confirmations against copies of the entities
// they touch.
func (s *queueState) planConfirmed(batch []*messages.Confirmed) (queueChange, error) {
	touched := make(map[string]*queueEntity)
	var changed []*messages.Confirmed
	for _, c := range batch {
		if c == nil {
			return queueChange{}, fmt.Errorf("%w: nil Confirmed", errQueueWrite)
		}
		id := c.GetEntityId()
		e := s.touch(touched, id)
		if e == nil || e.incarnation != c.GetProducerIncarnation() || c.GetSeqNr() <= e.confirmed {
			continue // another numbering, or confirmed already
		}
		if c.GetSeqNr() > e.last() {
			return queueChange{}, fmt.Errorf("%w: entity %q: confirmed %d, only up to %d stored", errQueueWrite, id, c.GetSeqNr(), e.last())
		}
		e.unconfirmed = e.unconfirmed[c.GetSeqNr()-e.confirmed:]
		if len(e.unconfirmed) == 0 {
			e.unconfirmed = nil
		}
		e.confirmed, e.confirmedAt = c.GetSeqNr(), c.GetTimestampMs()
		touched[id] = e
		changed = append(changed, c)
	}
	return queueChange{touched: touched, confirmed: changed}, nil
}

// cleanup forgets the entities and returns those it held, in order.
func (s *queueState) cleanup(ids []string) []string {
	var removed []string
	for _, id := range ids {
		if _, ok := s.entities[id]; ok {
			delete(s.entities, id)
			removed = append(removed, id)
		}
	}
	return removed
}

// events is how many events a log of the content needs: one per entity
// and one per unconfirmed message.
func (s *queueState) events() int {
	n := 0
	for _, e := range s.entities {
		n += 1 + len(e.unconfirmed)
	}
	return n
}

// snapshot is the content, entities in ID order. It shares the stored
// messages: a caller outside the queue gets a clone.
func (s *queueState) snapshot() *messages.DurableProducerQueueState {
	ids := make([]string, 0, len(s.entities))
	for id := range s.entities {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	st := &messages.DurableProducerQueueState{}
	for _, id := range ids {
		e := s.entities[id]
		st.Entities = append(st.Entities, &messages.DurableProducerQueueEntity{EntityId: id, ProducerIncarnation: e.incarnation,
			ConfirmedSeqNr: e.confirmed, ConfirmedTimestampMs: e.confirmedAt})
		st.Unconfirmed = append(st.Unconfirmed, e.unconfirmed...)
	}
	return st
}

// restore replaces the content by a snapshot, checking it as a write.
func (s *queueState) restore(st *messages.DurableProducerQueueState) error {
	next := newQueueState()
	for _, e := range st.GetEntities() {
		if e.GetEntityId() == "" || e.GetProducerIncarnation() == 0 || e.GetConfirmedSeqNr() < 0 {
			return fmt.Errorf("%w: snapshot entity %q, incarnation %d, confirmed %d", errQueueWrite, e.GetEntityId(), e.GetProducerIncarnation(), e.GetConfirmedSeqNr())
		}
		if _, dup := next.entities[e.GetEntityId()]; dup {
			return fmt.Errorf("%w: snapshot holds entity %q twice", errQueueWrite, e.GetEntityId())
		}
		next.entities[e.GetEntityId()] = &queueEntity{incarnation: e.GetProducerIncarnation(), confirmed: e.GetConfirmedSeqNr(), confirmedAt: e.GetConfirmedTimestampMs()}
	}
	for _, m := range st.GetUnconfirmed() {
		if err := checkSent(m); err != nil {
			return err
		}
		e := next.entities[m.GetEntityId()]
		if e == nil || e.incarnation != m.GetProducerIncarnation() || m.GetSeqNr() != e.last()+1 {
			return fmt.Errorf("%w: snapshot message of entity %q, incarnation %d, seqNr %d does not continue its numbering", errQueueWrite,
				m.GetEntityId(), m.GetProducerIncarnation(), m.GetSeqNr())
		}
		e.unconfirmed = append(e.unconfirmed, m)
	}
	s.entities = next.entities
	return nil
}

// cloneSent copies a batch (nil stays nil, for the checks to refuse), so
// that what a queue keeps is not the caller's.
func cloneSent(sent []*messages.MessageSent) []*messages.MessageSent {
	clones := make([]*messages.MessageSent, len(sent))
	for i, m := range sent {
		if m != nil {
			clones[i] = proto.Clone(m).(*messages.MessageSent)
		}
	}
	return clones
}

// MemoryQueue is a DurableProducerQueue in memory: it survives a
// controller, not the process. For tests, and a controller restarted in
// the same process. The one value is the queue and its holder: LoadState
// claims it until Close, and a second LoadState meanwhile fails with
// ErrQueueFenced and changes nothing. Close cannot tell who calls it, so
// it releases the claim whoever does: a caller whose LoadState failed
// must not close it, or it releases the holder's claim. It is safe for
// concurrent use.
type MemoryQueue struct {
	mu      sync.Mutex
	state   *queueState
	claimed bool
}

var _ DurableProducerQueue = (*MemoryQueue)(nil)

// NewMemoryQueue returns an empty queue.
func NewMemoryQueue() *MemoryQueue { return &MemoryQueue{state: newQueueState()} }

// errQueueNotClaimed: a write before LoadState or after Close.
var errQueueNotClaimed = errors.New("delivery: durable producer queue written without a claim (before LoadState or after Close)")

// LoadState implements DurableProducerQueue.
func (q *MemoryQueue) LoadState(ctx context.Context) (*messages.DurableProducerQueueState, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.claimed {
		return nil, fmt.Errorf("memory queue: %w", ErrQueueFenced)
	}
	q.claimed = true
	return proto.Clone(q.state.snapshot()).(*messages.DurableProducerQueueState), nil
}

// write runs f on the content while the queue is claimed.
func (q *MemoryQueue) write(ctx context.Context, f func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.claimed {
		return errQueueNotClaimed
	}
	return f()
}

// StoreMessageSent implements DurableProducerQueue. The messages are kept
// as clones.
func (q *MemoryQueue) StoreMessageSent(ctx context.Context, sent []*messages.MessageSent) error {
	clones := cloneSent(sent)
	return q.write(ctx, func() error {
		_, err := q.state.storeSent(clones)
		return err
	})
}

// StoreMessageConfirmed implements DurableProducerQueue.
func (q *MemoryQueue) StoreMessageConfirmed(ctx context.Context, confirmed []*messages.Confirmed) error {
	return q.write(ctx, func() error {
		_, err := q.state.storeConfirmed(confirmed)
		return err
	})
}

// Cleanup implements DurableProducerQueue.
func (q *MemoryQueue) Cleanup(ctx context.Context, entityIDs []string) error {
	return q.write(ctx, func() error {
		q.state.cleanup(entityIDs)
		return nil
	})
}

// Close implements DurableProducerQueue: it releases the claim and keeps
// the content for the next LoadState.
func (q *MemoryQueue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.claimed = false
	return nil
}
