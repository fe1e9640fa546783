// Package membership tells who is in the cluster: the members with their
// roles and age, as events delivered to actors, in Akka's terms (MemberUp,
// MemberLeft, MemberRemoved).
//
// A Cluster (one per actor system) owns the view. It reads snapshots of the
// members from a Provider (membership/local in-process, membership/consul for
// a real Consul), turns the differences into events and enforces that removal
// is final: a member id once seen removed is never accepted again.
package membership

import (
	"slices"
	"sort"
)

// Status is a member's lifecycle state as seen by the cluster.
type Status int

const (
	// Up is a member that joined and is healthy.
	Up Status = iota
	// Leaving is a member that announced a graceful leave; it is still
	// reachable but is no longer a candidate for the oldest.
	Leaving
)

// String is the status's name, for logs.
func (s Status) String() string {
	switch s {
	case Up:
		return "Up"
	case Leaving:
		return "Leaving"
	default:
		return "Unknown"
	}
}

// Member is one incarnation of a node in the cluster.
type Member struct {
	// ID is unique per process start (per join): it tells incarnations apart
	// where a proto.actor PID cannot.
	ID string
	// Address is the proto.actor remote address (host:port).
	Address string
	// Roles restrict which members host what (Akka's cluster roles).
	Roles []string
	// Age is the join order: a smaller age is an older member. Every node
	// reads the same value (with Consul: the registration's CreateIndex).
	Age uint64
	// Status is Up or Leaving.
	Status Status
	// SystemID is the proto.actor actor system's ID, which its remote
	// names when it connects to another node. A removed member's system
	// is quarantined by it (see Quarantine).
	SystemID string
}

// HasRole reports whether the member has the role; the empty role matches
// every member, as in Akka.
func (m Member) HasRole(role string) bool {
	return role == "" || slices.Contains(m.Roles, role)
}

// IsOlderThan orders members by age; ties (which a correct provider never
// produces) are broken by ID so that every node still agrees.
func (m Member) IsOlderThan(o Member) bool {
	if m.Age != o.Age {
		return m.Age < o.Age
	}
	return m.ID < o.ID
}

// ByAge returns the members with the role, oldest first. Leaving members are
// kept only if includeLeaving is true.
func ByAge(members []Member, role string, includeLeaving bool) []Member {
	out := make([]Member, 0, len(members))
	for _, m := range members {
		if !m.HasRole(role) || (m.Status == Leaving && !includeLeaving) {
			continue
		}
		out = append(out, m)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].IsOlderThan(out[j]) })
	return out
}

// Oldest returns the oldest Up member with the role. Leaving members are not
// candidates: like Akka's exiting members, they are about to hand over.
func Oldest(members []Member, role string) (Member, bool) {
	sorted := ByAge(members, role, false)
	if len(sorted) == 0 {
		return Member{}, false
	}
	return sorted[0], true
}
