// Package consul keeps durable entity state (durablestate.Store) in Consul
// KV, one key per entity under the cluster's prefix:
//
//	protoshard/<cluster>/durable-state/<type>/<entity>
//
// with the type and the entity ID each escaped as one path segment.
package consul

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/durablestate"
	"github.com/protoshard/protoshard/internal/consulkey"
	"github.com/protoshard/protoshard/internal/pathseg"
)

// maxPayloadBytes is the largest payload a Store writes (380 KiB): Consul's default
// txn_max_req_len of 512 KiB holds the value base64 encoded (4/3 of it)
// inside the transaction's JSON, with room left for the rest of the
// request and the record's header.
const maxPayloadBytes = 380 * 1024

// recordFormat is the first byte of every stored value: the layout of
// what follows (the token as 8 bytes big-endian, then the payload).
const (
	recordFormat = 1
	headerBytes  = 1 + 8
)

// Store is a durablestate.Store in Consul KV, an entity's record at
// protoshard/<cluster>/durable-state/<type>/<entity> (type and entity ID
// escaped as one path segment each), a payload of at most 380 KiB (a
// larger one fails Save: Consul's transaction must hold it). The revision of an entity's
// record is its key's ModifyIndex, and every save is a check-and-set on
// it. Consul keeps a key's ModifyIndex when a write leaves value and flags
// as they were, so a save writes the revision it replaces into the key's
// flags: every save moves the revision, even one that writes back the
// stored payload and token.
//
// A Store is safe for use by several goroutines (api.Client is).
type Store struct {
	kv          *api.KV
	clusterName string
	prefix      string
}

var _ durablestate.Store = (*Store)(nil)

// New returns the store of the durable state of the entity type typeName
// in the cluster clusterName (its membership.Cluster.Name), in client's
// Consul KV. An empty cluster or type name fails every call.
func New(client *api.Client, clusterName, typeName string) *Store {
	s := &Store{kv: client.KV(), clusterName: clusterName}
	if typeName != "" {
		s.prefix = prefix(clusterName, typeName)
	}
	return s
}

// prefix returns the prefix, ending in '/', of the keys of the durable
// state of typeName's entities in the cluster clusterName.
func prefix(clusterName, typeName string) string {
	return consulkey.Prefix(clusterName) + "durable-state/" + pathseg.Escape(typeName) + "/"
}

// key returns the Consul KV key of entityID's record.
func (s *Store) key(entityID string) string {
	return s.prefix + pathseg.Escape(entityID)
}

// Load implements durablestate.Store.
func (s *Store) Load(ctx context.Context, entityID string) (durablestate.Record, error) {
	if err := s.check(entityID); err != nil {
		return durablestate.Record{}, fmt.Errorf("consul durable state: load: %w", err)
	}
	r, err := s.get(ctx, entityID)
	if err != nil {
		return durablestate.Record{}, fmt.Errorf("consul durable state %s: load: %w", s.key(entityID), err)
	}
	return r, nil
}

// Save implements durablestate.Store. It reads the record first to check
// the token, then writes with a check-and-set on the revision it read, so
// the token it checked is the one it replaces. The CAS runs as a
// transaction, which answers with the new ModifyIndex (KV.CAS answers only
// true or false, and reading the index afterwards could return a later
// writer's).
func (s *Store) Save(ctx context.Context, entityID string, payload []byte, expectedRevision, token uint64) (uint64, error) {
	if err := s.check(entityID); err != nil {
		return 0, fmt.Errorf("consul durable state: save: %w", err)
	}
	key := s.key(entityID)
	if len(payload) > maxPayloadBytes {
		return 0, fmt.Errorf("consul durable state %s: save: the payload is %d bytes, Consul's transaction holds at most %d", key, len(payload), maxPayloadBytes)
	}
	stored, err := s.get(ctx, entityID)
	if err != nil {
		return 0, fmt.Errorf("consul durable state %s: save: %w", key, err)
	}
	if err := durablestate.Check(stored, expectedRevision, token); err != nil {
		return 0, fmt.Errorf("consul durable state %s: save: %w", key, err)
	}
	value := make([]byte, headerBytes, headerBytes+len(payload))
	value[0] = recordFormat
	binary.BigEndian.PutUint64(value[1:], token)
	value = append(value, payload...)
	ops := api.KVTxnOps{{Verb: api.KVCAS, Key: key, Value: value, Flags: expectedRevision, Index: expectedRevision}}
	ok, resp, _, err := s.kv.Txn(ops, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return 0, fmt.Errorf("consul durable state %s: save at revision %d: %w", key, expectedRevision, err)
	}
	if ok {
		if len(resp.Results) != 1 || resp.Results[0] == nil || resp.Results[0].ModifyIndex <= expectedRevision {
			return 0, fmt.Errorf("consul durable state %s: save at revision %d: transaction succeeded without a new modify index", key, expectedRevision)
		}
		return resp.Results[0].ModifyIndex, nil
	}
	// Another write came between the read and the CAS: read again to say
	// which, since Consul reports a stale index only as text.
	if now, err := s.get(ctx, entityID); err == nil {
		if err := durablestate.Check(now, expectedRevision, token); err != nil {
			return 0, fmt.Errorf("consul durable state %s: save: %w", key, err)
		}
	}
	return 0, fmt.Errorf("consul durable state %s: save at revision %d: transaction rolled back: %s", key, expectedRevision, describeTxnErrors(resp.Errors))
}

// get reads entityID's record with a consistent read: a stale read would
// hand out an old revision, and the save that follows would fail as a
// conflict.
func (s *Store) get(ctx context.Context, entityID string) (durablestate.Record, error) {
	pair, _, err := s.kv.Get(s.key(entityID), (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil || pair == nil {
		return durablestate.Record{}, err
	}
	if len(pair.Value) < headerBytes || pair.Value[0] != recordFormat {
		return durablestate.Record{}, fmt.Errorf("modify index %d: not a durable state record (%d bytes)", pair.ModifyIndex, len(pair.Value))
	}
	r := durablestate.Record{Revision: pair.ModifyIndex, Token: binary.BigEndian.Uint64(pair.Value[1:headerBytes])}
	if len(pair.Value) > headerBytes {
		r.Payload = pair.Value[headerBytes:]
	}
	return r, nil
}

// check refuses what names no key: an empty cluster, type or entity.
func (s *Store) check(entityID string) error {
	if err := consulkey.CheckClusterName(s.clusterName); err != nil {
		return err
	}
	if s.prefix == "" {
		return errors.New("empty entity type name")
	}
	if entityID == "" {
		return durablestate.ErrInvalidEntity
	}
	return nil
}

// describeTxnErrors turns the errors of a rolled-back transaction into
// text.
func describeTxnErrors(errs api.TxnErrors) string {
	parts := make([]string, 0, len(errs))
	for _, e := range errs {
		if e != nil {
			parts = append(parts, fmt.Sprintf("op %d: %s", e.OpIndex, e.What))
		}
	}
	if len(parts) == 0 {
		return "no error given"
	}
	return strings.Join(parts, ", ")
}
