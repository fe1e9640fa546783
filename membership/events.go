package membership

// The events a Cluster delivers to its subscribers, in order. They are
// local messages (never sent across nodes).

// CurrentClusterState is the first message a subscriber receives: the
// members at the time of subscription, and the subscriber's own member.
type CurrentClusterState struct {
	Members []Member // every member, Up or Leaving
	Self    Member   // the subscriber's own member (zero before it joined)
}

// MemberUp is published when a member joins.
type MemberUp struct {
	Member Member // the member that joined
}

// MemberLeft is published when a member announced a graceful leave.
type MemberLeft struct {
	Member Member // the member, now with Status Leaving
}

// MemberRemoved is published when a member is gone, by leaving or by
// failure detection. It is final: the same member id never comes back.
// When Member is the cluster's own member, the node has been removed
// (downed) and must stop what it runs as a cluster member.
type MemberRemoved struct {
	Member Member // the member that is gone
	// Graceful is true when the member had announced its leave.
	Graceful bool
}

// diff compares two snapshots and returns the events that lead from prev to
// next, ignoring members in removed (they are gone for good). Members that
// appear already Leaving produce MemberUp then MemberLeft. Removals come
// first, then joins and leaves, each oldest first: a node that re-joined
// after its removal has the same address as its old incarnation, and a
// subscriber that keys anything by address must see the old one go before
// the new one comes. It is a pure function so the event logic is tested
// without a backend.
func diff(prev, next []Member, removed map[string]bool) []any {
	var events []any
	before := make(map[string]Member, len(prev))
	for _, m := range prev {
		before[m.ID] = m
	}
	after := make(map[string]bool, len(next))
	for _, m := range next {
		if !removed[m.ID] {
			after[m.ID] = true
		}
	}
	for _, m := range ByAge(prev, "", true) {
		if !after[m.ID] {
			events = append(events, MemberRemoved{Member: m, Graceful: m.Status == Leaving})
		}
	}
	for _, m := range ByAge(next, "", true) {
		if removed[m.ID] {
			continue
		}
		old, known := before[m.ID]
		if !known {
			events = append(events, MemberUp{Member: withStatus(m, Up)})
			if m.Status == Leaving {
				events = append(events, MemberLeft{Member: m})
			}
			continue
		}
		if old.Status == Up && m.Status == Leaving {
			events = append(events, MemberLeft{Member: m})
		}
	}
	return events
}

func withStatus(m Member, s Status) Member {
	m.Status = s
	return m
}
