package shardactor

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Local messages of the Shard. They never cross nodes: the region and its
// shards live in the same actor system.

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
