package consulstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/internal/consulkey"
)

// MaxStateBytes is the largest encoded state a StateStore writes:
// Consul's default txn_max_req_len of 512 KiB holds the value base64
// encoded (4/3 of it) inside the transaction's JSON, with room left for
// the rest of the request.
const MaxStateBytes = 380 * 1024

// StateKey returns the Consul KV key under which the coordinator of the
// entity type typeName of the cluster clusterName (its
// membership.Cluster.Name) keeps its state:
// protoshard/<cluster>/sharding/<type>/coordinator-state.
func StateKey(clusterName, typeName string) string {
	return shardingPrefix(clusterName, typeName) + "coordinator-state"
}

// shardingPrefix is the prefix of every sharding key of typeName in the
// cluster clusterName.
func shardingPrefix(clusterName, typeName string) string {
	return consulkey.Prefix(clusterName) + "sharding/" + typeName + "/"
}

// StateStore is a coordinatoractor.StateStore in one Consul KV key, so that the state
// survives the node of the coordinator. The version is the key's
// ModifyIndex, and every write is a check-and-set on it: a coordinator that
// lost its role (it was cut off, and a newer coordinator started and saved)
// cannot overwrite the newer state, because its CAS against the old index
// fails and Save returns coordinatoractor.ErrVersionConflict.
//
// A StateStore is safe for use by several goroutines (api.Client is).
type StateStore struct {
	kv          *api.KV
	clusterName string
	typeName    string
	key         string
}

var _ coordinatoractor.StateStore = (*StateStore)(nil)

// NewStateStore returns the store of the coordinator of the entity type
// typeName in the cluster clusterName, in the key StateKey(clusterName,
// typeName) of client's Consul KV. Pass the cluster's own name,
// sharding.Cluster().Name(): StartRegion and StartProxy refuse a store of
// another cluster or type (actorsharding.ErrStoreMismatch). An empty
// cluster name, or a type name that is not a clean key path (see
// NewRememberEntitiesStore), fails every call.
func NewStateStore(client *api.Client, clusterName, typeName string) *StateStore {
	return &StateStore{kv: client.KV(), clusterName: clusterName, typeName: typeName, key: StateKey(clusterName, typeName)}
}

// Key returns the Consul KV key of the store.
func (s *StateStore) Key() string { return s.key }

// ClusterName returns the name of the cluster whose state the store keeps.
func (s *StateStore) ClusterName() string { return s.clusterName }

// TypeName returns the entity type whose state the store keeps.
func (s *StateStore) TypeName() string { return s.typeName }

// Load implements coordinatoractor.StateStore: the data is the key's
// value and the version its ModifyIndex; a missing key is no data at
// version 0.
func (s *StateStore) Load(ctx context.Context) ([]byte, uint64, error) {
	if err := checkScope(s.clusterName, s.typeName); err != nil {
		return nil, 0, fmt.Errorf("consul state store %s: load: %w", s.key, err)
	}
	pair, err := s.get(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("consul state store %s: load: %w", s.key, err)
	}
	if pair == nil {
		return nil, 0, nil
	}
	return pair.Value, pair.ModifyIndex, nil
}

// Save implements coordinatoractor.StateStore with a CAS on the key's ModifyIndex. Consul
// treats index 0 as "create only if the key does not exist", which is
// exactly version 0's meaning.
//
// The CAS runs as a one-operation transaction rather than through KV.CAS,
// because the transaction answers with the key's new ModifyIndex while
// KV.CAS answers only true or false. Reading the index afterwards would be
// racy: a newer coordinator may write in between, and its index taken for
// ours would let our next CAS overwrite its state. The price: a
// transaction carries the value base64-encoded in JSON, so Consul's
// txn_max_req_len (512 KiB by default) caps the encoded state at about
// 380 KiB (MaxStateBytes), against 512 KiB for a plain KV write.
// Larger data fails with coordinatoractor.ErrStateTooLarge before
// anything is sent.
func (s *StateStore) Save(ctx context.Context, data []byte, version uint64) (uint64, error) {
	if err := checkScope(s.clusterName, s.typeName); err != nil {
		return 0, fmt.Errorf("consul state store %s: save at version %d: %w", s.key, version, err)
	}
	if len(data) > MaxStateBytes {
		return 0, fmt.Errorf("consul state store %s: save at version %d: the state is %d bytes, Consul's transaction holds at most %d: %w",
			s.key, version, len(data), MaxStateBytes, coordinatoractor.ErrStateTooLarge)
	}
	// Consul keeps a key's ModifyIndex when a write leaves its value and
	// flags as they were, and a new coordinator's claim often writes back
	// the state it read unchanged: its epoch would then be the version the
	// coordinator before it holds, whose next write would still succeed.
	// The flags carry the version written over, which differs from write
	// to write, so every Save moves the version.
	ops := api.KVTxnOps{{Verb: api.KVCAS, Key: s.key, Value: data, Flags: version, Index: version}}
	ok, resp, _, err := s.kv.Txn(ops, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return 0, fmt.Errorf("consul state store %s: save at version %d: %w", s.key, version, err)
	}
	if ok {
		if len(resp.Results) != 1 || resp.Results[0] == nil || resp.Results[0].ModifyIndex <= version {
			return 0, fmt.Errorf("consul state store %s: save at version %d: transaction succeeded without a new modify index", s.key, version)
		}
		return resp.Results[0].ModifyIndex, nil
	}
	return 0, s.failedSave(ctx, version, resp.Errors)
}

// failedSave explains a rolled-back CAS transaction. Consul reports a
// stale index only as text, and an operation can fail for other reasons
// (an ACL denial, say), so the stored index is read to tell a conflict,
// which means "stop being coordinator", from an error worth retrying.
func (s *StateStore) failedSave(ctx context.Context, version uint64, txnErrs api.TxnErrors) error {
	what := describeTxnErrors(txnErrs)
	pair, err := s.get(ctx)
	if err != nil {
		return fmt.Errorf("consul state store %s: save at version %d failed (%s), and reading the stored version failed: %w",
			s.key, version, what, err)
	}
	var current uint64
	if pair != nil {
		current = pair.ModifyIndex
	}
	if current != version {
		return fmt.Errorf("consul state store %s: save at version %d, stored version is %d: %w",
			s.key, version, current, coordinatoractor.ErrVersionConflict)
	}
	return fmt.Errorf("consul state store %s: save at version %d: transaction rolled back: %s", s.key, version, what)
}

// get reads the key. It asks for a consistent read: a stale read would
// hand out an old ModifyIndex, and the CAS that follows would fail as a
// conflict and make a healthy coordinator step down.
func (s *StateStore) get(ctx context.Context) (*api.KVPair, error) {
	pair, _, err := s.kv.Get(s.key, (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	return pair, err
}

// describeTxnErrors turns the errors of a rolled-back transaction into
// text. Consul reports a stale index only as text; the stores decide by
// reading the indexes again, not by parsing it.
func describeTxnErrors(errs api.TxnErrors) string {
	if len(errs) == 0 {
		return "no error given"
	}
	parts := make([]string, 0, len(errs))
	for _, e := range errs {
		if e != nil {
			parts = append(parts, fmt.Sprintf("op %d: %s", e.OpIndex, e.What))
		}
	}
	return strings.Join(parts, ", ")
}
