package testkit

import (
	"context"
	"testing"

	"github.com/protoshard/protoshard/internal/raceflag"
	"github.com/protoshard/protoshard/membership"
)

// The harness over a real Consul agent: the same life cycle as over the
// local registry, with a crash seen when the TTL check expires.
func TestConsulBackend(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Consul agent")
	}
	if raceflag.Enabled {
		t.Skip("multi-node test skipped under -race")
	}
	b := NewConsulBackend(t)
	c := NewCluster(t, b)
	n1 := c.StartNode()
	n2 := c.StartNode()
	n3 := c.StartNode()
	c.WaitConverged(t, timeout)
	if got := c.Oldest(""); got != n1 {
		t.Errorf("Oldest = %v, want %v", got, n1)
	}
	p3 := subscribed(n3)

	crashed := n1.MemberID()
	n1.Crash()
	_, ev := p3.Wait(t, timeout+4*b.TTL, "the crash seen after the TTL", removedOf(crashed))
	if ev.(membership.MemberRemoved).Graceful {
		t.Errorf("a crash was reported graceful: %+v", ev)
	}

	left := n2.MemberID()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := n2.Leave(ctx); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	_, ev = p3.Wait(t, timeout, "the leave seen", removedOf(left))
	if !ev.(membership.MemberRemoved).Graceful {
		t.Errorf("a graceful leave was reported as a crash: %+v", ev)
	}
	c.WaitConverged(t, timeout)
	if got := c.Oldest(""); got != n3 {
		t.Errorf("Oldest = %v, want %v", got, n3)
	}
}
