// Package coordinator is Akka's ShardCoordinator actor for proto.actor: the
// cluster singleton (one per entity type) that decides where every shard
// lives, and its supervisor. Its state, settings, allocation strategies and
// state store are in package coordinatoractor; actorsharding starts it.
package coordinator
