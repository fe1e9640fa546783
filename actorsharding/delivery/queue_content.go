package delivery

import (
	"google.golang.org/protobuf/proto"

	"github.com/protoshard/protoshard/messages"
)

// QueueContent is what a DurableProducerQueue holds, with the checks its
// contract asks for (numberings without gaps, a stored seqNr keeps its
// content, all or none). The queues of this package keep one; a queue
// elsewhere (the Consul queue) keeps one too, to check a write and to
// know what it changes before it writes. It is not safe for concurrent
// use.
type QueueContent struct{ state *queueState }

// NewQueueContent returns the content st describes (nil: empty); it
// refuses a state that does not hold together.
func NewQueueContent(st *messages.DurableProducerQueueState) (*QueueContent, error) {
	s := newQueueState()
	if st != nil {
		if err := s.restore(st); err != nil {
			return nil, err
		}
	}
	return &QueueContent{state: s}, nil
}

// QueueChange is a write checked against a QueueContent and not yet
// applied (Commit).
type QueueChange struct {
	change queueChange
	// Added are the messages the content did not hold, in order.
	Added []*messages.MessageSent
	// Confirmed are the confirmations that change the content, in order.
	Confirmed []*messages.Confirmed
}

// PlanSent checks a StoreMessageSent batch.
func (c *QueueContent) PlanSent(sent []*messages.MessageSent) (QueueChange, error) {
	ch, err := c.state.planSent(sent)
	return QueueChange{change: ch, Added: ch.added}, err
}

// PlanConfirmed checks a StoreMessageConfirmed batch.
func (c *QueueContent) PlanConfirmed(confirmed []*messages.Confirmed) (QueueChange, error) {
	ch, err := c.state.planConfirmed(confirmed)
	return QueueChange{change: ch, Confirmed: ch.confirmed}, err
}

// Commit applies a change planned on c, and nothing since, once it is
// written.
func (c *QueueContent) Commit(ch QueueChange) { c.state.commit(ch.change) }

// Held returns those of entityIDs whose numbering c holds.
func (c *QueueContent) Held(entityIDs []string) []string {
	var held []string
	for _, id := range entityIDs {
		if _, ok := c.state.entities[id]; ok {
			held = append(held, id)
		}
	}
	return held
}

// Cleanup forgets the entities' numberings.
func (c *QueueContent) Cleanup(entityIDs []string) { c.state.cleanup(entityIDs) }

// Numbering is the entity's incarnation and confirmed seqNr; ok is false
// when c holds no numbering of it.
func (c *QueueContent) Numbering(entityID string) (incarnation uint64, confirmed int64, ok bool) {
	e := c.state.entities[entityID]
	if e == nil {
		return 0, 0, false
	}
	return e.incarnation, e.confirmed, true
}

// State is a copy of the content, as LoadState returns it.
func (c *QueueContent) State() *messages.DurableProducerQueueState {
	return proto.Clone(c.state.snapshot()).(*messages.DurableProducerQueueState)
}
