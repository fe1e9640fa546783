// Package consulstore keeps the durable state of Cluster Sharding in
// Consul KV, so that it survives the nodes and a full restart of the
// cluster: the coordinator's state (StateStore, a
// coordinatoractor.StateStore) and the remembered entities of the shards
// (RememberEntitiesStore, a shardactor.RememberEntitiesStore), and the
// durable producer queue of reliable delivery (NewDurableProducerQueue, a
// delivery.DurableProducerQueue).
//
// It is a package of its own so that users whose nodes all run in one
// process, with the in-memory stores of coordinatoractor and shardactor,
// do not link the Consul client.
//
// # Keys in Consul
//
// Every key lives under the name of the cluster it belongs to
// (membership.Cluster.Name; with membership/consul the service name),
// escaped as one path segment, so that clusters sharing one Consul never
// share a key:
//
//	protoshard/<cluster>/sharding/<type>/coordinator-state      StateKey
//	protoshard/<cluster>/sharding/<type>/entities/<shard>/<n>   RememberEntitiesStore
//	protoshard/<cluster>/delivery/<type>/<producer>/...         NewDurableProducerQueue
//	protoshard/<cluster>/lease/<lease name>                     package lease/consul
//	protoshard/<cluster>/membership/leaving/<member id>         package membership/consul
//
// <shard> and <producer> are escaped as one path segment too; <type> is
// used as it is and must be a clean key path. Every constructor takes
// the cluster's name: pass sharding.Cluster().Name(). StartRegion,
// StartProxy and the delivery producer controller refuse a store or queue
// made for another cluster or entity type (actorsharding.ErrStoreMismatch).
// The layout is a stored format; the CLI (cmd/protoshard, -cluster) reads
// it too.
package consulstore
