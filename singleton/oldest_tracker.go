package singleton

import "github.com/protoshard/protoshard/membership"

// oldestTracker follows the members with a role and tells when the oldest
// Up one changes. Pure: the OldestChangedBuffer feeds it events.
type oldestTracker struct {
	role    string
	self    membership.Member
	members map[string]membership.Member
	oldest  *membership.Member
}

func newOldestTracker(role string, state *membership.CurrentClusterState) *oldestTracker {
	t := &oldestTracker{role: role, self: state.Self, members: map[string]membership.Member{}}
	for _, m := range state.Members {
		if m.HasRole(role) {
			t.members[m.ID] = m
		}
	}
	t.oldest = t.compute()
	return t
}

// safeToBeOldest is false while a member with the role is leaving: it may
// still run the singleton and will hand it over.
func (t *oldestTracker) safeToBeOldest() bool {
	for _, m := range t.members {
		if m.Status == membership.Leaving {
			return false
		}
	}
	return true
}

func (t *oldestTracker) compute() *membership.Member {
	list := make([]membership.Member, 0, len(t.members))
	for _, m := range t.members {
		list = append(list, m)
	}
	if o, ok := membership.Oldest(list, t.role); ok {
		return &o
	}
	return nil
}

// apply updates the members with a membership event (or selfExiting) and
// reports whether the oldest changed.
func (t *oldestTracker) apply(event any) (changed bool) {
	switch e := event.(type) {
	case membership.MemberUp:
		if e.Member.HasRole(t.role) {
			t.members[e.Member.ID] = e.Member
		}
	case membership.MemberLeft:
		if _, ok := t.members[e.Member.ID]; ok {
			t.members[e.Member.ID] = e.Member
		}
	case membership.MemberRemoved:
		delete(t.members, e.Member.ID)
	case selfExiting:
		if m, ok := t.members[t.self.ID]; ok {
			m.Status = membership.Leaving
			t.members[t.self.ID] = m
		}
	default:
		return false
	}
	next := t.compute()
	if sameMember(next, t.oldest) {
		return false
	}
	t.oldest = next
	return true
}

func sameMember(a, b *membership.Member) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.ID == b.ID
}
