// Package shard is Akka's classic Shard actor for proto.actor: the child of
// a ShardRegion that owns one shard. It starts entity actors on demand as
// its own children (one per entity ID), forwards messages to them with the
// original sender, passivates them on request without losing messages, and
// stops them all when the coordinator hands the shard off to another region.
//
// Automatic passivation (passivation.go): entities idle for
// shardactor.Settings.PassivationIdleTimeout (default 120s) are passivated,
// and an active-entity limit passivates the least recently used beyond it.
//
// Remember-entities (remember.go): with shardactor.Settings.RememberEntities
// the shard records its running entities in a
// shardactor.RememberEntitiesStore (memory, or Consul KV with batched
// writes) and starts them all again wherever it starts next. A passivated
// entity is forgotten; one that stops otherwise starts again after
// shardactor.Settings.EntityRestartBackoff. Automatic passivation is off
// with it, as in Akka. A store error that wraps shardactor.ErrPermanent
// stops the shard (its region starts it again after
// shardactor.Settings.ShardFailureBackoff); other errors are retried.
//
// Lease (shard_lease.go): with shardactor.Settings.UseLease a shard starts
// no entity before it holds the lease shardactor.LeaseName(type, shard), and
// stops with all its entities when it loses it.
//
// Each entity's life (Pekko's Shard.EntityState: RememberingStart, Active,
// Passivating, WaitingForRestart...) is kept by a value type with checked
// transitions (entities.go); the actor only moves messages.
//
// An entity finds its own ID from its name:
//
//	name := ctx.Self().Id[strings.LastIndexByte(ctx.Self().Id, '/')+1:]
//	id, err := EntityID(name)
//
// and passivates itself by sending *messages.Passivate to its parent with
// ctx.Request (the shard needs the sender to know which entity asks).
package shard
