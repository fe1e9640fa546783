// Package consulstore keeps a sharded daemon process's number of processes
// in Consul KV. It is apart so that in-process users do not link the
// Consul client.
package consulstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/internal/consulkey"
	"github.com/protoshard/protoshard/internal/pathseg"
	"github.com/protoshard/protoshard/shardeddaemonprocess"
)

type processes = shardeddaemonprocess.Processes

// Key returns the Consul KV key under which the daemon process name
// of the cluster clusterName keeps its number of processes:
// protoshard/<cluster>/sharded-daemon-process/<name>/processes.
func Key(clusterName, name string) string {
	return consulkey.Prefix(clusterName) + "sharded-daemon-process/" + pathseg.Escape(name) + "/processes"
}

// consulCASAttempts bounds the read-check-write rounds of one Save that
// other writers keep overtaking.
const consulCASAttempts = 5

// Store is a shardeddaemonprocess.Store in one Consul KV key, written by check-and-set
// on its ModifyIndex after checking that the new state supersedes the
// stored one, so that a coordinator that lost its role cannot take the
// revision back.
type Store struct {
	kv          *api.KV
	clusterName string
	key         string
}

var _ shardeddaemonprocess.Store = (*Store)(nil)

// NewStore returns the store of the daemon process name in the
// cluster clusterName (pass sharding.Cluster().Name()), in the key
// Key(clusterName, name) of client's Consul KV.
func NewStore(client *api.Client, clusterName, name string) *Store {
	return &Store{kv: client.KV(), clusterName: clusterName, key: Key(clusterName, name)}
}

// storedProcesses is the stored format.
type storedProcesses struct {
	Revision         int64 `json:"revision"`
	Count            int   `json:"count"`
	PreviousCount    int   `json:"previousCount,omitempty"`
	Completed        bool  `json:"completed"`
	StartedUnixMilli int64 `json:"startedUnixMilli"`
}

// Load implements shardeddaemonprocess.Store.
func (s *Store) Load(ctx context.Context) (processes, bool, error) {
	p, pair, err := s.get(ctx)
	if err != nil {
		return processes{}, false, fmt.Errorf("consul daemon process store %s: load: %w", s.key, err)
	}
	return p, pair != nil, nil
}

// Save implements shardeddaemonprocess.Store.
func (s *Store) Save(ctx context.Context, p processes) error {
	data, err := json.Marshal(storedProcesses(p))
	if err != nil {
		return fmt.Errorf("consul daemon process store %s: save: %w", s.key, err)
	}
	for range consulCASAttempts {
		stored, pair, err := s.get(ctx)
		if err != nil {
			return fmt.Errorf("consul daemon process store %s: save: %w", s.key, err)
		}
		var index uint64 // 0: create only if absent
		if pair != nil {
			if !p.Supersedes(stored) {
				return fmt.Errorf("consul daemon process store %s: saving revision %d (completed %t) over %d (completed %t): %w",
					s.key, p.Revision, p.Completed, stored.Revision, stored.Completed, shardeddaemonprocess.ErrStaleRevision)
			}
			index = pair.ModifyIndex
		}
		ok, _, err := s.kv.CAS(&api.KVPair{Key: s.key, Value: data, ModifyIndex: index}, (&api.WriteOptions{}).WithContext(ctx))
		if err != nil {
			return fmt.Errorf("consul daemon process store %s: save: %w", s.key, err)
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("consul daemon process store %s: save: other writers overtook %d check-and-sets", s.key, consulCASAttempts)
}

func (s *Store) get(ctx context.Context) (processes, *api.KVPair, error) {
	if err := consulkey.CheckClusterName(s.clusterName); err != nil {
		return processes{}, nil, err
	}
	pair, _, err := s.kv.Get(s.key, (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil || pair == nil {
		return processes{}, nil, err
	}
	var st storedProcesses
	if err := json.Unmarshal(pair.Value, &st); err != nil {
		return processes{}, nil, fmt.Errorf("modify index %d: %w", pair.ModifyIndex, err)
	}
	return processes(st), pair, nil
}
