package readme

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/actorsharding/consulstore"
	"github.com/protoshard/protoshard/examples/sharding/counterpb"
	"github.com/protoshard/protoshard/membership/consul"
)

// counter is an entity that counts its Increments and passivates when idle.
type counter struct{ count int64 }

func (c *counter) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		ctx.SetReceiveTimeout(2 * time.Minute)
	case *counterpb.Increment:
		c.count++
		ctx.Respond(&counterpb.Counted{EntityId: msg.GetEntityId(), Count: c.count})
	case *actor.ReceiveTimeout:
		// Stop when idle, keeping what arrives meanwhile.
		if err := actorsharding.Passivate(ctx, nil); err != nil {
			ctx.Logger().Warn("counter: cannot passivate", "err", err)
		}
	}
}

// consulNode is a node of the cluster "bank" across processes: it joins
// through Consul and keeps the coordinator's state in Consul KV.
func consulNode(ctx context.Context, system *actor.ActorSystem, host string, port int) (*actorsharding.Sharding, actorsharding.Option, error) {
	// Package membership/consul; honours CONSUL_HTTP_ADDR and CONSUL_HTTP_TOKEN.
	// The service name is the cluster's name: it scopes its keys in Consul.
	provider, err := consul.New(consul.WithServiceName("bank"))
	if err != nil {
		return nil, nil, err
	}
	sharding, err := actorsharding.Join(ctx, system,
		actorsharding.WithAddress(host, port), actorsharding.WithMembership(provider))
	if err != nil {
		return nil, nil, err
	}
	// Package actorsharding/consulstore: check-and-set writes to Consul KV,
	// under the cluster's name (see "Keys in Consul" in docs/operations.md).
	client, err := api.NewClient(api.DefaultConfig())
	if err != nil {
		return nil, nil, errors.Join(err, sharding.Leave(ctx))
	}
	store := actorsharding.WithStateStore(consulstore.NewStateStore(client, sharding.Cluster().Name(), "Counter"))
	return sharding, store, nil
}

// countTwice starts the node's Counter region and counts for c-42 twice.
func countTwice(ctx context.Context, sharding *actorsharding.Sharding, store actorsharding.Option) (int64, error) {
	props := actor.PropsFromProducer(func() actor.Actor { return &counter{} })
	region, err := sharding.StartRegion("Counter", props, actorsharding.NewHashCodeMessageExtractor(100), store)
	if err != nil {
		return 0, err
	}
	// A proto message with an `entity_id` field may also go to the region's
	// PID; the entity's ctx.Respond reaches the caller.
	system := sharding.System()
	if _, err := system.Root.RequestFuture(region, &counterpb.Increment{EntityId: "c-42"}, 5*time.Second).Result(); err != nil {
		return 0, err
	}
	// Or through an EntityRef, whose errors say why a message was dropped.
	ref, err := sharding.EntityRefFor("Counter", "c-42")
	if err != nil {
		return 0, err
	}
	counted, err := actorsharding.Ask[*counterpb.Counted](ctx, ref, &counterpb.Increment{EntityId: "c-42"})
	if err != nil {
		return 0, err
	}
	return counted.GetCount(), nil
}

// startSender is a node that only sends: a proxy routes but hosts nothing.
// It takes the store too: as the oldest member it may run the coordinator.
func startSender(sharding *actorsharding.Sharding, store actorsharding.Option) (*actor.PID, error) {
	return sharding.StartProxy("Counter", actorsharding.NewHashCodeMessageExtractor(100), store)
}
