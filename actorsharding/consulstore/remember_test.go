package consulstore_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/protoshard/protoshard/actorsharding/consulstore"
	"github.com/protoshard/protoshard/internal/consulagent"
	"github.com/protoshard/protoshard/internal/testsupport"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/shardactor"
	"github.com/protoshard/protoshard/shardactor/remembertest"
)

func TestRememberEntitiesStore(t *testing.T) {
	client := consulagent.Start(t).Client()
	var n atomic.Int64
	stores := map[remembertest.Store]string{}
	var mu sync.Mutex
	remembertest.Run(t, remembertest.Harness{
		NewStore: func(t *testing.T) remembertest.Store {
			// A type name per test keeps the tests apart in one agent.
			typeName := fmt.Sprintf("contract-%d", n.Add(1))
			s := consulstore.NewRememberEntitiesStore(client, testCluster, typeName)
			mu.Lock()
			stores[s] = typeName
			mu.Unlock()
			return s
		},
		MaxBurstWrites: consulstore.DefaultRememberBuckets,
		Corrupt: func(t *testing.T, s remembertest.Store, shardID string) {
			mu.Lock()
			typeName := stores[s]
			mu.Unlock()
			pairs, _, err := client.KV().List(consulstore.RememberEntitiesPrefix(testCluster, typeName, shardID), nil)
			require.NoError(t, err)
			require.NotEmpty(t, pairs, "nothing stored to corrupt")
			_, err = client.KV().Put(&api.KVPair{Key: pairs[0].Key, Value: []byte("\xff\xffnot a bucket")}, nil)
			require.NoError(t, err)
		},
	})
}

// fnvBucket is the documented bucket of an ID: FNV-1a-32 modulo buckets.
func fnvBucket(id string, buckets int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % uint32(buckets))
}

// decodeBucket decodes one stored bucket.
func decodeBucket(t *testing.T, value []byte) []string {
	t.Helper()
	var m messages.RememberedEntities
	require.NoError(t, proto.Unmarshal(value, &m))
	return m.GetEntityIds()
}

// The Consul key layout is a stored format: check it from the outside.
func TestRememberKeyLayout(t *testing.T) {
	client := consulagent.Start(t).Client()
	ctx := context.Background()
	s := consulstore.NewRememberEntitiesStore(client, testCluster, "layout")

	require.Equal(t, "protoshard/app/sharding/layout/entities/12/", consulstore.RememberEntitiesPrefix(testCluster, "layout", "12"))
	require.Equal(t, "protoshard/app/sharding/layout/entities/a%2Fb/", consulstore.RememberEntitiesPrefix(testCluster, "layout", "a/b"))
	require.Equal(t, "protoshard/app/sharding/layout/entities/%2E./", consulstore.RememberEntitiesPrefix(testCluster, "layout", ".."))
	require.Equal(t, "protoshard/app/sharding/layout/entities/%25%20%C3%BC/", consulstore.RememberEntitiesPrefix(testCluster, "layout", "% ü"))

	ids := testsupport.EntityIDs("k", 1000)
	require.NoError(t, s.Update(ctx, "a/b", ids, nil))
	prefix := consulstore.RememberEntitiesPrefix(testCluster, "layout", "a/b")
	pairs, _, err := client.KV().List(prefix, nil)
	require.NoError(t, err)
	require.Len(t, pairs, consulstore.DefaultRememberBuckets, "1000 IDs fill every bucket")
	var all []string
	for _, p := range pairs {
		b, err := strconv.Atoi(strings.TrimPrefix(p.Key, prefix))
		require.NoError(t, err, p.Key)
		got := decodeBucket(t, p.Value)
		require.True(t, slices.IsSorted(got))
		for _, id := range got {
			require.Equal(t, b, fnvBucket(id, consulstore.DefaultRememberBuckets), "ID %s in bucket %d", id, b)
		}
		all = append(all, got...)
	}
	slices.Sort(all)
	require.Equal(t, ids, all)

	// A shard whose entities all stopped leaves no keys.
	require.NoError(t, s.Update(ctx, "a/b", nil, ids))
	pairs, _, err = client.KV().List(prefix, nil)
	require.NoError(t, err)
	require.Empty(t, pairs)
}

// Buckets lists a type's buckets over all its shards, and nothing of the
// types whose names begin with the same segments.
func TestRememberBuckets(t *testing.T) {
	client := consulagent.Start(t).Client()
	ctx := context.Background()
	s := consulstore.NewRememberEntitiesStore(client, testCluster, "listed")
	require.NoError(t, s.Update(ctx, "a/b", []string{"x", "y"}, nil))
	require.NoError(t, s.Update(ctx, "..", []string{"z"}, nil))
	// Another type whose name makes its keys begin with this type's prefix.
	other := consulstore.NewRememberEntitiesStore(client, testCluster, "listed/entities/a%2Fb")
	require.NoError(t, other.Update(ctx, "0", []string{"o"}, nil))
	_, err := client.KV().Put(&api.KVPair{Key: "protoshard/app/sharding/listed/entities/a%2Fb/coordinator-state", Value: []byte("x")}, nil)
	require.NoError(t, err)
	_, err = client.KV().Put(&api.KVPair{Key: consulstore.RememberEntitiesPrefix(testCluster, "listed", "bad") + "2", Value: []byte{0xff}}, nil)
	require.NoError(t, err)

	buckets, err := s.Buckets(ctx)
	require.NoError(t, err)
	got := map[string][]string{}
	for _, b := range buckets {
		require.NotZero(t, b.ModifyIndex, b.Key)
		require.True(t, strings.HasPrefix(b.Key, consulstore.RememberEntitiesPrefix(testCluster, "listed", b.ShardID)), b.Key)
		if b.ShardID == "bad" {
			require.ErrorIs(t, b.Err, shardactor.ErrCorruptRememberedEntities)
			continue
		}
		require.NoError(t, b.Err, b.Key)
		got[b.ShardID] = append(got[b.ShardID], b.EntityIDs...)
	}
	for _, ids := range got {
		slices.Sort(ids)
	}
	require.Equal(t, map[string][]string{"a/b": {"x", "y"}, "..": {"z"}}, got)
	require.True(t, slices.IsSortedFunc(buckets, func(a, b consulstore.RememberedBucket) int { return strings.Compare(a.Key, b.Key) }))

	empty, err := consulstore.NewRememberEntitiesStore(client, testCluster, "none").Buckets(ctx)
	require.NoError(t, err)
	require.Empty(t, empty)
	_, err = consulstore.NewRememberEntitiesStore(client, testCluster, "a//b").Buckets(ctx)
	require.ErrorIs(t, err, shardactor.ErrPermanent)
}

// Capacity: a full bucket is accepted by Consul's default limits, one ID
// more is a clear error and writes nothing.
func TestRememberCapacity(t *testing.T) {
	client := consulagent.Start(t).Client()
	ctx := context.Background()
	s := consulstore.NewRememberEntitiesStore(client, testCluster, "capacity", consulstore.WithRememberBuckets(1))

	// 100-byte IDs take 102 bytes each: 3600 of them are 367,200 bytes,
	// just below the 368,640-byte bucket limit.
	id := func(i int) string { return fmt.Sprintf("%06d-%s", i, strings.Repeat("x", 93)) }
	var ids []string
	for i := range 3600 {
		ids = append(ids, id(i))
	}
	require.Len(t, ids[0], 100)
	require.NoError(t, s.Update(ctx, "0", ids, nil), "a bucket near its limit fits Consul's default request limits")
	testsupport.RequireEntities(t, s, "0", ids...)

	w := s.Writes()
	var more []string
	for i := 3600; i < 3620; i++ {
		more = append(more, id(i))
	}
	err := s.Update(ctx, "0", more, nil)
	require.ErrorIs(t, err, shardactor.ErrTooManyRememberedEntities)
	require.ErrorIs(t, err, shardactor.ErrPermanent)
	t.Log(err)
	require.Equal(t, w, s.Writes(), "nothing written beyond the capacity")
	testsupport.RequireEntities(t, s, "0", ids...)

	// Room again after some stop.
	require.NoError(t, s.Update(ctx, "0", more, ids[:100]))
	testsupport.RequireEntities(t, s, "0", append(slices.Clone(ids[100:]), more...)...)
}

// Transactions are split at 64 operations and at the request size.
func TestRememberTxnSplit(t *testing.T) {
	client := consulagent.Start(t).Client()
	ctx := context.Background()
	ids := testsupport.EntityIDs("split", 10_000)

	many := consulstore.NewRememberEntitiesStore(client, testCluster, "split-ops", consulstore.WithRememberBuckets(100))
	require.NoError(t, many.Update(ctx, "0", ids, nil))
	require.EqualValues(t, 2, many.Writes(), "100 buckets: 64 + 36 operations")
	testsupport.RequireEntities(t, many, "0", ids...)

	small := consulstore.NewRememberEntitiesStore(client, testCluster, "split-bytes", consulstore.WithRememberMaxTxnBytes(64<<10))
	require.NoError(t, small.Update(ctx, "0", ids, nil))
	// 10,000 IDs of 12 bytes: ~140 KB of values, ~190 KB as JSON.
	require.Greater(t, small.Writes(), int64(1))
	require.LessOrEqual(t, small.Writes(), int64(consulstore.DefaultRememberBuckets))
	testsupport.RequireEntities(t, small, "0", ids...)

	tiny := consulstore.NewRememberEntitiesStore(client, testCluster, "split-tiny", consulstore.WithRememberMaxTxnBytes(100))
	require.ErrorIs(t, tiny.Update(ctx, "0", ids[:10], nil), shardactor.ErrTooManyRememberedEntities)
	require.Zero(t, tiny.Writes())
}

// Other writers of the same keys: a store with another number of buckets,
// and damage beyond the bucket values.
func TestRememberChangedBuckets(t *testing.T) {
	client := consulagent.Start(t).Client()
	ctx := context.Background()
	old := consulstore.NewRememberEntitiesStore(client, testCluster, "rebucket", consulstore.WithRememberBuckets(5))
	ids := testsupport.EntityIDs("r", 500)
	require.NoError(t, old.Update(ctx, "0", ids, nil))

	s := consulstore.NewRememberEntitiesStore(client, testCluster, "rebucket")
	testsupport.RequireEntities(t, s, "0", ids...)
	require.NoError(t, s.Update(ctx, "0", ids[:300], nil))
	require.Zero(t, s.Writes(), "IDs in a bucket of the old layout are remembered")
	require.NoError(t, s.Update(ctx, "0", []string{"new"}, ids[:250]))
	testsupport.RequireEntities(t, s, "0", append(slices.Clone(ids[250:]), "new")...)
	require.NoError(t, s.Update(ctx, "0", nil, append(slices.Clone(ids[250:]), "new")))
	testsupport.RequireEntities(t, s, "0")
	pairs, _, err := client.KV().List(consulstore.RememberEntitiesPrefix(testCluster, "rebucket", "0"), nil)
	require.NoError(t, err)
	require.Empty(t, pairs, "old buckets emptied and deleted")
}

func TestRememberCorruptValues(t *testing.T) {
	client := consulagent.Start(t).Client()
	ctx := context.Background()
	s := consulstore.NewRememberEntitiesStore(client, testCluster, "corrupt")
	put := func(shard, suffix string, value []byte) {
		_, err := client.KV().Put(&api.KVPair{Key: consulstore.RememberEntitiesPrefix(testCluster, "corrupt", shard) + suffix, Value: value}, nil)
		require.NoError(t, err)
	}
	marshal := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		require.NoError(t, err)
		return b
	}
	put("unsorted", "0", marshal(&messages.RememberedEntities{EntityIds: []string{"b", "a"}}))
	put("duplicate", "0", marshal(&messages.RememberedEntities{EntityIds: []string{"a", "a"}}))
	put("empty-id", "0", marshal(&messages.RememberedEntities{EntityIds: []string{""}}))
	put("unknown-field", "0", append(marshal(&messages.RememberedEntities{EntityIds: []string{"a"}}), 0x10, 0x01))
	put("bad-utf8", "0", []byte{0x0a, 0x01, 0xff})
	put("stray-key", "notabucket", marshal(&messages.RememberedEntities{EntityIds: []string{"a"}}))
	put("padded-bucket", "01", marshal(&messages.RememberedEntities{EntityIds: []string{"a"}}))
	for _, shard := range []string{"unsorted", "duplicate", "empty-id", "unknown-field", "bad-utf8", "stray-key", "padded-bucket"} {
		_, err := s.GetEntities(ctx, shard)
		require.ErrorIs(t, err, shardactor.ErrCorruptRememberedEntities, shard)
		require.ErrorIs(t, s.Update(ctx, shard, []string{"z"}, nil), shardactor.ErrCorruptRememberedEntities, shard)
	}
	require.Zero(t, s.Writes())

	// An empty value is an empty bucket (someone else wrote it empty).
	put("empty-value", "3", nil)
	testsupport.RequireEntities(t, s, "empty-value")
	require.NoError(t, s.Update(ctx, "empty-value", []string{"z"}, nil))
	testsupport.RequireEntities(t, s, "empty-value", "z")
}

func TestRememberBadTypeName(t *testing.T) {
	client := consulagent.Start(t).Client()
	for _, typeName := range []string{"", "a//b", "..", "a/./b", "/a"} {
		s := consulstore.NewRememberEntitiesStore(client, testCluster, typeName)
		require.ErrorIs(t, s.Update(context.Background(), "0", []string{"a"}, nil), shardactor.ErrPermanent, "type %q", typeName)
		_, err := s.GetEntities(context.Background(), "0")
		require.ErrorIs(t, err, shardactor.ErrPermanent, "type %q", typeName)
	}
	// Without a cluster name its keys would be every unnamed cluster's.
	s := consulstore.NewRememberEntitiesStore(client, "", "Counter")
	require.ErrorIs(t, s.Update(context.Background(), "0", []string{"a"}, nil), shardactor.ErrPermanent)
	_, err := s.Buckets(context.Background())
	require.ErrorIs(t, err, shardactor.ErrPermanent)
	keys, _, err := client.KV().Keys("protoshard/", "", nil)
	require.NoError(t, err)
	require.Empty(t, keys)
}

// Two clusters with an entity type of the same name remember apart.
func TestRememberTwoClustersKeepApart(t *testing.T) {
	client := consulagent.Start(t).Client()
	ctx := context.Background()
	a := consulstore.NewRememberEntitiesStore(client, "app-a", "Counter")
	b := consulstore.NewRememberEntitiesStore(client, "app-b", "Counter")
	require.Equal(t, "app-a", a.ClusterName())
	require.Equal(t, "Counter", a.TypeName())
	require.NoError(t, a.Update(ctx, "0", []string{"x"}, nil))
	require.NoError(t, b.Update(ctx, "0", []string{"y"}, nil))
	got, err := a.GetEntities(ctx, "0")
	require.NoError(t, err)
	require.Equal(t, []string{"x"}, got)
	buckets, err := b.Buckets(ctx)
	require.NoError(t, err)
	require.Len(t, buckets, 1)
	require.Equal(t, []string{"y"}, buckets[0].EntityIDs)
	require.True(t, strings.HasPrefix(buckets[0].Key, "protoshard/app-b/sharding/Counter/entities/0/"), buckets[0].Key)
}

// What Consul will never accept is a permanent error; a Consul that cannot
// be reached is not.
func TestRememberPermanentErrors(t *testing.T) {
	client := consulagent.Start(t).Client()
	ctx := context.Background()
	s := consulstore.NewRememberEntitiesStore(client, testCluster, "permanent")

	// One ID larger than a bucket may be.
	huge := strings.Repeat("x", consulstore.DefaultRememberMaxBucketBytes)
	err := s.Update(ctx, "0", []string{"small", huge}, nil)
	require.ErrorIs(t, err, shardactor.ErrTooManyRememberedEntities)
	require.ErrorIs(t, err, shardactor.ErrPermanent)
	testsupport.RequireEntities(t, s, "0")

	// Allowed by the store's own limits, refused by Consul's (413).
	loose := consulstore.NewRememberEntitiesStore(client, testCluster, "permanent",
		consulstore.WithRememberMaxBucketBytes(4<<20), consulstore.WithRememberMaxTxnBytes(8<<20))
	err = loose.Update(ctx, "1", []string{strings.Repeat("y", 1<<20)}, nil)
	require.ErrorIs(t, err, shardactor.ErrPermanent)
	t.Log(err)
	testsupport.RequireEntities(t, s, "1")

	cfg := api.DefaultConfig()
	cfg.Address = "127.0.0.1:1" // nothing listens there
	down, err := api.NewClient(cfg)
	require.NoError(t, err)
	unreachable := consulstore.NewRememberEntitiesStore(down, testCluster, "permanent")
	err = unreachable.Update(ctx, "0", []string{"a"}, nil)
	require.Error(t, err)
	require.NotErrorIs(t, err, shardactor.ErrPermanent, "an unreachable Consul may come back")
	_, err = unreachable.GetEntities(ctx, "0")
	require.Error(t, err)
	require.NotErrorIs(t, err, shardactor.ErrPermanent)
}

// A writer that loses a check-and-set race reads again and keeps the
// winner's change.
func TestRememberRetryOnConflict(t *testing.T) {
	client := consulagent.Start(t).Client()
	ctx := context.Background()
	// Far more contention than the two writers of a hand-off race, so more
	// attempts than the default: the test is about losing nothing.
	opts := []consulstore.RememberOption{consulstore.WithRememberBuckets(1), consulstore.WithRememberMaxAttempts(100)}
	a := consulstore.NewRememberEntitiesStore(client, testCluster, "race", opts...)
	b := consulstore.NewRememberEntitiesStore(client, testCluster, "race", opts...)
	require.NoError(t, a.Update(ctx, "0", []string{"seed"}, nil))

	// Eight writers on one key: every round, one transaction wins and the
	// others retry against its index.
	var wg sync.WaitGroup
	var failures atomic.Int64
	var want []string
	for g := range 8 {
		s := a
		if g%2 == 1 {
			s = b
		}
		ids := testsupport.EntityIDs(fmt.Sprintf("w%d", g), 10)
		want = append(want, ids...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, id := range ids {
				if err := s.Update(ctx, "0", []string{id}, nil); err != nil {
					failures.Add(1)
					t.Errorf("update %s: %v", id, err)
				}
			}
		}()
	}
	wg.Wait()
	require.Zero(t, failures.Load())
	testsupport.RequireEntities(t, a, "0", append(want, "seed")...)
	writes := a.Writes() + b.Writes()
	t.Logf("80 single-ID updates from 8 writers took %d transactions (%d lost a race)", writes-1, writes-81)

}

// The store measures a transaction's body exactly as the Consul client
// sends it: at a budget of Consul's default txn_max_req_len (512 KiB), the
// largest bucket the store sends is accepted, and one base64 step (3 raw
// bytes, 4 in JSON) more is refused by Consul itself.
func TestRememberTxnSizeMatchesConsul(t *testing.T) {
	client := consulagent.Start(t).Client()
	ctx := context.Background()
	const consulTxnMaxReqLen = 512 << 10
	s := consulstore.NewRememberEntitiesStore(client, testCluster, "txnsize", consulstore.WithRememberBuckets(1),
		consulstore.WithRememberMaxBucketBytes(1<<20), consulstore.WithRememberMaxTxnBytes(consulTxnMaxReqLen))
	// One ID of length n: the largest n the store sends at this budget.
	lo, hi := 300_000, 400_000 // lo fits, hi does not
	trial := 0
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		trial++
		err := s.Update(ctx, fmt.Sprintf("probe-%03d", trial), []string{strings.Repeat("x", mid)}, nil)
		if err == nil {
			lo = mid
			continue
		}
		require.ErrorIs(t, err, shardactor.ErrTooManyRememberedEntities)
		hi = mid
	}
	t.Logf("largest single ID in one bucket at a %d-byte transaction: %d bytes", consulTxnMaxReqLen, lo)

	over := consulstore.NewRememberEntitiesStore(client, testCluster, "txnsize", consulstore.WithRememberBuckets(1),
		consulstore.WithRememberMaxBucketBytes(1<<20), consulstore.WithRememberMaxTxnBytes(2*consulTxnMaxReqLen))
	// A shard name of the probes' length: the key is in the body too.
	err := over.Update(ctx, "probe-999", []string{strings.Repeat("x", lo+3)}, nil)
	require.Error(t, err, "Consul must refuse a body one base64 step larger")
	require.NotErrorIs(t, err, shardactor.ErrTooManyRememberedEntities)
	require.Contains(t, err.Error(), "too large")
}

// BenchmarkRememberEntities10k stores 10,000 IDs in one shard in
// bursts of 100, as a shard batches the starts that arrive while its
// previous write is in flight.
func BenchmarkRememberEntities10k(b *testing.B) {
	client := consulagent.Start(b).Client()
	ctx := context.Background()
	const total, burst = 10_000, 100
	ids := make([]string, total)
	for i := range ids {
		// UUID-sized IDs, like most real entity IDs.
		ids[i] = fmt.Sprintf("%08x-0000-4000-8000-%012d", i*2654435761%(1<<32), i)
	}
	var writes int64
	var elapsed time.Duration
	runs := 0
	for b.Loop() {
		runs++
		i := runs
		s := consulstore.NewRememberEntitiesStore(client, testCluster, fmt.Sprintf("bench-%d", i))
		start := time.Now()
		for j := 0; j < total; j += burst {
			if err := s.Update(ctx, "0", ids[j:j+burst], nil); err != nil {
				b.Fatal(err)
			}
		}
		elapsed += time.Since(start)
		writes += s.Writes()
		got, err := s.GetEntities(ctx, "0")
		if err != nil || len(got) != total {
			b.Fatalf("stored %d IDs (err %v), want %d", len(got), err, total)
		}
	}
	n := float64(runs) * total
	b.ReportMetric(float64(writes)/n, "writes/entity")
	b.ReportMetric(n/elapsed.Seconds(), "entities/s")
}
