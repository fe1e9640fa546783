package membership_test

import (
	"reflect"
	"testing"

	"github.com/protoshard/protoshard/membership"
)

func ids(ms []membership.Member) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

func TestHasRole(t *testing.T) {
	tests := []struct {
		name  string
		roles []string
		role  string
		want  bool
	}{
		{"empty role matches a member without roles", nil, "", true},
		{"empty role matches a member with roles", []string{"a"}, "", true},
		{"role present", []string{"a", "b"}, "b", true},
		{"role absent", []string{"a"}, "b", false},
		{"no roles", nil, "a", false},
		{"case sensitive", []string{"A"}, "a", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := membership.Member{ID: "m", Roles: tt.roles}
			if got := m.HasRole(tt.role); got != tt.want {
				t.Errorf("HasRole(%q) on roles %v = %v, want %v", tt.role, tt.roles, got, tt.want)
			}
		})
	}
}

func TestStatusString(t *testing.T) {
	for s, want := range map[membership.Status]string{membership.Up: "Up", membership.Leaving: "Leaving", 7: "Unknown"} {
		if got := s.String(); got != want {
			t.Errorf("Status(%d).String() = %q, want %q", int(s), got, want)
		}
	}
}

// The fixture: ages 1..4, "c" and "d" share age 2 (a provider never does
// that, but the order must still be total), "c" is Leaving.
var (
	ma = membership.Member{ID: "a", Age: 3, Roles: []string{"x"}}
	mb = membership.Member{ID: "b", Age: 1, Roles: []string{"y"}}
	mc = membership.Member{ID: "c", Age: 2, Roles: []string{"x", "y"}, Status: membership.Leaving}
	md = membership.Member{ID: "d", Age: 2, Roles: []string{"x"}}
	me = membership.Member{ID: "e", Age: 4}
)

func TestByAge(t *testing.T) {
	all := []membership.Member{ma, mb, mc, md, me}
	tests := []struct {
		name           string
		members        []membership.Member
		role           string
		includeLeaving bool
		want           []string
	}{
		{"empty input", nil, "", true, []string{}},
		{"all, with leaving, tie by id", all, "", true, []string{"b", "c", "d", "a", "e"}},
		{"all, without leaving", all, "", false, []string{"b", "d", "a", "e"}},
		{"role x with leaving", all, "x", true, []string{"c", "d", "a"}},
		{"role x without leaving", all, "x", false, []string{"d", "a"}},
		{"role y", all, "y", false, []string{"b"}},
		{"unknown role", all, "z", true, []string{}},
		{"input order does not matter", []membership.Member{me, md, mc, mb, ma}, "", true, []string{"b", "c", "d", "a", "e"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ids(membership.ByAge(tt.members, tt.role, tt.includeLeaving))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ByAge(role %q, leaving %v) = %v, want %v", tt.role, tt.includeLeaving, got, tt.want)
			}
		})
	}
}

func TestByAgeDoesNotModifyInput(t *testing.T) {
	in := []membership.Member{ma, mb, mc}
	membership.ByAge(in, "", true)
	if got := ids(in); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Errorf("input reordered to %v", got)
	}
}

func TestOldest(t *testing.T) {
	tie1 := membership.Member{ID: "m1", Age: 5}
	tie2 := membership.Member{ID: "m2", Age: 5}
	tests := []struct {
		name    string
		members []membership.Member
		role    string
		want    string // "" = none
	}{
		{"empty input", nil, "", ""},
		{"all roles", []membership.Member{ma, mb, mc, md, me}, "", "b"},
		{"role filter", []membership.Member{ma, mb, mc, md, me}, "x", "d"},
		{"leaving is not a candidate even if oldest", []membership.Member{ma, mc}, "x", "a"},
		{"only leaving members", []membership.Member{mc}, "", ""},
		{"no member with the role", []membership.Member{ma, mb}, "z", ""},
		{"tie broken by id", []membership.Member{tie2, tie1}, "", "m1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := membership.Oldest(tt.members, tt.role)
			if tt.want == "" {
				if ok {
					t.Errorf("Oldest = %s, want none", got.ID)
				}
				return
			}
			if !ok || got.ID != tt.want {
				t.Errorf("Oldest = %q (found %v), want %q", got.ID, ok, tt.want)
			}
		})
	}
}

func TestIsOlderThan(t *testing.T) {
	if !mb.IsOlderThan(ma) || ma.IsOlderThan(mb) {
		t.Error("a smaller age must be older")
	}
	if !mc.IsOlderThan(md) || md.IsOlderThan(mc) {
		t.Error("equal ages must be ordered by id")
	}
	if ma.IsOlderThan(ma) {
		t.Error("a member is not older than itself")
	}
}
