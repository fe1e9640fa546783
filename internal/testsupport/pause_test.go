package testsupport

import (
	"testing"
	"time"

	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/internal/testwait"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/testkit"
)

// A paused node's membership goes stale after the failure detection
// timeout and hears nothing; the others remove it. On resume it hears of
// its own removal, and joins again as a new member that is not stale.
func TestPausedNodeIsRemovedAndHearsItOnResume(t *testing.T) {
	b := NewPausableBackend(200 * time.Millisecond)
	c := testkit.NewCluster(t, b)
	n1, n2 := c.StartNode(), c.StartNode()
	c.WaitConverged(t, timeout)
	p1, p2 := subscribed(n1), subscribed(n2)
	if membershiphook.Of(n1.Membership).Stale() || membershiphook.Of(n2.Membership).Stale() {
		t.Fatal("stale while confirming")
	}

	paused := n1.MemberID()
	b.Pause(n1)
	testkit.WaitFor(t, timeout, membershiphook.Of(n1.Membership).Stale, "the paused node's membership to be stale")
	if membershiphook.Of(n2.Membership).Stale() {
		t.Fatal("the other node is stale")
	}
	b.RemovePaused(n1)
	p2.Wait(t, timeout, "the others see the paused node removed", removedOf(paused))
	time.Sleep(100 * time.Millisecond) // what the paused node would hear, had it not been paused
	if p1.Index(removedOf(paused)) >= 0 {
		t.Fatal("the paused node heard of its removal before it resumed")
	}

	b.Resume(n1)
	p1.Wait(t, timeout, "the resumed node hears of its own removal", removedOf(paused))
	testkit.WaitFor(t, timeout, func() bool { return n1.MemberID() != paused && !membershiphook.Of(n1.Membership).Stale() },
		"the resumed node to join again as a new member, not stale")
	c.WaitConverged(t, timeout)
}

// A node paused shorter than it takes the others to remove it confirms
// its membership again when it resumes.
func TestPausedNodeConfirmsAgainOnResume(t *testing.T) {
	b := NewPausableBackend(200 * time.Millisecond)
	c := testkit.NewCluster(t, b)
	n := c.StartNode()
	b.Pause(n)
	testkit.WaitFor(t, timeout, membershiphook.Of(n.Membership).Stale, "the paused node's membership to be stale")
	b.Resume(n)
	if membershiphook.Of(n.Membership).Stale() {
		t.Fatal("stale after it resumed without being removed")
	}
}

const timeout = 30 * time.Second

// subscribed starts a probe on n subscribed to its membership events.
func subscribed(n *testkit.Node) *testwait.Probe {
	p := testwait.NewProbe(n.System)
	n.Membership.Subscribe(p.PID())
	return p
}

func removedOf(id string) func(any) bool {
	return func(m any) bool { e, ok := m.(membership.MemberRemoved); return ok && e.Member.ID == id }
}
