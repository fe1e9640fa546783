// Package deliveryqueue is the content of a durable producer queue
// (delivery.DurableProducerQueue) as a value with checked transitions:
// the memory, file and Consul queues keep one, so that each checks a
// write the same way.
package deliveryqueue

import (
	"errors"
	"fmt"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/protoshard/protoshard/messages"
)

// ErrWrite: a write that does not fit the queue's content (a gap in a
// numbering, another message under a stored seqNr...). The controller
// never makes one; a queue that gets one changes nothing.
var ErrWrite = errors.New("delivery: write refused by the durable producer queue")

// entity is one entity's numbering in a queue.
type entity struct {
	incarnation uint64
	confirmed   int64
	confirmedAt int64                   // unix ms
	unconfirmed []*messages.MessageSent // confirmed+1, confirmed+2, ...
}

func (e *entity) last() int64 { return e.confirmed + int64(len(e.unconfirmed)) }

// Content is the content of a queue, Akka's DurableProducerQueue.State
// with per-entity numbering, with the checks the queue's contract asks
// for (numberings without gaps, a stored seqNr keeps its content, all or
// none): what the memory and file queues keep and replay, and what the
// Consul queue keeps to check a write and to know what it changes before
// it writes. Its methods check a write before they change anything. It is
// not safe for concurrent use.
type Content struct {
	entities map[string]*entity
}

// Empty returns a content without entities.
func Empty() *Content { return &Content{entities: make(map[string]*entity)} }

// New returns the content st describes (nil: empty); it refuses a state
// that does not hold together.
func New(st *messages.DurableProducerQueueState) (*Content, error) {
	s := Empty()
	if st != nil {
		if err := s.restore(st); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// checkSent refuses a message the queue can never hold.
func checkSent(m *messages.MessageSent) error {
	switch {
	case m == nil:
		return fmt.Errorf("%w: nil MessageSent", ErrWrite)
	case m.GetEntityId() == "":
		return fmt.Errorf("%w: MessageSent without an entity ID", ErrWrite)
	case m.GetProducerIncarnation() == 0:
		return fmt.Errorf("%w: entity %q: MessageSent without an incarnation", ErrWrite, m.GetEntityId())
	case m.GetSeqNr() < 1:
		return fmt.Errorf("%w: entity %q: seqNr %d", ErrWrite, m.GetEntityId(), m.GetSeqNr())
	case m.GetMessage() == nil:
		return fmt.Errorf("%w: entity %q seqNr %d: no message", ErrWrite, m.GetEntityId(), m.GetSeqNr())
	}
	return nil
}

// touch is the entity id as a write in progress changed it: a copy taken
// into touched on first use, so that a refused write leaves s unchanged.
func (s *Content) touch(touched map[string]*entity, id string) *entity {
	if e, ok := touched[id]; ok {
		return e
	}
	if old := s.entities[id]; old != nil {
		cp := *old
		return &cp
	}
	return nil
}

// Change is a write checked against a Content and not yet applied
// (Commit): the entities it touches as they become, and what is new.
type Change struct {
	touched map[string]*entity
	// Added are the messages the content did not hold, in order.
	Added []*messages.MessageSent
	// Confirmed are the confirmations that change the content, in order.
	Confirmed []*messages.Confirmed
}

// Commit applies a change planned on s, and nothing since, once it is
// written.
func (s *Content) Commit(c Change) {
	for id, e := range c.touched {
		s.entities[id] = e
	}
}

// StoreSent adds the batch, all or none.
func (s *Content) StoreSent(batch []*messages.MessageSent) (Change, error) {
	c, err := s.PlanSent(batch)
	if err == nil {
		s.Commit(c)
	}
	return c, err
}

// StoreConfirmed applies the confirmations, all or none.
func (s *Content) StoreConfirmed(batch []*messages.Confirmed) (Change, error) {
	c, err := s.PlanConfirmed(batch)
	if err == nil {
		s.Commit(c)
	}
	return c, err
}

// PlanSent checks the batch against copies of the entities it touches.
func (s *Content) PlanSent(batch []*messages.MessageSent) (Change, error) {
	touched := make(map[string]*entity)
	var added []*messages.MessageSent
	for _, m := range batch {
		if err := checkSent(m); err != nil {
			return Change{}, err
		}
		id := m.GetEntityId()
		e := s.touch(touched, id)
		seq := m.GetSeqNr()
		switch {
		case e == nil || e.incarnation != m.GetProducerIncarnation():
			if seq != 1 {
				return Change{}, fmt.Errorf("%w: entity %q: incarnation %d starts at seqNr %d, not 1", ErrWrite, id, m.GetProducerIncarnation(), seq)
			}
			e = &entity{incarnation: m.GetProducerIncarnation(), unconfirmed: []*messages.MessageSent{m}}
			added = append(added, m)
		case seq <= e.confirmed:
			// Confirmed already: a retry of a write that succeeded.
		case seq <= e.last():
			if stored := e.unconfirmed[seq-e.confirmed-1]; !proto.Equal(stored, m) {
				return Change{}, fmt.Errorf("%w: entity %q seqNr %d is stored with another content", ErrWrite, id, seq)
			}
		case seq == e.last()+1:
			e.unconfirmed = append(e.unconfirmed[:len(e.unconfirmed):len(e.unconfirmed)], m)
			added = append(added, m)
		default:
			return Change{}, fmt.Errorf("%w: entity %q: seqNr %d after %d", ErrWrite, id, seq, e.last())
		}
		touched[id] = e
	}
	return Change{touched: touched, Added: added}, nil
}

// PlanConfirmed checks the confirmations against copies of the entities
// they touch.
func (s *Content) PlanConfirmed(batch []*messages.Confirmed) (Change, error) {
	touched := make(map[string]*entity)
	var changed []*messages.Confirmed
	for _, c := range batch {
		if c == nil {
			return Change{}, fmt.Errorf("%w: nil Confirmed", ErrWrite)
		}
		id := c.GetEntityId()
		e := s.touch(touched, id)
		if e == nil || e.incarnation != c.GetProducerIncarnation() || c.GetSeqNr() <= e.confirmed {
			continue // another numbering, or confirmed already
		}
		if c.GetSeqNr() > e.last() {
			return Change{}, fmt.Errorf("%w: entity %q: confirmed %d, only up to %d stored", ErrWrite, id, c.GetSeqNr(), e.last())
		}
		e.unconfirmed = e.unconfirmed[c.GetSeqNr()-e.confirmed:]
		if len(e.unconfirmed) == 0 {
			e.unconfirmed = nil
		}
		e.confirmed, e.confirmedAt = c.GetSeqNr(), c.GetTimestampMs()
		touched[id] = e
		changed = append(changed, c)
	}
	return Change{touched: touched, Confirmed: changed}, nil
}

// Cleanup forgets the entities and returns those it held, in order.
func (s *Content) Cleanup(ids []string) []string {
	var removed []string
	for _, id := range ids {
		if _, ok := s.entities[id]; ok {
			delete(s.entities, id)
			removed = append(removed, id)
		}
	}
	return removed
}

// Events is how many events a log of the content needs: one per entity
// and one per unconfirmed message.
func (s *Content) Events() int {
	n := 0
	for _, e := range s.entities {
		n += 1 + len(e.unconfirmed)
	}
	return n
}

// Snapshot is the content, entities in ID order. It shares the stored
// messages: a caller outside the queue gets a clone.
func (s *Content) Snapshot() *messages.DurableProducerQueueState {
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

// Held returns those of entityIDs whose numbering s holds.
func (s *Content) Held(entityIDs []string) []string {
	var held []string
	for _, id := range entityIDs {
		if _, ok := s.entities[id]; ok {
			held = append(held, id)
		}
	}
	return held
}

// Numbering is the entity's incarnation and confirmed seqNr; ok is false
// when s holds no numbering of it.
func (s *Content) Numbering(entityID string) (incarnation uint64, confirmed int64, ok bool) {
	e := s.entities[entityID]
	if e == nil {
		return 0, 0, false
	}
	return e.incarnation, e.confirmed, true
}

// State is a copy of the content, as LoadState returns it.
func (s *Content) State() *messages.DurableProducerQueueState {
	return proto.Clone(s.Snapshot()).(*messages.DurableProducerQueueState)
}

// restore replaces the content by a snapshot, checking it as a write.
func (s *Content) restore(st *messages.DurableProducerQueueState) error {
	next := Empty()
	for _, e := range st.GetEntities() {
		if e.GetEntityId() == "" || e.GetProducerIncarnation() == 0 || e.GetConfirmedSeqNr() < 0 {
			return fmt.Errorf("%w: snapshot entity %q, incarnation %d, confirmed %d", ErrWrite, e.GetEntityId(), e.GetProducerIncarnation(), e.GetConfirmedSeqNr())
		}
		if _, dup := next.entities[e.GetEntityId()]; dup {
			return fmt.Errorf("%w: snapshot holds entity %q twice", ErrWrite, e.GetEntityId())
		}
		next.entities[e.GetEntityId()] = &entity{incarnation: e.GetProducerIncarnation(), confirmed: e.GetConfirmedSeqNr(), confirmedAt: e.GetConfirmedTimestampMs()}
	}
	for _, m := range st.GetUnconfirmed() {
		if err := checkSent(m); err != nil {
			return err
		}
		e := next.entities[m.GetEntityId()]
		if e == nil || e.incarnation != m.GetProducerIncarnation() || m.GetSeqNr() != e.last()+1 {
			return fmt.Errorf("%w: snapshot message of entity %q, incarnation %d, seqNr %d does not continue its numbering", ErrWrite,
				m.GetEntityId(), m.GetProducerIncarnation(), m.GetSeqNr())
		}
		e.unconfirmed = append(e.unconfirmed, m)
	}
	s.entities = next.entities
	return nil
}

// CloneSent copies a batch (nil stays nil, for the checks to refuse), so
// that what a queue keeps is not the caller's.
func CloneSent(sent []*messages.MessageSent) []*messages.MessageSent {
	clones := make([]*messages.MessageSent, len(sent))
	for i, m := range sent {
		if m != nil {
			clones[i] = proto.Clone(m).(*messages.MessageSent)
		}
	}
	return clones
}
