package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/actorsharding/consulstore"
)

// errLiveRegions: regions or proxies of the type run on live members.
var errLiveRegions = errors.New("regions of the type run on live members")

// errStateUndecodable: the stored state does not decode, so its regions,
// and whether they run, cannot be known.
var errStateUndecodable = errors.New("the coordinator state does not decode, so its regions are unknown")

// removeDataFlags is remove-data, Akka's RemoveInternalClusterShardingData
// for Consul: it deletes the coordinator state key of the type and every
// remembered-entity bucket of its shards.
//
// It refuses (removalRefusal) while a region or proxy registered in the
// stored state runs on a member that Consul shows as live, under any
// service: the -service given only picks the default -cluster, and a
// cluster whose members register under another service is alive all the
// same. The state records what a running coordinator has registered, and
// a coordinator writes it before it answers a region, so a type in use
// has its regions there.
//
// It is safe against a coordinator writing at the same moment: every key
// is deleted by a check-and-set on the ModifyIndex it was read at, and
// every transaction also checks the state key (deleting it by
// check-and-set in the first, checking that it is still absent in the
// later ones). A coordinator that saves its state between the reading and
// the deleting makes the transaction roll back, and remove-data stops with
// what it deleted so far. The coordinator itself writes by check-and-set
// on the index it read (consulstore.StateStore): once the key is
// deleted, a coordinator still running (with -force) fails its next save
// with ErrVersionConflict and stops, and its successor starts from the
// empty state.
func removeDataFlags(fs *flag.FlagSet) action {
	typeName, validate := typeFlag(fs)
	force := fs.Bool("force", false, "remove even while regions of the type run on live members, or when the stored state does not decode")
	dryRun := fs.Bool("dry-run", false, "list the keys that would be deleted and delete nothing")
	return action{
		validate: validate,
		run: func(ctx context.Context, source *consulSource, t target, out io.Writer) error {
			d, err := source.read(ctx, t.cluster, *typeName)
			if err != nil {
				return err
			}
			plan := newRemovalPlan(d.state, d.buckets)
			what := t.entityType(*typeName)
			refusal := removalRefusal(what, d.state, d.members)
			if refusal != nil && !*force {
				if *dryRun {
					writePlan(out, what, plan, true)
				}
				return refusal
			}
			if refusal != nil {
				fmt.Fprintf(out, "-force: %v\n", refusal)
			}
			if *dryRun || plan.empty() {
				writePlan(out, what, plan, *dryRun)
				return nil
			}
			deleted, err := source.apply(ctx, plan.transactions())
			if err != nil {
				return fmt.Errorf("removing the data of %s: %w", what, err)
			}
			fmt.Fprintf(out, "%s: deleted %d keys (%s)\n", what, deleted, plan.summary())
			return nil
		},
	}
}

// removalRefusal returns why the data of what (an entityType) must not be
// removed while the members ms are registered, or nil when it may. ms are
// the members of every service (consulSource.allMembers): a region
// counts as running when its member, or any member at its address, is
// live, whatever service it registered as.
func removalRefusal(what string, st storedState, ms []memberInfo) error {
	if st.Err != nil {
		return fmt.Errorf("refusing to remove the data of %s: %w (%s, modify index %d: %v); stop the type's nodes and use -force",
			what, errStateUndecodable, st.Key, st.ModifyIndex, st.Err)
	}
	if !st.Stored {
		return nil
	}
	var running []string
	describe := func(kind, key string, r regionView) {
		if !r.Live {
			return
		}
		service := ""
		if r.Service != "" {
			service = " of service " + r.Service
		}
		running = append(running, fmt.Sprintf("%s %s on member %s%s (%s)", kind, key, dash(r.Member), service, r.status()))
	}
	for _, key := range slices.Sorted(maps.Keys(st.State.Regions)) {
		describe("region", key, regionOf(key, st.State.Regions[key], ms))
	}
	for _, key := range slices.Sorted(maps.Keys(st.State.Proxies)) {
		describe("proxy", key, regionOf(key, st.State.Proxies[key], ms))
	}
	if len(running) == 0 {
		return nil
	}
	return fmt.Errorf("refusing to remove the data of %s: %w: %s; stop them (or wait until Consul shows their members critical or gone) or use -force",
		what, errLiveRegions, strings.Join(running, ", "))
}

// versionedKey is a key with the ModifyIndex it was read at.
type versionedKey struct {
	Key         string
	ModifyIndex uint64
}

// removalPlan is what remove-data deletes.
type removalPlan struct {
	state       versionedKey // the state key; ModifyIndex 0 when it is absent
	stateStored bool
	buckets     []versionedKey // remembered-entity buckets, in key order
	shards      int            // the shards of the buckets
}

func newRemovalPlan(st storedState, buckets []consulstore.RememberedBucket) removalPlan {
	p := removalPlan{state: versionedKey{Key: st.Key, ModifyIndex: st.ModifyIndex}, stateStored: st.Stored}
	shards := map[string]bool{}
	for _, b := range buckets {
		p.buckets = append(p.buckets, versionedKey{Key: b.Key, ModifyIndex: b.ModifyIndex})
		shards[b.ShardID] = true
	}
	p.shards = len(shards)
	return p
}

func (p removalPlan) empty() bool { return !p.stateStored && len(p.buckets) == 0 }

// keys returns the keys to delete, the state key first.
func (p removalPlan) keys() []versionedKey {
	if p.stateStored {
		return append([]versionedKey{p.state}, p.buckets...)
	}
	return p.buckets
}

// summary says what the keys are.
func (p removalPlan) summary() string {
	state := "no coordinator state"
	if p.stateStored {
		state = "the coordinator state"
	}
	return fmt.Sprintf("%s, %d remembered-entity buckets of %d shards", state, len(p.buckets), p.shards)
}

// transactions returns the Consul transactions that carry out the plan, in
// order, each of at most maxTxnOps operations. Each begins with the guard
// on the state key: in the first, a delete-cas at the index read (or a
// check that it is still absent); in the others, a check that it is still
// absent. So a coordinator that writes its state meanwhile stops the
// removal at the next transaction.
func (p removalPlan) transactions() []api.TxnOps {
	var txns []api.TxnOps
	absent := &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckNotExists, Key: p.state.Key}}
	guard := absent
	if p.stateStored {
		guard = deleteCAS(p.state)
	}
	rest := p.buckets
	for len(txns) == 0 || len(rest) > 0 {
		n := min(len(rest), maxTxnOps-1)
		txn := make(api.TxnOps, 0, n+1)
		txn = append(txn, guard)
		for _, k := range rest[:n] {
			txn = append(txn, deleteCAS(k))
		}
		txns = append(txns, txn)
		rest = rest[n:]
		guard = absent
	}
	return txns
}

func deleteCAS(k versionedKey) *api.TxnOp {
	return &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDeleteCAS, Key: k.Key, Index: k.ModifyIndex}}
}

// writePlan lists the keys of the plan (dry-run) or says there are none.
func writePlan(w io.Writer, what string, p removalPlan, dryRun bool) {
	if p.empty() {
		fmt.Fprintf(w, "%s: nothing stored, nothing to delete\n", what)
		return
	}
	verb := "deletes"
	if dryRun {
		verb = "would delete"
	}
	fmt.Fprintf(w, "%s: %s %d keys (%s):\n", what, verb, len(p.keys()), p.summary())
	for _, k := range p.keys() {
		fmt.Fprintf(w, "  %s (modify index %d)\n", k.Key, k.ModifyIndex)
	}
}
