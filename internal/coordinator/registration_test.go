package coordinator

import (
	"errors"
	"strings"
	"testing"

	"github.com/protoshard/protoshard/internal/wire"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
)

func TestRegistrantOf(t *testing.T) {
	members := map[string]membership.Member{"m1": rbMember(1)}
	cases := []struct {
		name string
		msg  any
		want string // the registrant's key, or part of the error
	}{
		{"a Register", &messages.Register{ShardRegion: stRegion(1), MemberId: "m1"}, "Register\x00" + RegionKey(stRegion(1)) + "\x00m1"},
		{"a RegisterProxy", &messages.RegisterProxy{ShardRegionProxy: stProxy(1), MemberId: "m1"}, "RegisterProxy\x00" + RegionKey(stProxy(1)) + "\x00m1"},
		{"a Register of a member not live", &messages.Register{ShardRegion: stRegion(1), MemberId: "m2"}, "not a live member"},
		{"a RegisterProxy with a bad extractor", &messages.RegisterProxy{ShardRegionProxy: stProxy(1), MemberId: "m1",
			Extractor: strings.Repeat("x", wire.MaxExtractorNameLength+1)}, "longer than the limit"},
		{"no registration", &messages.GetShardHome{Shard: "a"}, "no registration"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := registrantOf(tc.msg, members)
			got := r.key()
			if err != nil {
				if !errors.Is(err, ErrInvalidMessage) {
					t.Fatalf("error %v is no ErrInvalidMessage", err)
				}
				got = err.Error()
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("registrantOf = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestPlanRegistration drives registrations one by one into a state, each
// applied as the coordinator applies its plan.
func TestPlanRegistration(t *testing.T) {
	hash := ExtractorIdentity{Name: "hash-code", NumberOfShards: 100}
	other := ExtractorIdentity{Name: "hash-code", NumberOfShards: 50}
	region := func(i int, member string, id ExtractorIdentity) registrant {
		return registrant{what: "Register", pid: stRegion(i), member: member, extractor: id}
	}
	proxy := func(i int, member string, id ExtractorIdentity) registrant {
		return registrant{what: "RegisterProxy", pid: stProxy(i), member: member, extractor: id, proxy: true}
	}
	steps := []struct {
		r    registrant
		want string
	}{
		{region(1, "m1", ExtractorIdentity{}), "ShardRegionRegistered(127.0.0.1:1/region, member m1)"},
		{region(1, "m1", ExtractorIdentity{}), "registered already"},
		// An older version's region tells its extractor later: recorded.
		{region(1, "m1", hash), "record ShardRegionRegistered(127.0.0.1:1/region, member m1, " + hash.String() + ")"},
		{region(1, "m1", hash), "registered already"},
		{region(2, "m2", other), "refuse"},
		{proxy(2, "m2", other), "refuse"},
		{region(2, "m2", hash), "ShardRegionRegistered(127.0.0.2:1/region, member m2, " + hash.String() + ")"},
		// A new incarnation at the same PID replaces the old one.
		{region(2, "m2b", hash), "replace 127.0.0.2:1/region; ShardRegionRegistered(127.0.0.2:1/region, member m2b, " + hash.String() + ")"},
		{region(1, "m1b", other), "replace 127.0.0.1:1/region; refuse"},
		{proxy(3, "m3", hash), "ShardRegionProxyRegistered(127.0.0.3:1/proxy, member m3)"},
		{proxy(3, "m3", hash), "registered already"},
		{proxy(3, "m3b", ExtractorIdentity{}), "replace 127.0.0.3:1/proxy; ShardRegionProxyRegistered(127.0.0.3:1/proxy, member m3b)"},
		// A region recorded late that disagrees is recorded, and said so.
		{region(4, "m4", ExtractorIdentity{}), "ShardRegionRegistered(127.0.0.4:1/region, member m4)"},
		{region(4, "m4", other), "record ShardRegionRegistered(127.0.0.4:1/region, member m4, " + other.String() + "); disagrees"},
	}
	st := State{}
	for i, s := range steps {
		p := planRegistration(&st, s.r)
		if got := p.String(); got != s.want {
			t.Fatalf("step %d %s of %s by %s:\n got %q\nwant %q", i, s.r.what, RegionKey(s.r.pid), s.r.member, got, s.want)
		}
		apply := func(e Event) {
			if err := st.Apply(e); err != nil {
				t.Fatalf("step %d: %v: %v", i, e, err)
			}
		}
		switch {
		case p.replace != nil && s.r.proxy:
			apply(ShardRegionProxyTerminated{Proxy: p.replace})
		case p.replace != nil:
			apply(ShardRegionTerminated{Region: p.replace})
		}
		if p.event != nil {
			apply(p.event)
		}
	}
	if _, ok := st.Regions[RegionKey(stRegion(1))]; ok {
		t.Fatalf("the refused new incarnation's old region is still registered: %+v", st.Regions)
	}
}
