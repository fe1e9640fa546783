package coordinator

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/internal/wire"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
)

// The coordinator's decisions, as pure functions of its state and the
// message: the actor only moves messages and applies what they say.

// ErrInvalidMessage is wrapped by the reasons the coordinator gives when it
// rejects a protocol message at its boundary (with a dead-letter event).
var ErrInvalidMessage = errors.New("invalid coordinator message")

// errMemberNotLive: a registration names a member that the coordinator
// does not see live; one that joins may register before its MemberUp
// reaches the coordinator's node (see holdEarly).
var errMemberNotLive = errors.New("not a live member")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrInvalidMessage)
}

// checkRegionPID: a region or proxy PID the state can store.
func checkRegionPID(what string, pid *actor.PID) error {
	switch {
	case pid == nil:
		return invalid("%s without a PID", what)
	case pid.GetId() == "":
		return invalid("%s PID at %q has an empty id", what, pid.GetAddress())
	case pid.GetAddress() == "" || pid.GetAddress() == "nonhost":
		return invalid("%s PID %q has no remote address", what, pid.GetId())
	}
	return nil
}

// checkRegistration validates a Register or RegisterProxy from region on
// member memberID against the coordinator's live members (by member ID):
// the member must be live, and the region must run on its address.
func checkRegistration(what string, region *actor.PID, memberID string, shards []string, members map[string]membership.Member) error {
	if err := checkRegionPID(what, region); err != nil {
		return err
	}
	if memberID == "" {
		return invalid("%s of %s without a member id", what, RegionKey(region))
	}
	for _, s := range shards {
		if err := wire.CheckShardID(s); err != nil {
			return invalid("%s of %s lists a bad shard: %v", what, RegionKey(region), err)
		}
	}
	m, live := members[memberID]
	if !live {
		return fmt.Errorf("%s of %s from member %s, which is %w: %w", what, RegionKey(region), memberID, errMemberNotLive, ErrInvalidMessage)
	}
	if m.Address != region.GetAddress() {
		return invalid("%s of %s from member %s, which runs at %s", what, RegionKey(region), memberID, m.Address)
	}
	return nil
}

// extractorIdentity validates the extractor a Register or RegisterProxy of
// region names.
func extractorIdentity(what string, region *actor.PID, name string, numberOfShards uint32) (ExtractorIdentity, error) {
	switch {
	case len(name) > wire.MaxExtractorNameLength:
		return ExtractorIdentity{}, invalid("%s of %s names an extractor of %d bytes, longer than the limit of %d",
			what, RegionKey(region), len(name), wire.MaxExtractorNameLength)
	case numberOfShards > math.MaxInt32:
		return ExtractorIdentity{}, invalid("%s of %s names an extractor with %d shards", what, RegionKey(region), numberOfShards)
	case name == "":
		return ExtractorIdentity{}, nil // an older version: unknown
	}
	return ExtractorIdentity{Name: name, NumberOfShards: int(numberOfShards)}, nil
}

// extractorDisagreement decides whether the region (or proxy) key, whose
// extractor is id, may register next to the regions of st: its extractor
// must be compatible with that of every other registered region. Regions
// of members that are gone count until they are terminated, since their
// shards are still allocated to them. It returns "" when id may register,
// else the reason it may not, naming the regions that disagree.
func extractorDisagreement(st State, key string, id ExtractorIdentity) string {
	if !id.Known() {
		return ""
	}
	theirs := map[ExtractorIdentity][]string{}
	for k, r := range st.Regions {
		if k != key && !id.Compatible(r.Extractor) {
			theirs[r.Extractor] = append(theirs[r.Extractor], r.PID.GetAddress())
		}
	}
	if len(theirs) == 0 {
		return ""
	}
	var parts []string
	for _, other := range slices.SortedFunc(maps.Keys(theirs), func(a, b ExtractorIdentity) int { return strings.Compare(a.String(), b.String()) }) {
		parts = append(parts, fmt.Sprintf("%s at %s", other, listSome(theirs[other], 5)))
	}
	return fmt.Sprintf("its extractor is %s, the registered regions have %s (to change the number of shards or the extractor, "+
		"use a new entity type name or restart every node)", id, strings.Join(parts, "; "))
}

// listSome lists the first n of items, sorted, and how many more there are.
func listSome(items []string, n int) string {
	items = slices.Sorted(slices.Values(items))
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

// checkShard validates a shard ID a message names.
func checkShard(what, shard string) error {
	if err := wire.CheckShardID(shard); err != nil {
		return invalid("%s: %v", what, err)
	}
	return nil
}

// checkFromRegion validates a message that a region sends about itself
// (GracefulShutdownReq, RegionStopped): it names a registered region, and
// the region is its sender.
func checkFromRegion(what string, named, sender *actor.PID, st State) error {
	if err := checkRegionPID(what, named); err != nil {
		return err
	}
	if sender == nil || RegionKey(sender) != RegionKey(named) {
		return invalid("%s for %s sent by %v, not by the region itself", what, RegionKey(named), sender)
	}
	if !st.IsRegion(named) {
		return fmt.Errorf("%s for %s: %w", what, RegionKey(named), errUnknownRegion)
	}
	return nil
}

// errUnknownRegion: a region's message about itself arrived after it was
// unregistered (it stopped, or its last request crossed its RegionStopped);
// as in Akka, there is nothing to do, and it is only logged at debug level.
var errUnknownRegion = errors.New("not a registered region")

// adoption is one step of adopting what a registering region hosts.
type adoption struct {
	shard string
	// from is the region the state allocates the shard to, if another
	// one ("": the shard is unallocated).
	from string
}

// adoptions lists what the coordinator must change in st so that the
// shards region hosts (as its first Register to this coordinator says)
// are allocated to it. A shard the state lacks is allocated to it; one the
// state puts elsewhere is moved to it: a region that hosts a shard is the
// only certain fact (the state may be older than it: a store wiped or
// restored from a snapshot), and allocating the shard anywhere else would
// run its entities twice. Shards being handed off are left alone.
func adoptions(st State, region *actor.PID, hosted []string, inProgress map[string][]*actor.PID) []adoption {
	key := RegionKey(region)
	var out []adoption
	shards := slices.Clone(hosted)
	slices.Sort(shards)
	for _, shard := range slices.Compact(shards) {
		if _, busy := inProgress[shard]; busy {
			continue
		}
		cur, allocated := st.Shards[shard]
		switch {
		case !allocated:
			out = append(out, adoption{shard: shard})
		case cur != key:
			out = append(out, adoption{shard: shard, from: cur})
		}
	}
	return out
}

// removalWait is how long the coordinator must still wait before it
// reallocates the shards of member id, which is not live: a member removed
// without a graceful leave waits the down-removal margin from its removal,
// so that a member that is only cut off has noticed its own removal and
// stopped its shards; a graceful leave, or a removal this node never saw
// (before it joined), waits nothing.
func removalWait(rm membershiphook.Removal, seen bool, margin time.Duration, now time.Time) time.Duration {
	if !seen || rm.Graceful || margin <= 0 {
		return 0
	}
	return max(rm.At.Add(margin).Sub(now), 0)
}

// unregisteredMembers lists the live members with role whose region (or
// proxy) has not registered with this coordinator. Until they have, the
// coordinator does not allocate shards the state does not place: such a
// member may host them already (the state was wiped or is older than its
// regions) and will say so when it registers.
func unregisteredMembers(members map[string]membership.Member, role string, registered map[string]bool) []string {
	var out []string
	for id, m := range members {
		if m.Status == membership.Up && m.HasRole(role) && !registered[id] {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// termination is what the coordinator does on a watched actor's
// Terminated.
type termination int

const (
	terminationIgnored termination = iota // neither a region nor a proxy
	// terminationConnectionLost: only the connection dropped; the node may
	// still run the region's entities (a partition, a pause). Its shards
	// move when membership removes the member (MemberRemoved), as Akka
	// waits for downing; moving them now could run an entity twice.
	terminationConnectionLost
	terminationRegion
	terminationProxy
)

// terminationOf decides what msg, a Terminated, ends in st.
func terminationOf(st *State, msg *actor.Terminated) termination {
	switch {
	case msg.Why == actor.TerminatedReason_AddressTerminated:
		return terminationConnectionLost
	case st.IsRegion(msg.Who):
		return terminationRegion
	case st.IsProxy(msg.Who):
		return terminationProxy
	}
	return terminationIgnored
}

// statsTimeout is how long a GetClusterShardingStats waits for the
// regions: the request's timeout, or def when it names none.
func statsTimeout(msg *messages.GetClusterShardingStats, def time.Duration) time.Duration {
	if timeout := time.Duration(msg.GetTimeoutMillis()) * time.Millisecond; timeout > 0 {
		return timeout
	}
	return def
}
