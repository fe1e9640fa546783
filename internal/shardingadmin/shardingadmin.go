// Package shardingadmin is what the admin tools (package management, the
// commands, tests) reach of a node's sharding beyond actorsharding's API:
// the actor names of regions and coordinators, and the regions started.
package shardingadmin

import "github.com/asynkron/protoactor-go/actor"

// RegionName is the actor name of the region (or proxy) of typeName.
func RegionName(typeName string) string { return "sharding/" + typeName }

// CoordinatorManagerName is the actor name of the singleton manager that
// runs typeName's coordinator.
func CoordinatorManagerName(typeName string) string { return "sharding/" + typeName + "Coordinator" }

// Region is a region (or proxy) started on an actor system.
type Region struct {
	TypeName string
	PID      *actor.PID
	Proxy    bool   // it hosts no shards
	Role     string // the role whose members host the type's shards and coordinator
}

// Regions lists the regions and proxies started on system, by type name
// (none for a system without actorsharding's Sharding). actorsharding,
// which keeps them, sets it when it is linked in; it does not import this
// package's users, so it cannot hand them the list otherwise without an
// exported accessor.
var Regions = func(*actor.ActorSystem) []Region { return nil }
