package actorsharding

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/shardingadmin"
	"github.com/protoshard/protoshard/internal/shardproto"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// RegionEntryName is regionEntryName, for the package's external tests.
var RegionEntryName = regionEntryName

// EntityIDHeader is entityIDHeader, and TakesEntityIDHeader the name
// RegionKnowsType reports once a member takes it; TakesEntityRefMessage
// and TakesSequencedMessages the same for entityRefMessage and
// SequencedMessages.
const (
	EntityIDHeader         = entityIDHeader
	TakesEntityIDHeader    = string(takesEntityIDHeader)
	TakesEntityRefMessage  = string(takesEntityRefMessage)
	TakesSequencedMessages = string(takesSequencedMessages)
)

// NewEntityRefMessage is an entityRefMessage for entity id whose message
// field holds encoded, of type ID tid.
func NewEntityRefMessage(id string, tid uint32, encoded []byte) proto.Message {
	return &entityRefMessage{id: id, tid: tid, rare: &entityRefRare{raw: encoded}}
}

// RegionKnowsType reports whether the region of typeName on system has
// heard that member memberID knows the message type name.
func RegionKnowsType(system *actor.ActorSystem, typeName, memberID, name string) bool {
	p, ok := system.ProcessRegistry.GetLocal(shardingadmin.RegionName(typeName))
	if !ok {
		return false
	}
	rp, ok := p.(*regionProcess)
	return ok && has(rp.table.types.of(memberID), protoreflect.FullName(name))
}

// RegionTypeID is the ID member memberID gave the message type name for
// EntityMessage, as the region of typeName on system heard it (0: none).
func RegionTypeID(system *actor.ActorSystem, typeName, memberID, name string) uint32 {
	p, ok := system.ProcessRegistry.GetLocal(shardingadmin.RegionName(typeName))
	if !ok {
		return 0
	}
	rp, ok := p.(*regionProcess)
	if !ok {
		return 0
	}
	return typeIDOf(rp.table.types.of(memberID), protoreflect.FullName(name))
}

// EntityRefCached reports whether ref has cached its entity's route.
func EntityRefCached(ref EntityRef) bool { return ref.cache != nil && ref.cache.route.Load() != nil }

// SendRouted hands the region actor of typeName on system msg for entity
// id as the router does once its checks passed: forwarded to member
// incarnation to ("": from a sender of this node).
func SendRouted(system *actor.ActorSystem, typeName, id string, msg any, to string) bool {
	p, ok := system.ProcessRegistry.GetLocal(shardingadmin.RegionName(typeName))
	if !ok {
		return false
	}
	rp, ok := p.(*regionProcess)
	if !ok {
		return false
	}
	shard := rp.extractor.ShardID(id)
	rp.region.SendUserMessage(nil, &routed{entityID: id, shard: shard, message: msg, to: to,
		pending: pendingMark(rp.table, shard)})
	return true
}

// DirectRoutes reports, for the router of typeName's region on system, how
// many entities take messages directly and how many shards have a home on
// another node that senders send to directly.
func DirectRoutes(system *actor.ActorSystem, typeName string) (entities, remoteHomes int) {
	p, ok := system.ProcessRegistry.GetLocal(shardingadmin.RegionName(typeName))
	if !ok {
		return 0, 0
	}
	rp, ok := p.(*regionProcess)
	if !ok {
		return 0, 0
	}
	for i := range rp.table.entities.stripes {
		if m := rp.table.entities.stripes[i].m.Load(); m != nil {
			entities += len(*m)
		}
	}
	rp.table.shards.Range(func(_, v any) bool {
		if v.(*shardRoute).remote.Load() != nil {
			remoteHomes++
		}
		return true
	})
	return entities, remoteHomes
}

func pendingMark(t *routeTable, shard string) *shardproto.Pending {
	_, p := t.markPending(shard, t.shard(shard))
	return p
}

// RouteCounts asks the region of typeName on system how many shard routes
// and entity routes its router has, and how many shard homes it knows.
func RouteCounts(system *actor.ActorSystem, typeName string) (routes, entities, homes int, err error) {
	res, err := system.Root.RequestFuture(actor.NewPID(system.Address(), shardingadmin.RegionName(typeName)), getRouteCounts{}, 10*time.Second).Result()
	if err != nil {
		return 0, 0, 0, err
	}
	c := res.(routeCounts)
	return c.routes, c.entities, c.homes, nil
}

// JavaStringHashCode is javaStringHashCode, for the package's external
// tests.
var JavaStringHashCode = javaStringHashCode
