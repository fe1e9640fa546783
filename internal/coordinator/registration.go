package coordinator

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
)

// registrant is a Register or RegisterProxy that passed its checks.
type registrant struct {
	what      string // "Register" or "RegisterProxy"
	pid       *actor.PID
	member    string
	extractor ExtractorIdentity
	hosted    []string // Register: the shards the region hosts
	proxy     bool
}

// key names the registrant's acknowledgement, so that a repeated
// registration waits for its write once.
func (r registrant) key() string {
	return r.what + "\x00" + RegionKey(r.pid) + "\x00" + r.member
}

// registrantOf validates a *messages.Register or *messages.RegisterProxy
// against the live members (see checkRegistration, extractorIdentity).
func registrantOf(msg any, members map[string]membership.Member) (registrant, error) {
	var r registrant
	var name string
	var shards uint32
	switch m := msg.(type) {
	case *messages.Register:
		r = registrant{what: "Register", pid: m.GetShardRegion(), member: m.GetMemberId(), hosted: m.GetShards()}
		name, shards = m.GetExtractor(), m.GetNumberOfShards()
	case *messages.RegisterProxy:
		r = registrant{what: "RegisterProxy", pid: m.GetShardRegionProxy(), member: m.GetMemberId(), proxy: true}
		name, shards = m.GetExtractor(), m.GetNumberOfShards()
	default:
		return registrant{}, invalid("%T is no registration", msg)
	}
	if err := checkRegistration(r.what, r.pid, r.member, r.hosted, members); err != nil {
		return registrant{}, err
	}
	extractor, err := extractorIdentity(r.what, r.pid, name, shards)
	if err != nil {
		return registrant{}, err
	}
	r.extractor = extractor
	return r, nil
}

// registrationPlan is what the coordinator does with a registrant, as
// planRegistration decides on its state.
type registrationPlan struct {
	// replace: the PID is registered by another member incarnation, gone
	// now; it is terminated first.
	replace *actor.PID
	// refuse: the registrant's extractor differs from the registered
	// regions' (see extractorDisagreement); it is answered RegisterRefused
	// with this reason, and nothing else happens.
	refuse string
	// event registers the registrant (or records the extractor of a
	// region registered without one); nil when it is registered already.
	event Event
	// record: event records the extractor of a region registered already
	// (whose registration is acknowledged whether or not it applies).
	record bool
	// disagreement: the extractor recorded for a region registered
	// already disagrees with the other regions'; logged, not refused (its
	// entities run already).
	disagreement string
}

// planRegistration decides on r's registration in st.
func planRegistration(st *State, r registrant) registrationPlan {
	var p registrationPlan
	key := RegionKey(r.pid)
	var old RegionEntry
	var known bool
	if r.proxy {
		old, known = st.Proxies[key]
	} else {
		old, known = st.Regions[key]
	}
	if known && old.MemberID != r.member {
		// Same PID, new incarnation: the old one is gone.
		p.replace, known = old.PID, false
	}
	switch {
	case !known:
		// A proxy with another extractor would ask for shards that are
		// not the regions'; the regions would drop what it sends them.
		if why := extractorDisagreement(*st, key, r.extractor); why != "" {
			return registrationPlan{replace: p.replace, refuse: why}
		}
		if r.proxy {
			p.event = ShardRegionProxyRegistered{Proxy: r.pid, MemberID: r.member}
		} else {
			p.event = ShardRegionRegistered{Region: r.pid, MemberID: r.member, Extractor: r.extractor}
		}
	case !r.proxy && !old.Extractor.Known() && r.extractor.Known():
		// A region registered with a coordinator of an older version:
		// its extractor is recorded, so that the regions that register
		// later are checked against it.
		p.disagreement = extractorDisagreement(*st, key, r.extractor)
		p.event = ShardRegionRegistered{Region: r.pid, MemberID: r.member, Extractor: r.extractor}
		p.record = true
	}
	return p
}

// String describes the plan, for tests and logs.
func (p registrationPlan) String() string {
	s := ""
	if p.replace != nil {
		s += "replace " + RegionKey(p.replace) + "; "
	}
	switch {
	case p.refuse != "":
		s += "refuse"
	case p.record:
		s += "record " + p.event.String()
	case p.event != nil:
		s += p.event.String()
	default:
		s += "registered already"
	}
	if p.disagreement != "" {
		s += "; disagrees"
	}
	return s
}

// registrationMember is the member a Register or RegisterProxy names.
func registrationMember(msg any) string {
	switch m := msg.(type) {
	case *messages.Register:
		return m.GetMemberId()
	case *messages.RegisterProxy:
		return m.GetMemberId()
	}
	return ""
}

// earlyRegistrationWait bounds how long the coordinator holds a
// registration for its member to show up: each node learns the
// membership on its own, so a node that joins may register before its
// MemberUp reaches the coordinator's node, by a moment in-process and by
// a Consul query's round trip with Consul. A region registers again every
// retry interval meanwhile; its latest registration takes the place of
// the one held.
const earlyRegistrationWait = 30 * time.Second

// earlyFate is what becomes of a registration held for its member.
type earlyFate int

const (
	// earlyWaits: its member is neither live nor removed yet.
	earlyWaits earlyFate = iota
	// earlyReady: its member is live; it is handled now.
	earlyReady
	// earlyDropped: its member was removed, or it waited too long; it is
	// dropped with a dead-letter event (its region, if it still runs,
	// registers again at its next retry).
	earlyDropped
)

// fateOf decides on e, a registration held since e.at for its member to
// show up live, at now; the reason comes with earlyDropped.
func fateOf(e stashed, isLive, removed func(member string) bool, now time.Time, wait time.Duration) (earlyFate, string) {
	member := registrationMember(e.message)
	switch {
	case isLive(member):
		return earlyReady, ""
	case removed(member):
		return earlyDropped, fmt.Sprintf("%T from member %s, which was removed before the coordinator saw it live", e.message, member)
	case now.Sub(e.at) >= wait:
		return earlyDropped, fmt.Sprintf("%T from member %s, which the coordinator has not seen live in %s", e.message, member, wait)
	}
	return earlyWaits, ""
}
