package consulstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"
	"google.golang.org/protobuf/proto"

	"github.com/protoshard/protoshard/internal/backoff"
	"github.com/protoshard/protoshard/internal/consulkey"
	"github.com/protoshard/protoshard/internal/pathseg"
	"github.com/protoshard/protoshard/internal/rememberupdate"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/shardactor"
)

// Defaults of the RememberEntitiesStore.
const (
	// defaultRememberBuckets is the number of KV keys a shard's entity IDs
	// are spread over. Akka's ddata store uses 5 keys per shard; 16 keeps
	// each value, and so each rewrite, small, and still lets one Consul
	// transaction rewrite every bucket of a shard.
	defaultRememberBuckets = 16
	// defaultRememberMaxBucketBytes is the largest encoded bucket the store
	// writes: 360 KiB. A transaction carries the value base64-encoded in
	// JSON (4/3 of its size), and Consul refuses a transaction body larger
	// than txn_max_req_len (512 KiB by default), so a full bucket must fit
	// one transaction with room for its key; it is also below Consul's
	// kv_max_value_size (512 KiB by default).
	defaultRememberMaxBucketBytes = 360 << 10
	// defaultRememberMaxTxnBytes is the largest transaction body the store
	// sends: 500 KB, below Consul's default txn_max_req_len of 512 KiB.
	// Bodies are measured exactly (the JSON the client sends); the margin
	// only guards against a proxy or client adding to them.
	defaultRememberMaxTxnBytes = 500_000
	// defaultRememberMaxAttempts bounds the read-modify-write rounds of one
	// Update that lost check-and-set races to another writer of the same
	// shard. A lost race means the other writer progressed, so there is no
	// livelock; but a writer that keeps writing can win round after round
	// while this one backs off (up to 100ms a round). 10 rounds were seen
	// to run out on a loaded machine under -race; 30 give a busy
	// competitor about 2.5s to finish.
	defaultRememberMaxAttempts = 30
)

// maxTxnOps is the operations per transaction. Consul refuses more
// than 128 operations (older versions more than 64), so the store stays at
// the older limit, which no default-sized shard reaches anyway.
const maxTxnOps = 64

// RememberEntitiesStore is a shardactor.RememberEntitiesStore in Consul
// KV, so that remembered entities survive the nodes, and a full restart of
// the cluster, as long as Consul keeps its data.
//
// # Key layout
//
// A shard's IDs live under
//
//	protoshard/<cluster>/sharding/<typeName>/entities/<escaped shardID>/<bucket>
//
// where <escaped shardID> is url.PathEscape(shardID) with a leading '.' also
// escaped ("%2E"), so that it is one path segment that HTTP path cleaning
// never rewrites ('/' becomes "%2F", '%' "%25", so two shards never share
// a prefix), and <bucket> is a decimal number in [0, buckets). An entity ID
// lives in bucket FNV-1a-32(UTF-8 bytes of the ID) mod buckets. A bucket's
// value is a protobuf messages.RememberedEntities: the bucket's IDs, sorted
// and length-prefixed (so IDs may hold any character). An empty bucket is
// deleted rather than written empty, so a shard without entities has no
// keys.
//
// # Writes
//
// Update reads the shard's buckets (one consistent KV List on the prefix),
// computes the new value of each bucket it touches, and writes them all in
// one Consul transaction, each as a check-and-set on the ModifyIndex it
// read (a delete-cas for a bucket that becomes empty, a cas at index 0,
// "create only", for a new one). A burst of any number of new IDs thus
// costs one write request, as long as the touched buckets fit one
// transaction (64 operations, defaultRememberMaxTxnBytes); beyond that the
// buckets are split over several transactions, never one ID per write.
// When another writer changed a bucket in between (two nodes writing the
// same shard during a hand-off race), the transaction rolls back as a
// whole and Update reads again and retries, so no concurrent change is
// lost. Adding an ID that is remembered already, or removing one that is
// not, writes nothing.
//
// Update looks for a stopped ID in every bucket of the shard, and treats an
// ID found in any bucket as remembered. So changing the number of buckets
// is safe: IDs written under the old number stay where they are, are
// returned by GetEntities and are removed when they stop; new IDs go to
// their bucket under the new number.
//
// # Capacity
//
// A bucket holds at most defaultRememberMaxBucketBytes (360 KiB) of
// encoded IDs; an ID of n bytes (n < 128) takes n+2. That is about 9,700
// UUID-sized (36-byte) IDs or 30,000 10-byte IDs per bucket, so with the
// default 16 buckets about 150,000 UUIDs or 480,000 10-byte IDs per shard
// (a few percent less, since the fullest bucket decides). An Update that
// would take a bucket beyond it fails with
// shardactor.ErrTooManyRememberedEntities and writes nothing.
// WithRememberBuckets raises the capacity.
//
// Each Update reads the whole shard once and rewrites every bucket it
// touches, so its cost in bytes grows with the shard (a burst of 100 new
// IDs touches all 16 buckets). Once the touched buckets exceed about 370 KB
// of encoded IDs (500 KB as JSON), an Update takes more than one
// transaction. Shards of Akka's recommended size (ten per node) stay far
// below the capacity.
//
// # Errors
//
// What Consul will never accept or the store cannot read back is
// permanent (errors.Is(err, shardactor.ErrPermanent)): beyond the
// capacity, an invalid ID or type name, a corrupt stored value, a request
// Consul refuses as malformed or too large. A Consul that cannot be reached, a
// time-out or a check-and-set race lost too often are transient.
//
// A RememberEntitiesStore is safe for use by several goroutines.
type RememberEntitiesStore struct {
	kv          *api.KV
	txn         *api.Txn
	clusterName string
	typeName    string
	cfg         rememberConfig
	writes      atomic.Int64
}

var _ shardactor.RememberEntitiesStore = (*RememberEntitiesStore)(nil)

type rememberConfig struct {
	buckets        int
	maxBucketBytes int
	maxTxnBytes    int
	maxAttempts    int
}

// RememberOption configures a RememberEntitiesStore.
type RememberOption func(*rememberConfig)

// WithRememberBuckets sets the number of buckets (KV keys) per shard,
// 16 by default; n < 1 keeps the default. More buckets
// mean more capacity and smaller rewrites, but more keys to read.
func WithRememberBuckets(n int) RememberOption {
	return func(c *rememberConfig) {
		if n >= 1 {
			c.buckets = n
		}
	}
}

// WithRememberMaxBucketBytes sets the largest encoded bucket the store
// writes, 360 KiB by default; n < 1 keeps the
// default. Raise it only together with Consul's kv_max_value_size and
// txn_max_req_len (and WithRememberMaxTxnBytes).
func WithRememberMaxBucketBytes(n int) RememberOption {
	return func(c *rememberConfig) {
		if n >= 1 {
			c.maxBucketBytes = n
		}
	}
}

// WithRememberMaxTxnBytes sets the largest transaction body the store
// sends, 500 KB by default; n < 1 keeps the default.
// It must not exceed the servers' txn_max_req_len.
func WithRememberMaxTxnBytes(n int) RememberOption {
	return func(c *rememberConfig) {
		if n >= 1 {
			c.maxTxnBytes = n
		}
	}
}

// WithRememberMaxAttempts sets how many read-modify-write rounds an Update
// makes when it keeps losing check-and-set races, 30 by default; n < 1 keeps the default.
func WithRememberMaxAttempts(n int) RememberOption {
	return func(c *rememberConfig) {
		if n >= 1 {
			c.maxAttempts = n
		}
	}
}

// NewRememberEntitiesStore returns the store of the entity type
// typeName of the cluster clusterName in the Consul KV of client. Pass the
// cluster's own name, sharding.Cluster().Name(): StartRegion refuses a
// store of another cluster or type (actorsharding.ErrStoreMismatch).
// typeName is used as it is in the keys (like the coordinator's state
// key), so it must be a clean key path: not empty, without empty, "." or
// ".." segments; otherwise, or with an empty cluster name, every call
// fails with an error.
func NewRememberEntitiesStore(client *api.Client, clusterName, typeName string, opts ...RememberOption) *RememberEntitiesStore {
	cfg := rememberConfig{
		buckets:        defaultRememberBuckets,
		maxBucketBytes: defaultRememberMaxBucketBytes,
		maxTxnBytes:    defaultRememberMaxTxnBytes,
		maxAttempts:    defaultRememberMaxAttempts,
	}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	return &RememberEntitiesStore{kv: client.KV(), txn: client.Txn(), clusterName: clusterName, typeName: typeName, cfg: cfg}
}

// ClusterName returns the name of the cluster whose entities the store
// remembers.
func (s *RememberEntitiesStore) ClusterName() string { return s.clusterName }

// TypeName returns the entity type whose entities the store remembers.
func (s *RememberEntitiesStore) TypeName() string { return s.typeName }

// rememberEntitiesPrefix returns the KV prefix (ending in '/') under
// which the Consul store of typeName in the cluster clusterName keeps the
// buckets of shardID.
func rememberEntitiesPrefix(clusterName, typeName, shardID string) string {
	return rememberEntitiesTypePrefix(clusterName, typeName) + pathseg.Escape(shardID) + "/"
}

// RememberedBucket is one stored bucket of a RememberEntitiesStore,
// as Buckets reads it.
type RememberedBucket struct {
	Key         string   // the KV key
	ModifyIndex uint64   // the key's ModifyIndex, for a check-and-set
	ShardID     string   // the shard whose entities it holds
	EntityIDs   []string // its entity IDs, sorted; nil when Err is set
	// Err says why the value could not be decoded (it wraps
	// shardactor.ErrCorruptRememberedEntities); nil when it could.
	Err error
}

// Buckets returns every bucket the store keeps for its entity type, over
// all shards, in key order, with one consistent KV List: what an operator's
// tool shows and removes. A bucket whose value cannot be decoded is
// returned with its Err set rather than failing the whole listing, so that
// damaged data can still be seen and removed.
//
// Type names may contain '/', so the prefix of one type's entities is also
// the beginning of other types' keys (type "a/entities/x" keeps its state at
// "protoshard/<cluster>/sharding/a/entities/x/coordinator-state"). Only keys of the
// form <prefix><escaped shard ID>/<bucket number> are this type's; no other
// type writes a key of that form, and the others are skipped.
func (s *RememberEntitiesStore) Buckets(ctx context.Context) ([]RememberedBucket, error) {
	if err := checkScope(s.clusterName, s.typeName); err != nil {
		return nil, fmt.Errorf("consul remember-entities store %s: buckets: %w: %w", s.typeName, shardactor.ErrInvalidUpdate, err)
	}
	prefix := rememberEntitiesTypePrefix(s.clusterName, s.typeName)
	pairs, _, err := s.kv.List(prefix, (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("consul remember-entities store %s: buckets: listing %s: %w", s.typeName, prefix, consulPermanence(err))
	}
	var out []RememberedBucket
	for _, p := range pairs {
		if p == nil {
			continue
		}
		segment, bucket, ok := strings.Cut(strings.TrimPrefix(p.Key, prefix), "/")
		if !ok || !isBucketName(bucket) {
			continue
		}
		shardID, err := url.PathUnescape(segment)
		if err != nil || shardID == "" || pathseg.Escape(shardID) != segment {
			continue
		}
		b := RememberedBucket{Key: p.Key, ModifyIndex: p.ModifyIndex, ShardID: shardID}
		if b.EntityIDs, err = decodeRememberBucket(p.Value); err != nil {
			b.Err = fmt.Errorf("key %s (modify index %d): %w", p.Key, p.ModifyIndex, err)
		}
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// rememberEntitiesTypePrefix is the KV prefix of all the shards of
// typeName.
func rememberEntitiesTypePrefix(clusterName, typeName string) string {
	return shardingPrefix(clusterName, typeName) + "entities/"
}

// Writes returns the number of write requests (transactions, including
// rolled-back ones) the store sent to Consul.
func (s *RememberEntitiesStore) Writes() int64 { return s.writes.Load() }

// GetEntities implements shardactor.RememberEntitiesStore with one consistent KV
// List of the shard's buckets.
func (s *RememberEntitiesStore) GetEntities(ctx context.Context, shardID string) ([]string, error) {
	buckets, err := s.read(ctx, shardID)
	if err != nil {
		return nil, s.errorf(shardID, "get entities: %w", err)
	}
	n := 0
	for _, b := range buckets {
		n += len(b.ids)
	}
	if n == 0 {
		return nil, nil
	}
	ids := make([]string, 0, n)
	for _, b := range buckets {
		ids = append(ids, b.ids...)
	}
	slices.Sort(ids)
	// An ID is in one bucket only, unless two writers with different
	// numbers of buckets raced; it is remembered once all the same.
	return slices.Compact(ids), nil
}

// Update implements shardactor.RememberEntitiesStore; see the type's documentation for
// how it writes.
func (s *RememberEntitiesStore) Update(ctx context.Context, shardID string, started, stopped []string) error {
	if err := rememberupdate.Validate(ctx, shardID, started, stopped, shardactor.ErrInvalidUpdate); err != nil {
		return s.errorf(shardID, "update: %w", err)
	}
	if len(started) == 0 && len(stopped) == 0 {
		return nil
	}
	// failed holds, for the buckets of the transactions rolled back in the
	// last round, the index each was written against: if none of them
	// changed since, the rollback was not a lost race and retrying is
	// pointless.
	var failed map[string]uint64
	var why []string
	for attempt := 1; ; attempt++ {
		buckets, err := s.read(ctx, shardID)
		if err != nil {
			return s.errorf(shardID, "update (attempt %d): %w", attempt, err)
		}
		if failed != nil && !changedSince(buckets, failed) {
			// Not a lost race: Consul refuses this transaction as such,
			// and would refuse it again.
			return s.errorf(shardID, "update: transaction rolled back although no bucket changed: %s: %w", strings.Join(why, "; "), shardactor.ErrPermanent)
		}
		ops, err := s.plan(shardID, buckets, started, stopped)
		if err != nil {
			return s.errorf(shardID, "update: %w", err)
		}
		if len(ops) == 0 {
			return nil
		}
		txns, err := s.pack(ops)
		if err != nil {
			return s.errorf(shardID, "update: %w", err)
		}
		failed, why = nil, nil
		for _, txn := range txns {
			s.writes.Add(1)
			ok, resp, _, err := s.txn.Txn(txn, (&api.QueryOptions{}).WithContext(ctx))
			if err != nil {
				// The buckets of earlier transactions may be written: a
				// repeated Update finds them done (Update is idempotent).
				return s.errorf(shardID, "update: writing %d buckets: %w", len(txn), consulPermanence(err))
			}
			if ok {
				continue
			}
			if failed == nil {
				failed = make(map[string]uint64)
			}
			for _, op := range txn {
				failed[op.KV.Key] = op.KV.Index
			}
			var txnErrs api.TxnErrors
			if resp != nil {
				txnErrs = resp.Errors
			}
			why = append(why, "rolled back: "+describeTxnErrors(txnErrs))
		}
		if failed == nil {
			return nil
		}
		if attempt >= s.cfg.maxAttempts {
			return s.errorf(shardID, "update: still losing check-and-set races to another writer after %d attempts: %s",
				attempt, strings.Join(why, "; "))
		}
		if err := backoff.Sleep(ctx, retryBackoff(attempt)); err != nil {
			return s.errorf(shardID, "update: waiting to retry after a check-and-set conflict: %w", err)
		}
	}
}

// storedBucket is one bucket as read: its IDs (sorted) and its ModifyIndex.
type storedBucket struct {
	key   string
	index uint64
	ids   []string
}

// read returns the shard's stored buckets by key, with one consistent KV
// List: a stale read would hand out old ModifyIndexes, and every CAS built
// on them would fail as a conflict.
func (s *RememberEntitiesStore) read(ctx context.Context, shardID string) (map[string]*storedBucket, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if shardID == "" {
		return nil, fmt.Errorf("%w: empty shard ID", shardactor.ErrInvalidUpdate)
	}
	if err := checkScope(s.clusterName, s.typeName); err != nil {
		return nil, fmt.Errorf("%w: %w", shardactor.ErrInvalidUpdate, err)
	}
	prefix := rememberEntitiesPrefix(s.clusterName, s.typeName, shardID)
	pairs, _, err := s.kv.List(prefix, (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", prefix, consulPermanence(err))
	}
	out := make(map[string]*storedBucket, len(pairs))
	for _, p := range pairs {
		if p == nil {
			continue
		}
		suffix, ok := strings.CutPrefix(p.Key, prefix)
		if !ok || !isBucketName(suffix) {
			return nil, fmt.Errorf("key %s (modify index %d) is no bucket of the shard: %w", p.Key, p.ModifyIndex, shardactor.ErrCorruptRememberedEntities)
		}
		ids, err := decodeRememberBucket(p.Value)
		if err != nil {
			return nil, fmt.Errorf("key %s (modify index %d): %w", p.Key, p.ModifyIndex, err)
		}
		out[p.Key] = &storedBucket{key: p.Key, index: p.ModifyIndex, ids: ids}
	}
	return out, nil
}

// isBucketName accepts the canonical decimal form of a non-negative number,
// so that one bucket has one key. Numbers beyond the configured count are
// accepted: they were written under a larger number of buckets.
func isBucketName(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 0 && strconv.Itoa(n) == s
}

// checkScope refuses an empty cluster name (every such cluster would
// share its keys) and a type name that would not survive as a key path:
// the HTTP API cleans request paths, so List would read another prefix
// than the one written.
func checkScope(clusterName, typeName string) error {
	if err := consulkey.CheckClusterName(clusterName); err != nil {
		return err
	}
	if typeName == "" {
		return errors.New("empty entity type name")
	}
	for seg := range strings.SplitSeq(typeName, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("entity type name %q is not a clean key path (empty, \".\" or \"..\" segment)", typeName)
		}
	}
	return nil
}

// consulPermanence marks the Consul answers that repeating the request
// cannot change as permanent: 400 (Consul refuses the request as
// malformed) and 413 (a value, a transaction or its number of operations
// over Consul's limits). Everything else (time-outs, connection errors,
// 5xx, 429, and 403, which an operator can cure) stays transient.
//
// The client's Txn drops the status code and returns the body as text, so
// for transactions the texts of Consul's 413 answers are matched ("Request
// body(...) too large", "Transaction contains too many operations"). The
// store's own limits keep below them unless configured above the servers'.
func consulPermanence(err error) error {
	var status api.StatusError
	if errors.As(err, &status) && (status.Code == http.StatusBadRequest || status.Code == http.StatusRequestEntityTooLarge) {
		return fmt.Errorf("%w: %w", shardactor.ErrPermanent, err)
	}
	if text := err.Error(); strings.HasPrefix(text, "Failed request: ") &&
		(strings.Contains(text, "too large") || strings.Contains(text, "too many operations")) {
		return fmt.Errorf("%w: %w", shardactor.ErrPermanent, err)
	}
	return err
}

// plan returns the transaction operations that bring the shard from the
// buckets read to the state Update asks for, sorted by key; none when
// nothing changes. It fails, before anything is written, when a bucket
// would outgrow its capacity.
func (s *RememberEntitiesStore) plan(shardID string, buckets map[string]*storedBucket, started, stopped []string) (api.TxnOps, error) {
	prefix := rememberEntitiesPrefix(s.clusterName, s.typeName, shardID)
	// Visiting the home bucket first finds an ID at once in the usual case;
	// the others matter only after the number of buckets changed.
	ordered := make([]*storedBucket, 0, len(buckets))
	for _, b := range buckets {
		ordered = append(ordered, b)
	}
	sort.Slice(ordered, func(i, j int) bool { return ordered[i].key < ordered[j].key })
	holds := func(b *storedBucket, id string) bool {
		if b == nil {
			return false
		}
		_, ok := slices.BinarySearch(b.ids, id)
		return ok
	}
	remembered := func(home, id string) bool {
		if holds(buckets[home], id) {
			return true
		}
		for _, b := range ordered {
			if b.key != home && holds(b, id) {
				return true
			}
		}
		return false
	}

	adds := make(map[string][]string)
	for _, id := range started {
		home := prefix + strconv.Itoa(rememberBucket(id, s.cfg.buckets))
		if !remembered(home, id) {
			adds[home] = append(adds[home], id)
		}
	}
	removes := make(map[string]map[string]struct{})
	for _, id := range stopped {
		for _, b := range ordered {
			if holds(b, id) {
				if removes[b.key] == nil {
					removes[b.key] = make(map[string]struct{})
				}
				removes[b.key][id] = struct{}{}
			}
		}
	}

	touched := make([]string, 0, len(adds)+len(removes))
	for k := range adds {
		touched = append(touched, k)
	}
	for k := range removes {
		if _, ok := adds[k]; !ok {
			touched = append(touched, k)
		}
	}
	slices.Sort(touched)

	var ops api.TxnOps
	for _, key := range touched {
		var old []string
		var index uint64
		if b := buckets[key]; b != nil {
			old, index = b.ids, b.index
		}
		ids := make([]string, 0, len(old)+len(adds[key]))
		for _, id := range old {
			if _, gone := removes[key][id]; !gone {
				ids = append(ids, id)
			}
		}
		ids = append(ids, adds[key]...)
		slices.Sort(ids)
		ids = slices.Compact(ids) // started may repeat an ID
		if len(ids) == 0 {
			if index != 0 {
				ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDeleteCAS, Key: key, Index: index}})
			}
			continue
		}
		value, err := proto.Marshal(&messages.RememberedEntities{EntityIds: ids})
		if err != nil {
			return nil, fmt.Errorf("encoding bucket %s: %w: %w", key, shardactor.ErrInvalidUpdate, err)
		}
		if len(value) > s.cfg.maxBucketBytes {
			return nil, fmt.Errorf("bucket %s would hold %d IDs in %d bytes, over its limit of %d bytes (%d buckets per shard): %w",
				key, len(ids), len(value), s.cfg.maxBucketBytes, s.cfg.buckets, shardactor.ErrTooManyRememberedEntities)
		}
		// A CAS at index 0 creates the key only if it does not exist, which
		// is what "no bucket was read" means.
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: key, Value: value, Index: index}})
	}
	return ops, nil
}

// pack splits ops into transactions of at most maxTxnOps operations
// whose JSON bodies stay within maxTxnBytes.
func (s *RememberEntitiesStore) pack(ops api.TxnOps) ([]api.TxnOps, error) {
	txns, err := packTxns(nil, ops, s.cfg.maxTxnBytes)
	if err != nil {
		return nil, fmt.Errorf("%w (lower the bucket size or raise the transaction size): %w", err, shardactor.ErrTooManyRememberedEntities)
	}
	return txns, nil
}

// packTxns splits ops into transactions that each begin with head (a
// check the whole transaction depends on), of at most maxTxnOps
// operations, whose JSON bodies stay within maxBytes. Sizes are those of
// the body the Consul client sends (encoding/json, one op after the other
// in an array, plus a newline).
func packTxns(head, ops api.TxnOps, maxBytes int) ([]api.TxnOps, error) {
	const frame = len("[]\n")
	sizeOf := func(op *api.TxnOp) (int, error) {
		b, err := json.Marshal(op)
		if err != nil {
			return 0, fmt.Errorf("encoding the operation on %s: %w", op.KV.Key, err)
		}
		return len(b), nil
	}
	// The size of a transaction holding head alone.
	empty := frame
	for i, op := range head {
		n, err := sizeOf(op)
		if err != nil {
			return nil, err
		}
		empty += n
		if i > 0 {
			empty++ // the comma
		}
	}
	var txns []api.TxnOps
	cur, size := append(api.TxnOps(nil), head...), empty
	for _, op := range ops {
		n, err := sizeOf(op)
		if err != nil {
			return nil, err
		}
		sep := 0
		if len(head) > 0 {
			sep = 1
		}
		if empty+sep+n > maxBytes {
			return nil, fmt.Errorf("writing %s takes a %d-byte transaction, over the limit of %d bytes", op.KV.Key, empty+sep+n, maxBytes)
		}
		if len(cur) > 0 {
			sep = 1
		}
		if len(cur) == maxTxnOps || size+sep+n > maxBytes {
			txns = append(txns, cur)
			cur, size = append(api.TxnOps(nil), head...), empty
			sep = 0
			if len(cur) > 0 {
				sep = 1
			}
		}
		cur = append(cur, op)
		size += sep + n
	}
	if len(cur) > len(head) {
		txns = append(txns, cur)
	}
	return txns, nil
}

// changedSince reports whether any of the keys in indexes has another
// ModifyIndex (or presence) now than the index it was written against.
func changedSince(buckets map[string]*storedBucket, indexes map[string]uint64) bool {
	for key, index := range indexes {
		var now uint64
		if b := buckets[key]; b != nil {
			now = b.index
		}
		if now != index {
			return true
		}
	}
	return false
}

// rememberBucket is the bucket of an entity ID: the 32-bit FNV-1a hash of
// its bytes modulo the number of buckets. It is part of the stored format:
// every writer of a shard must compute it the same way (Update still finds
// IDs in other buckets, see RememberEntitiesStore).
func rememberBucket(entityID string, buckets int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(entityID)) // a hash.Hash never fails to write
	return int(h.Sum32() % uint32(buckets))
}

// decodeRememberBucket parses a bucket's value and checks what the store
// always writes: sorted, distinct, non-empty IDs and no fields it does not
// know. A value from a newer version with more fields is refused rather
// than rewritten without them.
func decodeRememberBucket(value []byte) ([]string, error) {
	var m messages.RememberedEntities
	if err := proto.Unmarshal(value, &m); err != nil {
		return nil, fmt.Errorf("%w: %w", shardactor.ErrCorruptRememberedEntities, err)
	}
	if len(m.ProtoReflect().GetUnknown()) > 0 {
		return nil, fmt.Errorf("%w: %d bytes of unknown fields", shardactor.ErrCorruptRememberedEntities, len(m.ProtoReflect().GetUnknown()))
	}
	ids := m.GetEntityIds()
	for i, id := range ids {
		if id == "" {
			return nil, fmt.Errorf("%w: empty entity ID at position %d", shardactor.ErrCorruptRememberedEntities, i)
		}
		if i > 0 && ids[i-1] >= id {
			return nil, fmt.Errorf("%w: entity IDs not sorted and distinct at position %d", shardactor.ErrCorruptRememberedEntities, i)
		}
	}
	return ids, nil
}

// retryBackoff is a random pause before retry number attempt, doubling from
// 1ms up to 100ms: random, so that two writers that collided do not collide
// again in lockstep.
func retryBackoff(attempt int) time.Duration {
	ceiling := min(time.Millisecond<<min(attempt-1, 10), 100*time.Millisecond)
	return ceiling/2 + rand.N(ceiling/2+1)
}

func (s *RememberEntitiesStore) errorf(shardID, format string, args ...any) error {
	return fmt.Errorf("consul remember-entities store %s of cluster %s: shard %q: "+format, append([]any{s.typeName, s.clusterName, shardID}, args...)...)
}
