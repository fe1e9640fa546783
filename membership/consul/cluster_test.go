package consul_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/protoshard/protoshard/internal/consulagent"
	"github.com/protoshard/protoshard/membership"
)

// Three nodes join one after the other: every node sees the same three
// members, oldest first, with ages in join order and their roles and
// addresses as registered.
func TestJoinThreeNodesSameView(t *testing.T) {
	agent := consulagent.Start(t)
	logger := newTestLogger(t)
	nodes := startNodes(t, agent, logger, 3, nodeOpts{roles: []string{"shard", "frontend"}})

	eventually(t, waitDeadline, "all nodes to see the same three members", func() (bool, string) {
		return converged(nodes)
	})
	members := nodes[0].cluster.Members()
	for i, n := range nodes {
		self := n.cluster.Self()
		if members[i].ID != self.ID {
			t.Fatalf("member %d is %s, want %s (join order): %s", i, members[i].ID, self.ID, describe(members))
		}
		if members[i].Age != self.Age {
			t.Fatalf("%s: age %d in the view, %d from Register", n.name, members[i].Age, self.Age)
		}
		if members[i].Address != n.system.Address() {
			t.Fatalf("%s: address %s in the view, want %s", n.name, members[i].Address, n.system.Address())
		}
		if !slices.Equal(members[i].Roles, []string{"shard", "frontend"}) {
			t.Fatalf("%s: roles %v", n.name, members[i].Roles)
		}
		if members[i].Status != membership.Up {
			t.Fatalf("%s: status %v", n.name, members[i].Status)
		}
		if i > 0 && members[i].Age <= members[i-1].Age {
			t.Fatalf("ages not increasing in join order: %s", describe(members))
		}
	}
	oldest, ok := membership.Oldest(members, "shard")
	if !ok || oldest.ID != nodes[0].cluster.Self().ID {
		t.Fatalf("oldest is %v (%v), want node0", oldest, ok)
	}
	// The first node saw the two others come up, in age order.
	eventually(t, waitDeadline, "node0 to get MemberUp for node1 and node2", func() (bool, string) {
		ev := nodes[0].rec.snapshot()
		i := findEvent(ev, 0, isUp(nodes[1].cluster.Self().ID))
		j := findEvent(ev, 0, isUp(nodes[2].cluster.Self().ID))
		return i >= 0 && j > i, describeEvents(ev)
	})
}

// A graceful leave: the others see MemberLeft (with the same age: marking a
// member leaving must not change its age) and then MemberRemoved{Graceful}.
func TestGracefulLeave(t *testing.T) {
	agent := consulagent.Start(t)
	logger := newTestLogger(t)
	nodes := startNodes(t, agent, logger, 3, nodeOpts{})
	eventually(t, waitDeadline, "convergence", func() (bool, string) { return converged(nodes) })

	leaver := nodes[1]
	self := leaver.cluster.Self()
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	if err := leaver.cluster.Leave(ctx); err != nil {
		t.Fatalf("leave: %v", err)
	}

	for _, n := range []*node{nodes[0], nodes[2]} {
		eventually(t, waitDeadline, n.name+" to see MemberLeft then MemberRemoved{Graceful}", func() (bool, string) {
			ev := n.rec.snapshot()
			l := findEvent(ev, 0, isLeft(self.ID))
			r := findEvent(ev, 0, isRemoved(self.ID, nil))
			if l < 0 || r < 0 {
				return false, describeEvents(ev)
			}
			if r < l {
				t.Fatalf("%s: MemberRemoved before MemberLeft: %s", n.name, describeEvents(ev))
			}
			left := ev[l].(membership.MemberLeft).Member
			if left.Age != self.Age {
				t.Fatalf("%s: the leaving member's age changed from %d to %d", n.name, self.Age, left.Age)
			}
			if !ev[r].(membership.MemberRemoved).Graceful {
				t.Fatalf("%s: removal of a member that left is not graceful: %s", n.name, describeEvents(ev))
			}
			return true, ""
		})
	}
	// The leaver itself ends with its own graceful removal.
	ev := leaver.rec.snapshot()
	if findEvent(ev, 0, isRemoved(self.ID, ptr(true))) < 0 {
		t.Fatalf("leaver: no graceful MemberRemoved for itself: %s", describeEvents(ev))
	}
	if i := findEvent(ev, 0, isRemoved(self.ID, ptr(false))); i >= 0 {
		t.Fatalf("leaver: saw itself removed by failure: %s", describeEvents(ev))
	}
	rest := []*node{nodes[0], nodes[2]}
	eventually(t, waitDeadline, "the two others to agree", func() (bool, string) { return converged(rest) })
	if e := catalogEntry(t, agent.Client(), self.ID); e != nil {
		t.Fatalf("the leaver's registration is still in the catalog: %+v", e)
	}
}

// A crash (Close: no goodbye, the TTL stops being refreshed): the others see
// MemberRemoved, not graceful, once the TTL has run out.
func TestCrashViaClose(t *testing.T) {
	agent := consulagent.Start(t)
	logger := newTestLogger(t)
	nodes := startNodes(t, agent, logger, 3, nodeOpts{})
	eventually(t, waitDeadline, "convergence", func() (bool, string) { return converged(nodes) })

	crashed := nodes[2].cluster.Self()
	nodes[2].cluster.Close()

	for _, n := range nodes[:2] {
		// The TTL plus a wide margin for a loaded machine.
		eventually(t, testTTL+20*time.Second, n.name+" to see the crashed member removed", func() (bool, string) {
			ev := n.rec.snapshot()
			return findEvent(ev, 0, isRemoved(crashed.ID, ptr(false))) >= 0, describeEvents(ev)
		})
		if i := findEvent(n.rec.snapshot(), 0, isLeft(crashed.ID)); i >= 0 {
			t.Fatalf("%s: a crashed member was seen leaving", n.name)
		}
	}
	eventually(t, waitDeadline, "the survivors to agree", func() (bool, string) { return converged(nodes[:2]) })
	// Close does not deregister: the registration is still there (critical)
	// until Consul reaps it after DeregisterCriticalServiceAfter.
	if e := catalogEntry(t, agent.Client(), crashed.ID); e == nil {
		t.Fatalf("Close deregistered the member; it must look like a crash")
	}
}

// Consul restarts and loses every registration while the nodes run: each
// node sees itself removed, re-joins as a new member, and all converge to
// the same view again. Nothing panics.
func TestConsulRestartNodesRejoin(t *testing.T) {
	agent := consulagent.Start(t)
	logger := newTestLogger(t)
	nodes := startNodes(t, agent, logger, 3, nodeOpts{rejoin: true})
	eventually(t, waitDeadline, "convergence", func() (bool, string) { return converged(nodes) })
	old := map[string]bool{}
	oldIDs := make([]string, len(nodes))
	for i, n := range nodes {
		oldIDs[i] = n.cluster.Self().ID
		old[oldIDs[i]] = true
	}

	agent.Restart(t)

	for i, n := range nodes {
		eventually(t, waitDeadline, n.name+" to see itself removed", func() (bool, string) {
			ev := n.rec.snapshot()
			return findEvent(ev, 0, isRemoved(oldIDs[i], ptr(false))) >= 0, describeEvents(ev)
		})
	}
	eventually(t, waitDeadline, "all nodes to re-join as new members and agree", func() (bool, string) {
		ok, state := converged(nodes)
		if !ok {
			return false, state
		}
		for _, n := range nodes {
			if old[n.cluster.Self().ID] {
				return false, n.name + " still has its old id; " + state
			}
		}
		return true, state
	})
	// Removal is final: no old id came back after its removal.
	for _, n := range nodes {
		ev := n.rec.snapshot()
		for id := range old {
			r := findEvent(ev, 0, isRemoved(id, nil))
			if r < 0 {
				continue
			}
			if up := findEvent(ev, r+1, isUp(id)); up >= 0 {
				t.Fatalf("%s: %s came back after its removal: %s", n.name, id, describeEvents(ev))
			}
		}
	}
}

// Consul goes away for longer than the TTL and comes back (empty, as a dev
// agent does). While it is away, the nodes keep their last view (no one is
// removed because Consul is unreachable) until they fence themselves; once
// it is back they re-join and converge.
func TestConsulStoppedThenBack(t *testing.T) {
	agent := consulagent.Start(t)
	logger := newTestLogger(t)
	nodes := startNodes(t, agent, logger, 3, nodeOpts{rejoin: true})
	eventually(t, waitDeadline, "convergence", func() (bool, string) { return converged(nodes) })
	oldIDs := make([]string, len(nodes))
	for i, n := range nodes {
		oldIDs[i] = n.cluster.Self().ID
	}

	agent.Stop()

	for i, n := range nodes {
		eventually(t, waitDeadline, n.name+" to fence itself (no TTL refresh for longer than the TTL)", func() (bool, string) {
			ev := n.rec.snapshot()
			return findEvent(ev, 0, isRemoved(oldIDs[i], ptr(false))) >= 0, describeEvents(ev)
		})
		// Up to its own removal, the node removed nobody else: an unreachable
		// Consul is not an empty cluster.
		ev := n.rec.snapshot()
		selfRemoved := findEvent(ev, 0, isRemoved(oldIDs[i], nil))
		for j, id := range oldIDs {
			if j == i {
				continue
			}
			if r := findEvent(ev, 0, isRemoved(id, nil)); r >= 0 && r < selfRemoved {
				t.Fatalf("%s removed %s while Consul was unreachable: %s", n.name, id, describeEvents(ev))
			}
		}
	}
	// While Consul is down, re-joins fail (with an error, retried) and the
	// nodes have no members.
	for _, n := range nodes {
		if ms := n.cluster.Members(); len(ms) != 0 {
			t.Fatalf("%s sees members while removed and Consul is down: %s", n.name, describe(ms))
		}
	}

	agent.Restart(t)

	eventually(t, waitDeadline, "all nodes to re-join and agree", func() (bool, string) {
		ok, state := converged(nodes)
		if !ok {
			return false, state
		}
		for i, n := range nodes {
			if n.cluster.Self().ID == oldIDs[i] {
				return false, fmt.Sprintf("%s still has its old id; %s", n.name, state)
			}
		}
		return true, state
	})
}
