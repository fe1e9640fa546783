// Package consulstore keeps the durable state of Cluster Sharding in
// Consul KV, so that it survives the nodes and a full restart of the
// cluster: the coordinator's state (StateStore, a
// coordinatoractor.StateStore) and the remembered entities of the shards
// (RememberEntitiesStore, a shardactor.RememberEntitiesStore), and the
// durable producer queue of reliable delivery (DurableProducerQueue, a
// delivery.DurableProducerQueue).
//
// It is a package of its own so that users whose nodes all run in one
// process, with the in-memory stores of coordinatoractor and shardactor,
// do not link the Consul client.
//
// The keys of sharding live under protoshard/sharding/<type name>/: the
// coordinator's state at StateKey, the remembered entities under
// RememberEntitiesPrefix; a durable producer queue lives under
// DurableProducerQueuePrefix, protoshard/delivery/<type name>/<producer>/.
// The layout is a stored format; the CLI (cmd/protoshard) reads it too.
package consulstore
