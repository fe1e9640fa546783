// Package consulcas is the compare-and-set lease of package lease/caslease
// with its record in Consul KV, at
//
//	protoshard/<cluster name>/lease/<lease name>
//
// under the keys of the cluster named in NewProvider, the key lease/consul
// uses for the same lease: every node of a cluster must use the same kind
// of lease. Each refuses the other's key with an error (ErrSessionLocked
// here, lease/consul's ErrForeignKey there) rather than take it over. A renewal or an acquisition is one transaction with a
// check-and-set on the key's ModifyIndex, which Consul commits through Raft,
// so it fails whenever anybody wrote the key since it was read.
//
// Against lease/consul's session lease: a holder that dies is taken over
// about Duration × (1 + ρ) + SafetyMargin after its last renewal (6.05 s
// with the defaults), where a session lease waits its TTL (at least 10 s),
// up to twice that as Consul expires sessions late, and then its lock
// delay. Both leases keep the same guarantee (the holder declares the loss
// before anybody can take over) and the same fencing rule (tokens grow with
// every holder), on different grounds: the session lease on Consul's timers
// and lock delay, this one on bounded clock drift between the holder's and
// the contender's monotonic clocks (see caslease).
package consulcas

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/internal/consulkey"
	"github.com/protoshard/protoshard/internal/option"
	"github.com/protoshard/protoshard/lease/caslease"
)

// Option configures NewProvider.
type Option func(*config) error

// config is what Options set.
type config struct {
	client *api.Client
	lease  []caslease.Option
}

// ErrInvalidOption: an Option was given a value it does not accept.
var ErrInvalidOption = errors.New("consul cas lease: invalid option")

// WithClient sets the Consul API client. Default:
// api.NewClient(api.DefaultConfig()), which honours CONSUL_HTTP_ADDR,
// CONSUL_HTTP_TOKEN and the like.
func WithClient(client *api.Client) Option {
	return func(c *config) error {
		c.client = client
		return option.NotNil(ErrInvalidOption, "WithClient", "client", client)
	}
}

// WithLeaseOptions adds options of the compare-and-set leases: their
// timings (caslease.WithDuration, WithRenewInterval, WithSafetyMargin,
// WithOperationTimeout, WithDrift; defaults 5 s, 1 s, 1 s, 1 s and 1%)
// and logger (caslease.WithLogger). The key prefix is always the
// cluster's.
func WithLeaseOptions(opts ...caslease.Option) Option {
	return func(c *config) error {
		c.lease = append(c.lease, opts...)
		return nil
	}
}

// NewProvider returns a Provider of Consul compare-and-set leases of the
// cluster named clusterName (membership.Cluster.Name): a lease.Provider
// for the singleton's, the coordinator's (actorsharding.WithCoordinatorSingleton)
// and the shards' use-lease. The cluster name is required: the records
// live under the cluster's keys, protoshard/<cluster>/lease/. An option
// with a value it does not accept fails with an error
// (ErrInvalidOption, caslease.ErrInvalidOption).
func NewProvider(clusterName string, opts ...Option) (*caslease.Provider, error) {
	if err := consulkey.CheckClusterName(clusterName); err != nil {
		return nil, fmt.Errorf("consul cas lease: cluster name: %w, under which the cluster's leases live", err)
	}
	var cfg config
	if err := option.Apply(&cfg, opts, ErrInvalidOption); err != nil {
		return nil, err
	}
	client := cfg.client
	if client == nil {
		var err error
		if client, err = api.NewClient(api.DefaultConfig()); err != nil {
			return nil, fmt.Errorf("consul cas lease: creating the Consul client: %w", err)
		}
	}
	return caslease.NewProvider(newStore(client),
		append(append([]caslease.Option{}, cfg.lease...), caslease.WithKeyPrefix(consulkey.LeasePrefix(clusterName)))...)
}

// ErrSessionLocked: the key is locked by a Consul session, so a session
// lease (lease/consul) of another node uses it.
var ErrSessionLocked = errors.New("key is locked by a Consul session (a session lease uses it)")

// store is caslease.Store on Consul KV; versions are ModifyIndexes.
type store struct {
	client *api.Client
}

var _ caslease.Store = (*store)(nil)

// newStore returns a store on client.
func newStore(client *api.Client) *store { return &store{client: client} }

// Get implements caslease.Store with a read served by the leader.
func (s *store) Get(ctx context.Context, key string) ([]byte, uint64, bool, error) {
	pair, _, err := s.client.KV().Get(key, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, 0, false, err
	}
	if pair == nil {
		return nil, 0, false, nil
	}
	if pair.Session != "" {
		return nil, 0, false, fmt.Errorf("%s: %w", key, ErrSessionLocked)
	}
	return pair.Value, pair.ModifyIndex, true, nil
}

// CAS implements caslease.Store: one transaction with a check-and-set,
// whose result carries the new ModifyIndex.
func (s *store) CAS(ctx context.Context, key string, value []byte, version uint64) (uint64, bool, error) {
	ok, resp, _, err := s.client.Txn().Txn(api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: key, Value: value, Index: version}},
	}, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return 0, false, err
	}
	if !ok {
		return 0, false, nil // the index moved: Consul reports it as a failed operation
	}
	if resp == nil || len(resp.Results) != 1 || resp.Results[0].KV == nil {
		return 0, false, fmt.Errorf("%s: the transaction committed without a result", key)
	}
	return resp.Results[0].KV.ModifyIndex, true, nil
}
