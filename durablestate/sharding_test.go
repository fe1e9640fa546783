package durablestate_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/durablestate"
	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/internal/raceflag"
	"github.com/protoshard/protoshard/internal/testsupport"
	"github.com/protoshard/protoshard/singleton"
	"github.com/protoshard/protoshard/testkit"
)

// The entity's node is paused; the others remove it and the entity starts
// on another node, while its first incarnation still runs on the paused
// one (a paused node's actors run on here). A message the first
// incarnation handles then, as one that waited in its mailbox through the
// pause, cannot overwrite the balance the second one saved: its save is
// refused with ErrFenced, and it stops.
func TestIncarnationOnAPausedNodeIsFenced(t *testing.T) {
	if raceflag.Enabled {
		t.Skip("several proto.actor remotes in one process race on grpc's global logger; runs in the non-race pass")
	}
	backend := testsupport.NewPausableBackend(300 * time.Millisecond)
	cluster := testkit.NewCluster(t, backend)
	store := durablestate.NewMemoryStore()
	starts := make(chan recovered, 16)
	var mu sync.Mutex
	refs := map[string]actorsharding.EntityRef{}
	nodes := map[string]*testkit.Node{}
	for range 2 {
		n := cluster.StartNode()
		s, err := actorsharding.New(n.System, n.Membership)
		if err != nil {
			t.Fatal(err)
		}
		name := n.String()
		props := actor.PropsFromProducer(func() actor.Actor {
			return &incarnation{store: store, sharded: true, node: name, recovered: starts}
		})
		if _, err := s.StartRegion("Account", props, actorsharding.NewHashCodeMessageExtractor(10),
			actorsharding.WithRetryInterval(200*time.Millisecond),
			actorsharding.WithShardStartTimeout(2*time.Second),
			actorsharding.WithCoordinatorSingleton(singleton.WithHandOverRetryInterval(200*time.Millisecond)),
		); err != nil {
			t.Fatal(err)
		}
		ref, err := s.EntityRefFor("Account", "acc-1")
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		refs[name], nodes[name] = ref, n
		mu.Unlock()
	}
	cluster.WaitConverged(t, 30*time.Second)

	deposit := func(ref actorsharding.EntityRef, amount int64) (int64, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		res, err := ref.Request(ctx, wrapperspb.Int64(amount))
		b, ok := res.(*wrapperspb.Int64Value)
		return b.GetValue(), err == nil && ok
	}
	var first recovered
	testkit.WaitFor(t, 30*time.Second, func() bool {
		for _, ref := range refs {
			if _, ok := deposit(ref, 0); ok {
				return true
			}
		}
		return false
	}, "acc-1 to answer")
	first = <-starts
	if first.token != 1 {
		t.Fatalf("first incarnation's token = %d, want 1", first.token)
	}
	if b, ok := deposit(refs[first.node], 100); !ok || b != 100 {
		t.Fatalf("deposit of 100 = %d, %v", b, ok)
	}

	paused := nodes[first.node]
	var other string
	for name := range nodes {
		if name != first.node {
			other = name
		}
	}
	backend.Pause(paused)
	testkit.WaitFor(t, 20*time.Second, membershiphook.Of(paused.Membership).Stale, "the paused node's membership to be stale")
	backend.RemovePaused(paused)
	testkit.WaitFor(t, 60*time.Second, func() bool { _, ok := deposit(refs[other], 5); return ok },
		"acc-1 to answer on %s", other)
	var second recovered
	select {
	case second = <-starts:
	case <-time.After(10 * time.Second):
		t.Fatal("no second incarnation reported its start")
	}
	if second.node != other || second.token <= first.token {
		t.Fatalf("second incarnation %+v, first %+v: want another node and a higher token", second, first)
	}

	res, err := paused.System.Root.RequestFuture(first.pid, wrapperspb.Int64(-100), 10*time.Second).Result()
	if err != nil {
		t.Fatalf("the first incarnation did not answer: %v", err)
	}
	if msg, ok := res.(*wrapperspb.StringValue); !ok || !strings.Contains(msg.GetValue(), durablestate.ErrFenced.Error()) {
		t.Fatalf("the first incarnation's withdrawal = %v, want it refused as fenced", res)
	}
	if b, ok := deposit(refs[other], 0); !ok || b != 105 {
		t.Fatalf("balance on %s = %d, %v; want 105", other, b, ok)
	}
}
