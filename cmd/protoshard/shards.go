package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"text/tabwriter"

	"github.com/protoshard/protoshard/actorsharding/consulstore"
	"github.com/protoshard/protoshard/internal/coordinator"
)

// storedState is the coordinator state key of a type as read.
type storedState struct {
	Key         string
	Stored      bool   // the key exists
	ModifyIndex uint64 // its ModifyIndex when Stored
	State       coordinator.State
	Err         error // why the stored value does not decode
}

// typeFlag defines the -type flag, which every command about one entity
// type requires.
func typeFlag(fs *flag.FlagSet) (*string, func() error) {
	typeName := fs.String("type", "", "entity type name (required)")
	return typeName, func() error {
		if *typeName == "" {
			return errors.New("-type is required")
		}
		return nil
	}
}

func shardsFlags(fs *flag.FlagSet) action {
	typeName, validate := typeFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON (with the remembered entity IDs) instead of tables")
	return action{
		validate: validate,
		run: func(ctx context.Context, source *consulSource, t target, out io.Writer) error {
			d, err := source.read(ctx, t.cluster, *typeName)
			if err != nil {
				return err
			}
			v := buildShardView(t.cluster, *typeName, d.state, d.buckets, d.members)
			if *asJSON {
				return writeJSON(out, v)
			}
			return writeShards(out, v)
		},
	}
}

// shardView is what shards shows of one entity type; its JSON is the
// output of shards -json.
type shardView struct {
	Cluster          string       `json:"cluster"`
	Type             string       `json:"type"`
	StateKey         string       `json:"stateKey"`
	StateStored      bool         `json:"stateStored"`
	ModifyIndex      uint64       `json:"modifyIndex,omitempty"`
	RememberEntities bool         `json:"rememberEntities"`
	Regions          []regionView `json:"regions"`
	Proxies          []regionView `json:"proxies"`
	Shards           []shardRow   `json:"shards"`
	// StateError says why the stored state does not decode.
	StateError string `json:"stateError,omitempty"`
	// Problems are the remembered-entity buckets that do not decode.
	Problems []string `json:"problems,omitempty"`
}

// regionView is a registered region or proxy.
type regionView struct {
	Region       string `json:"region"` // its PID as address/id
	Member       string `json:"member"`
	MemberStatus string `json:"memberStatus"` // a memberInfo.StatusText, or "absent"
	// Service is the Consul service the member registered as; empty
	// when it is absent.
	Service string `json:"service,omitempty"`
	// LiveAtAddress describes a live member at the region's address other
	// than the region's own: a new incarnation of its node, which may run
	// the region still. Empty when there is none.
	LiveAtAddress string `json:"liveAtAddress,omitempty"`
	// Live: the region may be running, on its member or at its address.
	Live   bool `json:"live"`
	Shards int  `json:"shards"`
}

// Shard states in shardRow.
const (
	shardAllocated   = "allocated"   // the state places it on a region
	shardUnallocated = "unallocated" // to be started again (remember-entities)
	shardNotInState  = "not-in-state"
)

// shardRow is one shard: where the state places it and what it remembers.
type shardRow struct {
	Shard    string   `json:"shard"`
	State    string   `json:"state"`
	Region   string   `json:"region,omitempty"`
	Member   string   `json:"member,omitempty"`
	Entities []string `json:"rememberedEntities"`
	// Corrupt counts the buckets of the shard that could not be decoded.
	Corrupt int `json:"corruptBuckets,omitempty"`
}

// buildShardView puts the stored state, the remembered entities and the
// members together.
func buildShardView(clusterName, typeName string, st storedState, buckets []consulstore.RememberedBucket, ms []memberInfo) shardView {
	v := shardView{
		Cluster:     clusterName,
		Type:        typeName,
		StateKey:    st.Key,
		StateStored: st.Stored,
		ModifyIndex: st.ModifyIndex,
		Regions:     []regionView{},
		Proxies:     []regionView{},
		Shards:      []shardRow{},
	}
	if st.Err != nil {
		v.StateError = st.Err.Error()
	}
	rows := map[string]*shardRow{}
	if st.Stored && st.Err == nil {
		v.RememberEntities = st.State.RememberEntities
		for _, key := range slices.Sorted(maps.Keys(st.State.Regions)) {
			r := st.State.Regions[key]
			v.Regions = append(v.Regions, regionOf(key, r, ms))
			for _, shard := range r.Shards {
				rows[shard] = &shardRow{Shard: shard, State: shardAllocated, Region: key, Member: r.MemberID}
			}
		}
		for _, key := range slices.Sorted(maps.Keys(st.State.Proxies)) {
			v.Proxies = append(v.Proxies, regionOf(key, st.State.Proxies[key], ms))
		}
		for shard := range st.State.Unallocated {
			rows[shard] = &shardRow{Shard: shard, State: shardUnallocated}
		}
	}
	for _, b := range buckets {
		row := rows[b.ShardID]
		if row == nil {
			row = &shardRow{Shard: b.ShardID, State: shardNotInState}
			rows[b.ShardID] = row
		}
		if b.Err != nil {
			row.Corrupt++
			v.Problems = append(v.Problems, b.Err.Error())
			continue
		}
		row.Entities = append(row.Entities, b.EntityIDs...)
	}
	for _, shard := range slices.SortedFunc(maps.Keys(rows), compareShardIDs) {
		row := rows[shard]
		slices.Sort(row.Entities)
		// An ID is in two buckets only after the number of buckets changed
		// during a race; it is remembered once.
		row.Entities = slices.Compact(row.Entities)
		if row.Entities == nil {
			row.Entities = []string{}
		}
		v.Shards = append(v.Shards, *row)
	}
	return v
}

// status is the member's status, and a live member at the region's
// address when its own is not live.
func (r regionView) status() string {
	if r.LiveAtAddress == "" {
		return r.MemberStatus
	}
	return r.MemberStatus + "; at its address: " + r.LiveAtAddress
}

// regionOf describes the region or proxy r (registered as key) with its
// member among ms, matched by member ID (by address for a record written
// without one), and whether it may be running: its member is live, or
// another member is live at its address (a node that rejoined as a new
// member runs its regions at the same address before the state names the
// new member).
func regionOf(key string, r coordinator.RegionEntry, ms []memberInfo) regionView {
	rv := regionView{Region: key, Member: r.MemberID, MemberStatus: "absent", Shards: len(r.Shards)}
	var addr string
	if r.PID != nil {
		addr = r.PID.GetAddress()
	}
	for _, m := range ms {
		if (r.MemberID != "" && m.ID == r.MemberID) || (r.MemberID == "" && m.Address == addr) {
			rv.MemberStatus, rv.Service, rv.Live = m.StatusText(), m.Service, m.Live()
			break
		}
	}
	if rv.Live || addr == "" {
		return rv
	}
	for _, m := range ms {
		if m.Address == addr && m.Live() {
			rv.Live = true
			rv.LiveAtAddress = fmt.Sprintf("member %s of service %s, %s", m.ID, m.Service, m.StatusText())
			break
		}
	}
	return rv
}

// compareShardIDs orders numeric shard IDs by number (shard "10" after
// "9", as the default extractor numbers them) and the others as text,
// after the numbers.
func compareShardIDs(a, b string) int {
	na, errA := strconv.ParseUint(a, 10, 64)
	nb, errB := strconv.ParseUint(b, 10, 64)
	switch {
	case errA == nil && errB == nil && na != nb:
		return cmp.Compare(na, nb)
	case errA == nil && errB != nil:
		return -1
	case errA != nil && errB == nil:
		return 1
	}
	return cmp.Compare(a, b)
}

// writeShards prints the view as text: a heading, the regions and proxies,
// the shards, and the problems.
func writeShards(w io.Writer, v shardView) error {
	what := target{cluster: v.Cluster}.entityType(v.Type)
	if !v.StateStored && len(v.Shards) == 0 {
		_, err := fmt.Fprintf(w, "%s: no coordinator state (%s) and no remembered entities\n", what, v.StateKey)
		return err
	}
	switch {
	case !v.StateStored:
		fmt.Fprintf(w, "%s: no coordinator state (%s)\n", what, v.StateKey)
	case v.StateError != "":
		fmt.Fprintf(w, "%s: coordinator state %s (modify index %d) does not decode: %s\n",
			what, v.StateKey, v.ModifyIndex, oneLine(v.StateError))
	default:
		fmt.Fprintf(w, "%s: coordinator state %s (modify index %d), remember-entities %s\n",
			what, v.StateKey, v.ModifyIndex, onOff(v.RememberEntities))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(v.Regions)+len(v.Proxies) > 0 {
		fmt.Fprintln(tw, "\nREGION\tKIND\tMEMBER\tSERVICE\tSTATUS\tSHARDS")
		for _, r := range v.Regions {
			fmt.Fprintf(tw, "%s\tregion\t%s\t%s\t%s\t%d\n", r.Region, dash(r.Member), dash(r.Service), r.status(), r.Shards)
		}
		for _, p := range v.Proxies {
			fmt.Fprintf(tw, "%s\tproxy\t%s\t%s\t%s\t-\n", p.Region, dash(p.Member), dash(p.Service), p.status())
		}
	}
	if len(v.Shards) > 0 {
		fmt.Fprintln(tw, "\nSHARD\tSTATE\tREGION\tMEMBER\tREMEMBERED")
		for _, s := range v.Shards {
			remembered := strconv.Itoa(len(s.Entities))
			if s.Corrupt > 0 {
				remembered += fmt.Sprintf(" (+%d corrupt)", s.Corrupt)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Shard, s.State, dash(s.Region), dash(s.Member), remembered)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(v.Problems) > 0 {
		fmt.Fprintln(w, "\nproblems:")
		for _, p := range v.Problems {
			fmt.Fprintf(w, "  %s\n", oneLine(p))
		}
	}
	return nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
