package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"

	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/actorsharding/consulstore"
	"github.com/protoshard/protoshard/internal/consulmember"
	"github.com/protoshard/protoshard/internal/coordinator"
)

// consulSource is the tool's only door to Consul: every read is consistent
// (the tool decides on what it read), every delete a check-and-set.
type consulSource struct {
	client *api.Client
	addr   string // as given, for error messages
}

// members returns the instances of service that describe members, with
// their health, whatever it is: critical instances are shown too (Consul
// deletes them only after DeregisterCriticalServiceAfter).
func (c *consulSource) members(ctx context.Context, service string) ([]memberInfo, error) {
	entries, _, err := c.client.Health().Service(service, "", false, c.query(ctx))
	if err != nil {
		return nil, c.wrap(fmt.Sprintf("reading the members of service %q", service), err)
	}
	out := make([]memberInfo, 0, len(entries))
	for _, e := range entries {
		m, ok := consulmember.MemberOf(e)
		if !ok {
			continue
		}
		out = append(out, memberInfo{Member: m, Health: e.Checks.AggregatedStatus(), Service: service})
	}
	return sortMembers(out), nil
}

// allMembers returns the members registered under any Consul service,
// with their health and service. A stored state's regions are judged
// against these, not against the members of -service alone: a cluster
// registered under another service than the one given (a mistyped or
// defaulted -service) is alive all the same.
func (c *consulSource) allMembers(ctx context.Context) ([]memberInfo, error) {
	services, _, err := c.client.Catalog().Services(c.query(ctx))
	if err != nil {
		return nil, c.wrap("listing the services", err)
	}
	var out []memberInfo
	for _, service := range slices.Sorted(maps.Keys(services)) {
		ms, err := c.members(ctx, service)
		if err != nil {
			return nil, err
		}
		out = append(out, ms...)
	}
	return out, nil
}

// state reads the coordinator state of typeName in the cluster
// clusterName. A value that does not decode is returned with its Err set:
// the tool shows it and can delete it.
func (c *consulSource) state(ctx context.Context, clusterName, typeName string) (storedState, error) {
	key := consulstore.StateKey(clusterName, typeName)
	pair, _, err := c.client.KV().Get(key, c.query(ctx))
	if err != nil {
		return storedState{}, c.wrap("reading "+key, err)
	}
	st := storedState{Key: key}
	if pair == nil {
		return st, nil
	}
	st.Stored, st.ModifyIndex = true, pair.ModifyIndex
	st.State, st.Err = coordinator.DecodeState(pair.Value)
	return st, nil
}

// buckets reads the remembered entities of typeName in the cluster
// clusterName.
func (c *consulSource) buckets(ctx context.Context, clusterName, typeName string) ([]consulstore.RememberedBucket, error) {
	b, err := consulstore.NewRememberEntitiesStore(c.client, clusterName, typeName).Buckets(ctx)
	if err != nil {
		return nil, c.wrap("reading the remembered entities", err)
	}
	return b, nil
}

// typeData is what Consul holds about one entity type, and the members.
type typeData struct {
	state   storedState
	buckets []consulstore.RememberedBucket
	members []memberInfo
}

// read reads the state and the remembered entities of typeName in the
// cluster clusterName, then the members of every service (allMembers).
// The state comes first: a region registered in it after the members were
// read could run on a member the tool has not seen.
func (c *consulSource) read(ctx context.Context, clusterName, typeName string) (typeData, error) {
	var d typeData
	var err error
	if d.state, err = c.state(ctx, clusterName, typeName); err != nil {
		return d, err
	}
	if d.buckets, err = c.buckets(ctx, clusterName, typeName); err != nil {
		return d, err
	}
	d.members, err = c.allMembers(ctx)
	return d, err
}

// maxTxnOps is the operations per transaction: the oldest limit of Consul
// (64; newer versions take 128), as the remember-entities store uses.
const maxTxnOps = 64

// apply sends the transactions in order and returns how many keys they
// deleted. It stops at the first that rolls back, which happens when a key
// changed since it was read: a writer of the type is at work.
func (c *consulSource) apply(ctx context.Context, txns []api.TxnOps) (deleted int, err error) {
	for _, txn := range txns {
		ok, resp, _, err := c.client.Txn().Txn(txn, c.query(ctx))
		if err != nil {
			return deleted, c.wrap(fmt.Sprintf("deleting (%d keys deleted before)", deleted), err)
		}
		if !ok {
			return deleted, fmt.Errorf("%d keys deleted, then stopped: %s changed since read (a coordinator or shard of the type is writing); nothing else was deleted",
				deleted, strings.Join(rolledBackKeys(txn, resp), ", "))
		}
		for _, op := range txn {
			if op.KV.Verb == api.KVDeleteCAS {
				deleted++
			}
		}
	}
	return deleted, nil
}

// rolledBackKeys names the keys of a rolled-back transaction that Consul
// reported, or all of them when it reported none.
func rolledBackKeys(txn api.TxnOps, resp *api.TxnResponse) []string {
	var out []string
	if resp != nil {
		for _, e := range resp.Errors {
			if e != nil && e.OpIndex >= 0 && e.OpIndex < len(txn) {
				out = append(out, txn[e.OpIndex].KV.Key)
			}
		}
	}
	if len(out) == 0 {
		for _, op := range txn {
			out = append(out, op.KV.Key)
		}
	}
	return out
}

func (c *consulSource) query(ctx context.Context) *api.QueryOptions {
	return (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx)
}

// wrap names Consul's address in err, and says "cannot reach" when the
// request never got an answer.
func (c *consulSource) wrap(what string, err error) error {
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("cannot reach Consul at %s: %s: %w", c.addr, what, err)
	}
	return fmt.Errorf("%s (Consul at %s): %w", what, c.addr, err)
}
