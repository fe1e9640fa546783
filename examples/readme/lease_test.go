package readme

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/consulagent"
)

// TestLeasedSingletonSnippet runs the README's lease blocks against a real
// Consul: the singleton starts once it holds the lease, and writes with
// the lease's fencing token.
func TestLeasedSingletonSnippet(t *testing.T) {
	ctx, system := newNode(t, 2*time.Minute)
	// The agent outlives the node, which releases the lease as it leaves.
	t.Setenv("CONSUL_HTTP_ADDR", consulagent.Start(t).Addr())
	node, err := actorsharding.Join(ctx, system)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Leave(ctx)
	tokens := make(chan uint64, 1)
	props := actor.PropsFromProducer(func() actor.Actor {
		return &fencedWriter{write: func(token uint64, value string) error {
			if value == "started" {
				tokens <- token
			}
			return nil
		}}
	})
	if _, err := startLeasedSingleton(system, node.Cluster(), props); err != nil {
		t.Fatal(err)
	}
	select {
	case token := <-tokens:
		if token == 0 {
			t.Fatal("the singleton wrote with fencing token 0")
		}
	case <-ctx.Done():
		t.Fatal("the leased singleton never wrote")
	}
}
