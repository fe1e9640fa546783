package delivery

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/deliveryqueue"
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
	// (consulstore.NewDurableProducerQueue) for a batch that fits one Consul
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

// memoryQueue is the DurableProducerQueue of NewMemoryQueue.
type memoryQueue struct {
	mu      sync.Mutex
	state   *deliveryqueue.Content
	claimed bool
}

var _ DurableProducerQueue = (*memoryQueue)(nil)

// NewMemoryQueue returns an empty DurableProducerQueue in memory: it
// survives a controller, not the process. For tests, and a controller
// restarted in the same process. The one value is the queue and its
// holder: LoadState claims it until Close, and a second LoadState
// meanwhile fails with ErrQueueFenced and changes nothing. Close cannot
// tell who calls it, so it releases the claim whoever does: a caller whose
// LoadState failed must not close it, or it releases the holder's claim.
// It is safe for concurrent use.
func NewMemoryQueue() DurableProducerQueue { return newMemoryQueue() }

func newMemoryQueue() *memoryQueue { return &memoryQueue{state: deliveryqueue.Empty()} }

// errQueueNotClaimed: a write before LoadState or after Close.
var errQueueNotClaimed = errors.New("delivery: durable producer queue written without a claim (before LoadState or after Close)")

// LoadState implements DurableProducerQueue.
func (q *memoryQueue) LoadState(ctx context.Context) (*messages.DurableProducerQueueState, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.claimed {
		return nil, fmt.Errorf("memory queue: %w", ErrQueueFenced)
	}
	q.claimed = true
	return q.state.State(), nil
}

// write runs f on the content while the queue is claimed.
func (q *memoryQueue) write(ctx context.Context, f func() error) error {
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
func (q *memoryQueue) StoreMessageSent(ctx context.Context, sent []*messages.MessageSent) error {
	clones := deliveryqueue.CloneSent(sent)
	return q.write(ctx, func() error {
		_, err := q.state.StoreSent(clones)
		return err
	})
}

// StoreMessageConfirmed implements DurableProducerQueue.
func (q *memoryQueue) StoreMessageConfirmed(ctx context.Context, confirmed []*messages.Confirmed) error {
	return q.write(ctx, func() error {
		_, err := q.state.StoreConfirmed(confirmed)
		return err
	})
}

// Cleanup implements DurableProducerQueue.
func (q *memoryQueue) Cleanup(ctx context.Context, entityIDs []string) error {
	return q.write(ctx, func() error {
		q.state.Cleanup(entityIDs)
		return nil
	})
}

// Close implements DurableProducerQueue: it releases the claim and keeps
// the content for the next LoadState.
func (q *memoryQueue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.claimed = false
	return nil
}
