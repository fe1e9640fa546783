package actorsharding

import (
	"testing"

	"github.com/protoshard/protoshard/membership"
)

func TestNobodyToTakeOver(t *testing.T) {
	const self = "10.0.0.1:1"
	member := func(addr string, status membership.Status, roles ...string) membership.Member {
		return membership.Member{ID: "id-" + addr, Address: addr, Roles: roles, Status: status}
	}
	view := func(ms ...membership.Member) map[string]membership.Member {
		out := map[string]membership.Member{}
		for _, m := range ms {
			out[m.Address] = m
		}
		return out
	}
	tests := []struct {
		name    string
		members map[string]membership.Member
		role    string
		want    bool
	}{
		{"no view yet (self unknown)", view(), "", false},
		{"self unknown, others leaving", view(member("10.0.0.2:1", membership.Leaving)), "", false},
		{"alone", view(member(self, membership.Leaving)), "", true},
		{"another member up", view(member(self, membership.Leaving), member("10.0.0.2:1", membership.Up)), "", false},
		{"every other member leaving", view(member(self, membership.Leaving), member("10.0.0.2:1", membership.Leaving), member("10.0.0.3:1", membership.Leaving)), "", true},
		{"one of several still up", view(member(self, membership.Up), member("10.0.0.2:1", membership.Leaving), member("10.0.0.3:1", membership.Up)), "", false},
		{"the member up lacks the role", view(member(self, membership.Leaving, "shard"), member("10.0.0.2:1", membership.Up, "web")), "shard", true},
		{"a member up with the role", view(member(self, membership.Leaving, "shard"), member("10.0.0.2:1", membership.Up, "web", "shard")), "shard", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nobodyToTakeOver(tt.members, self, tt.role); got != tt.want {
				t.Errorf("nobodyToTakeOver = %v, want %v", got, tt.want)
			}
		})
	}
}
