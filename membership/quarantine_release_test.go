package membership_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
)

// endpointActors counts the endpoint writers and watchers of system's
// remote: two per address it has an endpoint to.
func endpointActors(system *actor.ActorSystem) int {
	n := 0
	for _, bucket := range system.ProcessRegistry.LocalPIDs.LocalPIDs {
		for id := range bucket.Items() {
			if strings.HasPrefix(id, "EndpointSupervisor/") {
				n++
			}
		}
	}
	return n
}

// A node's endpoints to members that left or crashed are released (the
// endpoint writer's queue and goroutines, its gRPC connection), and
// nothing dials them again: the node's memory does not grow with the
// members that have come and gone. (A removed member that still runs,
// paused or cut off, keeps its open endpoint until its connection ends:
// see Quarantine.)
func TestEndpointsOfRemovedMembersAreReleased(t *testing.T) {
	const peers = 6
	reg := local.NewRegistry()
	a := startQuarantinedNode(t, reg, membership.Config{})
	endpoints0 := endpointActors(a.system)
	runtime.GC()
	goroutines0 := runtime.NumGoroutine()

	var nodes []*quarantinedNode
	for range peers {
		nodes = append(nodes, startQuarantinedNode(t, reg, membership.Config{}))
	}
	waitFor(t, func() bool { return len(a.cluster.Members()) == peers+1 }, "a to see its peers")
	for i, n := range nodes {
		a.system.Root.Send(n.pid, &testpb.Ping{Seq: int64(i)})
		n.system.Root.Send(a.pid, &testpb.Ping{Seq: int64(100 + i)})
	}
	waitFor(t, func() bool {
		for i, n := range nodes {
			if !n.inbox.has(int64(i)) || !a.inbox.has(int64(100+i)) {
				return false
			}
		}
		return true
	}, "messages both ways between a and each peer")
	if got := endpointActors(a.system) - endpoints0; got != 2*peers {
		t.Fatalf("a has %d endpoint actors for its %d peers, want %d (a writer and a watcher each)", got, peers, 2*peers)
	}

	withPeers := runtime.NumGoroutine()

	// Half leave, half crash.
	var removed []membership.Member
	for i, n := range nodes {
		self := n.cluster.Self()
		removed = append(removed, self)
		if i%2 == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			if err := n.cluster.Leave(ctx); err != nil {
				t.Fatalf("peer %d leave: %v", i, err)
			}
			cancel()
			n.stopped.Do(func() {
				n.cluster.Close()
				n.remote.Shutdown(true)
				n.system.Shutdown()
			})
			continue
		}
		n.crash()
		reg.Remove(self.ID)
	}
	waitFor(t, func() bool { return len(a.cluster.Members()) == 1 }, "a to see its peers removed")
	for _, m := range removed {
		if !membership.AddressBlocked(a.q, m.Address) {
			t.Errorf("the address of the removed member %s is not blocked", m.Address)
		}
	}
	waitFor(t, func() bool { return endpointActors(a.system) == endpoints0 },
		"a's endpoints to its removed peers to end (%d endpoint actors before the peers)", endpoints0)
	released := func() error {
		runtime.GC()
		if g := runtime.NumGoroutine(); g > goroutines0+peerGoroutineSlack {
			return fmt.Errorf("%d goroutines, %d before the peers", g, goroutines0)
		}
		if e := endpointActors(a.system); e != endpoints0 {
			return fmt.Errorf("%d endpoint actors, %d before the peers", e, endpoints0)
		}
		return nil
	}
	waitFor(t, func() bool { return released() == nil }, "the peers' goroutines to end")
	t.Logf("goroutines: %d before the peers, %d with them, %d after their removal", goroutines0, withPeers, runtime.NumGoroutine())

	// What a sends the removed members now opens no endpoint again.
	for i, n := range nodes {
		a.system.Root.Send(n.pid, &testpb.Ping{Seq: int64(200 + i)})
	}
	time.Sleep(2 * time.Second) // past the quarantine's sink lifetime
	if err := released(); err != nil {
		t.Errorf("after sends to the removed members: %v", err)
	}
}

// peerGoroutineSlack is how many goroutines more than before the peers
// started may still run once they are gone: the runtime's and grpc's own
// that start on first use.
const peerGoroutineSlack = 5
