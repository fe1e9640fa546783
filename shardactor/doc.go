// Package shardactor is Akka's classic Shard actor for proto.actor: the child
// of a ShardRegion that owns one shard. It starts entity actors on demand as
// its own children (one per entity ID), forwards messages to them with the
// original sender, passivates them on request without losing messages, and
// stops them all when the coordinator hands the shard off to another region.
//
// Remember-entities is not supported yet: an entity that stops is forgotten
// and started again by the next message for it.
//
// An entity finds its own ID from its name:
//
//	name := ctx.Self().Id[strings.LastIndexByte(ctx.Self().Id, '/')+1:]
//	id, err := shardactor.EntityID(name)
//
// and passivates itself by sending *messages.Passivate to its parent with
// ctx.Request (the shard needs the sender to know which entity asks).
package shardactor
