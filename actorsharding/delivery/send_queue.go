package delivery

import (
	"sync"

	"google.golang.org/protobuf/proto"
)

// queuedSend is a Send admitted by the sendQueue: its message packed and
// checked by the sender, to be numbered by the controller.
type queuedSend struct {
	entityID string
	msg      proto.Message // for a dead-letter event
	payload  packed
}

// drainSends wakes the controller to take what the sendQueue holds.
type drainSends struct{}

// sendQueue carries Sends to the producer controller without a round trip
// to its mailbox for each: a Send the controller cannot refuse is queued
// and answered at once, and the controller takes the queue whole when it
// wakes (one drainSends in its mailbox at a time). The controller refuses
// a Send without a durable queue or confirmation only for a full buffer,
// so the queue admits a Send only while what it holds, what the
// controller took and has not yet accounted for, and what the controller
// buffers (as it last told, hold) stay under the buffer's size; beyond,
// the Send goes the way that waits for the controller's answer. A closed
// queue admits nothing: what it held is the controller's to drop.
type sendQueue struct {
	mu     sync.Mutex
	limit  int
	queued []queuedSend
	spare  []queuedSend // the array of the batch taken before, reused
	taken  int          // sends the controller took and has not accounted for (hold)
	held   int          // the controller's buffered messages, as last told
	// wakePending: a drainSends is on its way, so an offer posts none.
	wakePending bool
	closed      bool
}

func newSendQueue(limit int) *sendQueue { return &sendQueue{limit: limit} }

// The outcomes of sendQueue.offer.
type offerResult int

const (
	// offerQueued: s is queued; the controller will take it.
	offerQueued offerResult = iota
	// offerQueuedWake: s is queued, and the caller posts drainSends.
	offerQueuedWake
	// offerFull: s is not queued; it must wait for the controller's
	// answer, which may be ErrBufferFull.
	offerFull
	// offerClosed: the controller stopped.
	offerClosed
)

// offer queues s if the controller's buffer has room for it whatever the
// demand of its entity.
func (q *sendQueue) offer(s queuedSend) offerResult {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.closed:
		return offerClosed
	case len(q.queued)+q.taken+q.held >= q.limit:
		return offerFull
	}
	q.queued = append(q.queued, s)
	if q.wakePending {
		return offerQueued
	}
	q.wakePending = true
	return offerQueuedWake
}

// take hands the controller what is queued, in order. The batch stays
// valid until the next take; its sends count against the buffer until
// the controller accounted for them (hold).
func (q *sendQueue) take() []queuedSend {
	q.mu.Lock()
	defer q.mu.Unlock()
	batch := q.queued
	clear(q.spare) // the batch before: processed, its messages released
	q.queued, q.spare = q.spare[:0], batch
	q.taken += len(batch)
	q.wakePending = false
	return batch
}

// hold tells that the controller accounted for the sends it took: it now
// buffers buffered messages.
func (q *sendQueue) hold(buffered int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.taken, q.held = 0, buffered
}

// close admits no more sends and returns what is queued, in order: sends
// answered already that the controller never took.
func (q *sendQueue) close() []queuedSend {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	rest := q.queued
	q.queued, q.spare = nil, nil
	return rest
}
