// Package shardactor holds what a user configures of Akka's classic Shard
// actor, the child of a ShardRegion that owns one shard and starts its
// entities on demand (actorsharding starts it):
//
//   - Settings: hand-off, automatic passivation (idle entities after
//     PassivationIdleTimeout, an active-entity limit with a replacement
//     policy), remember-entities, the shard lease.
//   - RememberEntitiesStore, where a shard with Settings.RememberEntities
//     records its running entities to start them all again wherever it
//     starts next, with MemoryRememberEntitiesStore (one process) and the
//     errors a store returns: one that wraps ErrPermanent stops the shard
//     (its region starts it again after Settings.ShardFailureBackoff);
//     others are retried. actorsharding/consulstore has the Consul KV
//     store; remembertest is the contract every store passes.
//   - LeaseName, the lease a shard holds before it starts any entity when
//     Settings.UseLease is set.
//
// An entity finds its own ID with actorsharding.EntityID and passivates
// itself with actorsharding.Passivate.
package shardactor
