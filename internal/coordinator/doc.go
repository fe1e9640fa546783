// Package coordinator is Akka's ShardCoordinator actor for proto.actor: the
// cluster singleton (one per entity type) that decides where every shard
// lives, and its supervisor; its Settings, its State changed by events
// (state.go) and the state's wire form (encoding.go). The allocation
// strategies and the StateStore the encoded state survives the
// coordinator's node in are in package coordinatoractor; actorsharding
// starts the coordinator.
package coordinator
