// Package shardproto is the local protocol between a shard region and its
// shards: the messages they exchange in one actor system (they never cross
// nodes), the routes a shard opens for its region's router, and the marks
// of messages still on the slow way. It is internal: applications talk to
// regions, never to shards.
package shardproto

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Deliver is what the region sends its shard child for one entity. The
// region sends it with ctx.RequestWithCustomSender(shard, &Deliver{...},
// originalSender), so the entity sees the original sender and its
// ctx.Respond reaches it. A Deliver whose Message is a *messages.StartEntity
// is handled as that StartEntity (the ack goes to the sender).
type Deliver struct {
	// EntityID is the target entity; it must not be empty.
	EntityID string
	// Message is what the entity receives; it must not be nil.
	Message any
	// Pending, if set, is released once the message is in the entity's
	// mailbox or dropped (see EntityRoutes).
	Pending *Pending
	// Header is the message's header (a trace context), which the entity
	// receives with it; nil: none.
	Header map[string]string
}

// HandOffReturned is what a shard that hands off gives back to its region
// (its parent) instead of dropping it: the messages it held for entities
// that could not take them yet (starting, passivating), each entity's in
// their order, then those that waited for the shard to be ready. They are
// older than anything the region buffered since BeginHandOff, and go to
// the shard's new home first.
type HandOffReturned struct {
	// Shard is the shard that hands off.
	Shard string
	// Messages are the returned messages, in the order to deliver them.
	Messages []ReturnedMessage
}

// ReturnedMessage is one message of HandOffReturned.
type ReturnedMessage struct {
	// EntityID is the entity the message is for.
	EntityID string
	// Message is the entity's message, or a *messages.StartEntity.
	Message any
	// Sender is the message's original sender, or nil.
	Sender *actor.PID
	// Pending is the message's mark, if it has one (see EntityRoutes).
	Pending *Pending
	// Header is the message's header, or nil.
	Header map[string]string
}

// GetShardStats asks a shard for its entity count; the answer is a
// *ShardStats. Answered in every state.
type GetShardStats struct{}

// ShardStats answers GetShardStats.
type ShardStats struct {
	// ShardID is the shard that answered.
	ShardID string
	// EntityCount counts the entity actors alive, passivating ones included
	// (as Akka).
	EntityCount int
}

// GetCurrentShardState asks a shard for its entity IDs; the answer is a
// *CurrentShardState. Answered in every state.
type GetCurrentShardState struct{}

// CurrentShardState answers GetCurrentShardState.
type CurrentShardState struct {
	// ShardID is the shard that answered.
	ShardID string
	// EntityIDs are the IDs of the entity actors alive, sorted.
	EntityIDs []string
}

// SetActiveEntityLimit sets a shard's active-entity limit at run time
// (Akka's per-shard share of ShardRegion.SetActiveEntityLimit): the region
// sends each of its shards its share of the region's limit. The shard
// applies it at once, passivating the entities its replacement policy
// chooses beyond the new limit. Limit 0 means no limit; a negative Limit is
// dropped. Ignored while the shard hands off, and when automatic
// passivation is off (Settings.RememberEntities).
type SetActiveEntityLimit struct {
	// Limit is the shard's new limit on active entities; 0: none.
	Limit int
}

// GetPassivationState asks a shard how it passivates automatically; the
// answer is a *PassivationState. For tests and diagnostics. Answered in
// every state.
type GetPassivationState struct{}

// PassivationState answers GetPassivationState.
type PassivationState struct {
	// ShardID is the shard that answered.
	ShardID string
	// Limit is the active-entity limit in force; 0: none (also when
	// automatic passivation is off).
	Limit int
	// IdleTimeout is the idle timeout in force; 0: idle passivation is off.
	IdleTimeout time.Duration
	// Active are the active entities in the order the replacement policy
	// would passivate them, the next to go first; for the
	// least-recently-used policy that is the most recently used last.
	// Entities already chosen for passivation are not in it. Empty when
	// automatic passivation is off.
	Active []string
}

// EntityRoutes lets a region send to its shard's running entities straight
// from the sender's goroutine, one mailbox hop instead of three (region,
// shard, entity). The shard opens an entity once it runs and has had every
// message that waited for it, and closes it before anything that stops it
// (passivation, hand-off, the shard's own stop): what a region sends it
// afterwards goes through the region and the shard again, which hold it
// for the entity's next incarnation as before.
//
// Routes are a cache of the entities in use: the shard opens an entity
// when a message reaches it through the shard while it runs (not for the
// message that starts it, so an entity used once costs no route), and its
// idle check closes the routes no message used since the check before.
// Automatic passivation needs to know which entities are used: TakeUsed
// tells the idle check what reached an entity directly. With an
// active-entity limit, whose replacement policy orders entities by each
// use, the shard opens none.
type EntityRoutes interface {
	// Open lets messages for entity id go straight to pid's mailbox; a
	// route already open to pid stays as it is.
	Open(id string, pid *actor.PID)
	// Close stops that. It returns once no direct send to id is under
	// way, so what the shard sends the entity next (its stop message)
	// comes after every message sent to it directly.
	Close(id string)
	// TakeUsed reports whether a message reached id directly since the
	// last call.
	TakeUsed(id string) bool
}

// Pending marks one message on its way to an entity through the region's
// and the shard's mailboxes. While any message of a shard is pending, the
// region sends none of that shard's messages directly, so no message
// overtakes one of the same sender still on the slow way. Release ends the
// mark, once: when the message is in its entity's mailbox, forwarded to
// another node, or dropped. A nil Pending marks nothing.
type Pending struct {
	count *atomic.Int64
	done  atomic.Bool
}

// NewPending marks one message of the shard whose pending messages count
// counts.
func NewPending(count *atomic.Int64) *Pending {
	count.Add(1)
	return &Pending{count: count}
}

// Release ends the mark; later calls do nothing.
func (p *Pending) Release() {
	if p != nil && p.done.CompareAndSwap(false, true) {
		p.count.Add(-1)
	}
}

// Tell sends msg to pid as if from sender, with header: the receiver sees
// both (ctx.Sender, ctx.MessageHeader). Either may be nil; with neither,
// no envelope is allocated.
func Tell(ctx actor.SenderContext, pid *actor.PID, msg any, sender *actor.PID, header map[string]string) {
	switch {
	case header != nil:
		ctx.Send(pid, &actor.MessageEnvelope{Header: header, Message: msg, Sender: sender})
	case sender != nil:
		ctx.RequestWithCustomSender(pid, msg, sender)
	default:
		ctx.Send(pid, msg)
	}
}

// HeaderOf is a copy of h, the header of the message being processed, to
// keep with the message as it waits; nil if h is empty (the usual case,
// which costs nothing).
func HeaderOf(h actor.ReadonlyMessageHeader) map[string]string {
	if h == nil || h.Length() == 0 {
		return nil
	}
	return h.ToMap()
}
