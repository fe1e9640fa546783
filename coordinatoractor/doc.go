// Package coordinatoractor holds what a user of Akka's ShardCoordinator
// names: the allocation strategies (strategy.go, allocation.go) and the
// StateStore the coordinator's encoded state survives the coordinator's
// node in (MemoryStore here, Consul KV written with check-and-set in
// actorsharding/consulstore). The coordinator actor itself, the cluster
// singleton (one per entity type) that decides where every shard lives,
// is started by actorsharding; its settings are set through actorsharding's
// options.
package coordinatoractor
