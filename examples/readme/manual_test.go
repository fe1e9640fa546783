package readme

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/membership/local"
)

// TestManualPath: a node started the manual way of docs/sharding.md hosts entities
// and leaves.
func TestManualPath(t *testing.T) {
	ctx, system := newNode(t, time.Minute)
	node, err := startManually(ctx, system, local.NewRegistry().Provider())
	if err != nil {
		t.Fatal(err)
	}
	props := actor.PropsFromProducer(func() actor.Actor { return &greeter{} })
	if _, err := node.sharding.StartRegion("Greeter", props, actorsharding.NewHashCodeMessageExtractor(10)); err != nil {
		t.Fatal(err)
	}
	ref, err := node.sharding.EntityRefFor("Greeter", "g-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ref.Request(ctx, wrapperspb.String("Ada")); err != nil {
		t.Fatal(err)
	}
	if err := node.leave(ctx); err != nil {
		t.Fatal(err)
	}
}
