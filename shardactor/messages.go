package shardactor

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
