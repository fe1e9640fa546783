// Package consulmember is how membership/consul describes a member in
// Consul's catalog: the service meta keys of its registration and how a
// health entry reads as a membership.Member. The protoshard command reads
// the members with it too.
package consulmember

import (
	"net"
	"strconv"
	"strings"

	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/membership"
)

// Service meta keys. Consul allows letters, digits, '-' and '_' in keys.
const (
	// MetaMemberID holds the member id (also the service ID).
	MetaMemberID = "protoshard_member_id"
	// MetaRoles holds the member's roles, comma-joined.
	MetaRoles = "protoshard_roles"
	// MetaSystemID holds the member's actor system ID (Member.SystemID).
	MetaSystemID = "protoshard_system_id"
	// MetaStatus holds the member's status: StatusUp or StatusLeaving.
	MetaStatus = "protoshard_status"
)

// Values of MetaStatus.
const (
	// StatusUp marks a member that is up.
	StatusUp = "up"
	// StatusLeaving marks a member that announced a graceful leave.
	StatusLeaving = "leaving"
)

// MemberOf returns the member that a health entry of the service describes,
// as every member reads it (the age is the registration's CreateIndex, the
// status Leaving once SetLeaving ran), and false for an entry that is not a
// member registered by membership/consul. It does not look at the entry's checks:
// the members' watch asks Consul for passing instances only.
func MemberOf(e *api.ServiceEntry) (membership.Member, bool) {
	if e == nil || e.Service == nil || e.Service.ID == "" {
		return membership.Member{}, false
	}
	s := e.Service
	// Only instances this package registered are members: anything else
	// registered under the same service name is ignored.
	if s.Meta[MetaMemberID] != s.ID {
		return membership.Member{}, false
	}
	host := s.Address
	if host == "" && e.Node != nil {
		host = e.Node.Address // Consul's fallback for services without an address
	}
	if host == "" || s.Port <= 0 || s.Port > 65535 {
		return membership.Member{}, false
	}
	m := membership.Member{
		ID:       s.ID,
		Address:  net.JoinHostPort(host, strconv.Itoa(s.Port)),
		Age:      s.CreateIndex,
		Status:   membership.Up,
		SystemID: s.Meta[MetaSystemID],
	}
	if roles := s.Meta[MetaRoles]; roles != "" {
		m.Roles = strings.Split(roles, ",")
	}
	if s.Meta[MetaStatus] == StatusLeaving {
		m.Status = membership.Leaving
	}
	return m, true
}
