package actorsharding

import (
	"fmt"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/msgbuffer"
	"github.com/protoshard/protoshard/internal/shardproto"

	"github.com/protoshard/protoshard/deadletter"
)

// errBufferFull is shardBuffers.add's error past the region's buffer-size.
// Its text is Akka's log line verbatim: it is the dead-letter event's
// Reason, which the README quotes and operators search for.
//
//lint:ignore ST1005 Akka's wording, kept as documented (see above).
var errBufferFull = fmt.Errorf("Buffer is full, dropping message: %w", deadletter.ErrBufferFull)

// shardBuffers is the region's buffer of messages for shards whose home is
// unknown or not ready (Akka's shardBuffers, a MessageBufferMap): per
// shard in arrival order, bounded in total by the region's buffer-size.
type shardBuffers struct {
	msgbuffer.Buffer[string, bufferedMessage]
}

func newShardBuffers(limit int) shardBuffers {
	return shardBuffers{msgbuffer.New[string, bufferedMessage](limit)}
}

// add appends m to shard's buffer; past the limit it fails with
// errBufferFull and keeps nothing.
func (b *shardBuffers) add(shard string, m bufferedMessage) error {
	if !b.Add(shard, m) {
		return fmt.Errorf("%w (shard %s, buffer size %d)", errBufferFull, shard, b.Limit())
	}
	return nil
}

// prepend puts msgs, in their order, before what shard's buffer holds:
// messages older than all of it (a handed-off shard gives back what it
// held). They were taken once already, so the limit does not refuse them.
func (b *shardBuffers) prepend(shard string, msgs []bufferedMessage) { b.Prepend(shard, msgs) }

// has reports whether shard has buffered messages.
func (b *shardBuffers) has(shard string) bool { return b.Has(shard) }

// take returns shard's messages, oldest first, and forgets them.
func (b *shardBuffers) take(shard string) []bufferedMessage { return b.Take(shard) }

// takeForwarded returns shard's messages that other regions forwarded,
// oldest first, and forgets them; the others stay in their order.
func (b *shardBuffers) takeForwarded(shard string) []bufferedMessage {
	return b.TakeFunc(shard, func(m bufferedMessage) bool { return m.forwarded })
}

// shards lists the shards with buffered messages, in the order their
// buffers were opened.
func (b *shardBuffers) shards() []string { return b.Keys() }

// len is the number of buffered messages, all shards together.
func (b *shardBuffers) len() int { return b.Len() }

type bufferedMessage struct {
	entityID string
	message  any // the entity's message, or *messages.StartEntity
	sender   *actor.PID
	// forwarded: another region sent it here (in a ShardingEnvelope, or
	// by itself to the region's entry).
	forwarded bool
	// pending marks it on the slow way for the router (see
	// shardproto.Pending); released when it leaves the region for good.
	pending *shardproto.Pending
	// header: the message's header (a trace context), or nil.
	header map[string]string
}
