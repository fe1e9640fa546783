package actorsharding_test

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/testkit"
)

func regionStatus(t *testing.T, n *testkit.Node, region *actor.PID) *messages.ShardRegionStatus {
	t.Helper()
	res, err := n.System.Root.RequestFuture(region, &messages.GetShardRegionStatus{}, 10*time.Second).Result()
	if err != nil {
		t.Fatalf("GetShardRegionStatus on %s: %v", n.Name, err)
	}
	st, ok := res.(*messages.ShardRegionStatus)
	if !ok {
		t.Fatalf("GetShardRegionStatus on %s: answer %T", n.Name, res)
	}
	return st
}

// A region and a proxy answer GetShardRegionStatus with their coordinator
// once registered. The member incarnation they registered as stays while
// they register again with the next coordinator (its node crashed), and
// changes once the node has joined again as a new member and registered.
func TestShardRegionStatus(t *testing.T) {
	w, backend := newPausableWorld(t, 300*time.Millisecond)
	a, b := w.startNode(false), w.startNode(true)
	w.cluster.WaitConverged(t, 30*time.Second)
	registeredWith := func(n *testkit.Node, coordinator *testkit.Node) func() bool {
		return func() bool {
			st := regionStatus(t, n, w.region(n))
			return st.GetRegisteredWithCoordinator() && st.GetCoordinator().GetAddress() == coordinator.Address() &&
				st.GetRegisteredMemberId() == n.MemberID()
		}
	}
	testkit.WaitFor(t, 30*time.Second, registeredWith(a, a), "a's region to register with the coordinator on a; status %v",
		testkit.Lazy(func() any { return regionStatus(t, a, w.region(a)) }))
	testkit.WaitFor(t, 30*time.Second, registeredWith(b, a), "b's proxy to register with the coordinator on a; status %v",
		testkit.Lazy(func() any { return regionStatus(t, b, w.region(b)) }))
	st := regionStatus(t, a, w.region(a))
	if st.GetTypeName() != typeName || st.GetProxy() || st.GetEpoch() == 0 {
		t.Errorf("a's region: %v, want type %s, not a proxy, an epoch", st, typeName)
	}
	if st := regionStatus(t, b, w.region(b)); !st.GetProxy() {
		t.Errorf("b's proxy: %v, want a proxy", st)
	}

	// b takes the coordinator over, as a proxy on a member of the role.
	first := b.MemberID()
	a.Crash()
	testkit.WaitFor(t, 30*time.Second, func() bool {
		st := regionStatus(t, b, w.region(b))
		if st.GetRegisteredMemberId() != first {
			t.Fatalf("b's proxy, between coordinators: %v, want registered member %s", st, first)
		}
		return st.GetRegisteredWithCoordinator() && st.GetCoordinator().GetAddress() == b.Address()
	}, "b's proxy to register with the coordinator on b; status %v", testkit.Lazy(func() any { return regionStatus(t, b, w.region(b)) }))

	// b is removed while paused, and joins again as a new member.
	backend.Pause(b)
	backend.RemovePaused(b)
	backend.Resume(b)
	testkit.WaitFor(t, 30*time.Second, func() bool { return b.MemberID() != first && !membershiphook.Of(b.Membership).Stale() },
		"b to join again as a new member")
	testkit.WaitFor(t, 30*time.Second, registeredWith(b, b), "b's proxy to register as %s; status %v",
		b.MemberID, testkit.Lazy(func() any { return regionStatus(t, b, w.region(b)) }))
}

// A region without a coordinator (no member has the type's role) answers
// that it is not registered, and never was.
func TestShardRegionStatusUnregistered(t *testing.T) {
	w := newLocalWorld(t)
	n := w.startNode(false, actorsharding.WithRole("nobody"))
	st := regionStatus(t, n, w.region(n))
	if st.GetRegisteredWithCoordinator() || st.GetCoordinator() != nil || st.GetRegisteredMemberId() != "" || st.GetTypeName() != typeName {
		t.Fatalf("status %v, want an unregistered %s", st, typeName)
	}
}
