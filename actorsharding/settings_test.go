package actorsharding_test

import (
	"strings"
	"testing"
	"time"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/testkit"
)

// role: StartRegion on a member without the role starts a proxy (Akka):
// it routes to the entities on the members with the role, hosting none.
func TestRegionsOnlyOnMembersWithTheRole(t *testing.T) {
	w := newLocalWorld(t, actorsharding.WithRole("hosts"))
	w.nodeOpts = []testkit.NodeOption{testkit.WithRoles("hosts")}
	host := w.startNode(false)
	w.nodeOpts = nil
	other := w.startNode(false) // StartRegion, but without the role
	w.cluster.WaitConverged(t, 30*time.Second)
	w.waitRegistered(1)
	for _, id := range entityIDs(30) {
		if p := askEventually(t, other, w.region(other), id, 1); p.Node != host.Address() {
			t.Fatalf("entity %s runs on %s, which lacks the role", id, p.Node)
		}
	}
	if st := regionStats(t, other, w.region(other)); len(st.Stats) != 0 {
		t.Fatalf("the member without the role hosts shards: %v", st.Stats)
	}
}

// buffer-size: messages for shards whose home is unknown are buffered up
// to BufferSize; beyond it each is dropped with "Buffer is full", and the
// buffered ones arrive once a home is known.
func TestBufferSize(t *testing.T) {
	// With min-nr-of-members 2 and one node nothing is allocated, so every
	// message waits in the buffer.
	w := newLocalWorld(t, actorsharding.WithBufferSize(5), actorsharding.WithMinNrOfMembers(2))
	a := w.startNode(false)
	w.waitRegistered(1)
	for seq := int64(1); seq <= 8; seq++ {
		a.System.Root.Send(w.region(a), pingMsg("buffered", seq))
	}
	testkit.WaitFor(t, 20*time.Second, func() bool {
		full := 0
		for _, d := range w.dropped() {
			if isPing(d.Message) && strings.Contains(d.Reason, "Buffer is full") {
				full++
			}
		}
		return full == 3
	}, "want 3 drops with \"Buffer is full\", got %v", testkit.Lazy(func() any { return w.dropped() }))
	w.startNode(false)
	testkit.WaitFor(t, 30*time.Second, func() bool { return len(w.received.get("buffered")) == 5 },
		"the 5 buffered messages did not arrive: %v", testkit.Lazy(func() any { return w.received.get("buffered") }))
	if got := w.received.get("buffered"); got[0] != 1 || got[4] != 5 {
		t.Fatalf("received %v, want 1..5", got)
	}
}
