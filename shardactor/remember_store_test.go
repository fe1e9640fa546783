package shardactor_test

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

	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/shardactor"
	"github.com/protoshard/protoshard/testkit/consulagent"
)

// rememberStore is a store under test with its write counter.
type rememberStore interface {
	shardactor.RememberEntitiesStore
	Writes() int64
}

// rememberImpl describes one implementation for the contract test.
type rememberImpl struct {
	// newStore returns a fresh, empty store (its own key space).
	newStore func(t *testing.T) rememberStore
	// maxBurstWrites is what one Update of any number of new IDs into an
	// empty shard may cost at most.
	maxBurstWrites int64
	// corrupt damages the stored entities of shardID, so that reading them
	// must fail; nil when the store keeps nothing serialised.
	corrupt func(t *testing.T, s rememberStore, shardID string)
}

func TestRememberEntitiesStoreContractMemory(t *testing.T) {
	runRememberContract(t, rememberImpl{
		newStore:       func(*testing.T) rememberStore { return shardactor.NewMemoryRememberEntitiesStore() },
		maxBurstWrites: 1,
	})
}

func TestRememberEntitiesStoreContractConsul(t *testing.T) {
	client := consulagent.Start(t).Client()
	var n atomic.Int64
	stores := map[rememberStore]string{}
	var mu sync.Mutex
	runRememberContract(t, rememberImpl{
		newStore: func(t *testing.T) rememberStore {
			// A type name per test keeps the tests apart in one agent.
			typeName := fmt.Sprintf("contract-%d", n.Add(1))
			s := shardactor.NewConsulRememberEntitiesStore(client, typeName)
			mu.Lock()
			stores[s] = typeName
			mu.Unlock()
			return s
		},
		maxBurstWrites: shardactor.DefaultRememberBuckets,
		corrupt: func(t *testing.T, s rememberStore, shardID string) {
			mu.Lock()
			typeName := stores[s]
			mu.Unlock()
			pairs, _, err := client.KV().List(shardactor.ConsulRememberEntitiesPrefix(typeName, shardID), nil)
			require.NoError(t, err)
			require.NotEmpty(t, pairs, "nothing stored to corrupt")
			_, err = client.KV().Put(&api.KVPair{Key: pairs[0].Key, Value: []byte("\xff\xffnot a bucket")}, nil)
			require.NoError(t, err)
		},
	})
}

// runRememberContract is the behaviour every RememberEntitiesStore shares.
func runRememberContract(t *testing.T, impl rememberImpl) {
	ctx := context.Background()

	t.Run("RememberEmptyShard", func(t *testing.T) {
		s := impl.newStore(t)
		ids, err := s.GetEntities(ctx, "0")
		require.NoError(t, err)
		require.Empty(t, ids)
		require.NoError(t, s.Update(ctx, "0", nil, nil))
		require.Zero(t, s.Writes(), "an empty update writes nothing")
	})

	t.Run("RememberAddRemove", func(t *testing.T) {
		s := impl.newStore(t)
		require.NoError(t, s.Update(ctx, "7", []string{"c", "a", "b"}, nil))
		requireEntities(t, s, "7", "a", "b", "c")
		require.NoError(t, s.Update(ctx, "7", []string{"d"}, []string{"b"}))
		requireEntities(t, s, "7", "a", "c", "d")
		require.NoError(t, s.Update(ctx, "7", nil, []string{"a", "c", "d"}))
		requireEntities(t, s, "7")
		require.NoError(t, s.Update(ctx, "7", []string{"b"}, nil))
		requireEntities(t, s, "7", "b")
	})

	t.Run("RememberIdempotent", func(t *testing.T) {
		s := impl.newStore(t)
		require.NoError(t, s.Update(ctx, "1", []string{"x", "y", "x"}, nil))
		w := s.Writes()
		require.NoError(t, s.Update(ctx, "1", []string{"x", "y"}, nil), "adding remembered IDs")
		require.NoError(t, s.Update(ctx, "1", nil, []string{"unknown"}), "removing an unknown ID")
		require.NoError(t, s.Update(ctx, "other", nil, []string{"x"}), "removing from an empty shard")
		require.Equal(t, w, s.Writes(), "updates that change nothing write nothing")
		requireEntities(t, s, "1", "x", "y")
		require.NoError(t, s.Update(ctx, "1", nil, []string{"x"}))
		require.NoError(t, s.Update(ctx, "1", nil, []string{"x"}))
		requireEntities(t, s, "1", "y")
	})

	t.Run("RememberBurst10k", func(t *testing.T) {
		s := impl.newStore(t)
		ids := entityIDs("burst", 10_000)
		require.NoError(t, s.Update(ctx, "3", ids, nil))
		require.LessOrEqual(t, s.Writes(), impl.maxBurstWrites, "10,000 new IDs in one update")
		requireEntities(t, s, "3", ids...)
		// Removing them all is a burst too.
		w := s.Writes()
		require.NoError(t, s.Update(ctx, "3", nil, ids))
		require.LessOrEqual(t, s.Writes()-w, impl.maxBurstWrites, "10,000 stopped IDs in one update")
		requireEntities(t, s, "3")
	})

	t.Run("RememberOddIDs", func(t *testing.T) {
		s := impl.newStore(t)
		odd := []string{
			"a/b", "/", "//x/", "ünïcødé", "日本語", "🙂", "with space", " ", "%", "%2F", "50%",
			"a\nb", "\t", "\x01", `back\slash`, `"quoted"`, "$1", ".", "..", "a?b#c", "+",
			strings.Repeat("long/", 2000), strings.Repeat("ü", 5000),
		}
		shards := []string{"plain", "a/b", "..", ".", "%", "%2F", "s p", "ü", "/"}
		for _, sh := range shards {
			require.NoError(t, s.Update(ctx, sh, append([]string{"shard:" + sh}, odd...), nil), "shard %q", sh)
		}
		for _, sh := range shards {
			requireEntities(t, s, sh, append([]string{"shard:" + sh}, odd...)...)
		}
		require.NoError(t, s.Update(ctx, "a/b", nil, odd))
		requireEntities(t, s, "a/b", "shard:a/b")
		requireEntities(t, s, "%2F", append([]string{"shard:%2F"}, odd...)...)
	})

	t.Run("RememberShardsIndependent", func(t *testing.T) {
		s := impl.newStore(t)
		// "1" is a prefix of "10", and "1/0" would be a sub-key of "1"
		// without escaping.
		require.NoError(t, s.Update(ctx, "1", []string{"a", "b"}, nil))
		require.NoError(t, s.Update(ctx, "10", []string{"b", "c"}, nil))
		require.NoError(t, s.Update(ctx, "1/0", []string{"d"}, nil))
		require.NoError(t, s.Update(ctx, "1", nil, []string{"b"}))
		requireEntities(t, s, "1", "a")
		requireEntities(t, s, "10", "b", "c")
		requireEntities(t, s, "1/0", "d")
		requireEntities(t, s, "2")
	})

	t.Run("RememberConcurrentUpdates", func(t *testing.T) {
		s := impl.newStore(t)
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		var want []string
		for g := range 2 {
			// Each writer adds batches, and removes every fourth of its
			// own IDs later, as a shard would on passivation.
			var mine []string
			for b := range 30 {
				for i := range 20 {
					id := fmt.Sprintf("g%d-%02d-%02d", g, b, i)
					mine = append(mine, id)
					if i%4 != 0 {
						want = append(want, id)
					}
				}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for b := range 30 {
					started := mine[b*20 : b*20+20]
					var stopped []string
					if b > 0 {
						for i, id := range mine[(b-1)*20 : b*20] {
							if i%4 == 0 {
								stopped = append(stopped, id)
							}
						}
					}
					if err := s.Update(ctx, "hot", started, stopped); err != nil {
						errs <- err
						return
					}
				}
				var last []string
				for i, id := range mine[29*20:] {
					if i%4 == 0 {
						last = append(last, id)
					}
				}
				if err := s.Update(ctx, "hot", nil, last); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		slices.Sort(want)
		requireEntities(t, s, "hot", want...)
	})

	t.Run("RememberCorruptBucket", func(t *testing.T) {
		if impl.corrupt == nil {
			t.Skip("the store keeps nothing serialised")
		}
		s := impl.newStore(t)
		require.NoError(t, s.Update(ctx, "9", entityIDs("c", 100), nil))
		impl.corrupt(t, s, "9")
		_, err := s.GetEntities(ctx, "9")
		require.ErrorIs(t, err, shardactor.ErrCorruptRememberedEntities)
		require.ErrorIs(t, err, shardactor.ErrPermanent, "reading it again finds the same damage")
		require.Contains(t, err.Error(), `shard "9"`)
		w := s.Writes()
		err = s.Update(ctx, "9", entityIDs("more", 100), nil)
		require.ErrorIs(t, err, shardactor.ErrCorruptRememberedEntities)
		require.Equal(t, w, s.Writes(), "nothing written over a damaged bucket")
		_, err = s.GetEntities(ctx, "9")
		require.ErrorIs(t, err, shardactor.ErrCorruptRememberedEntities, "still damaged, not overwritten")
		requireEntities(t, s, "8") // other shards unaffected
	})

	t.Run("RememberCancelledContext", func(t *testing.T) {
		s := impl.newStore(t)
		require.NoError(t, s.Update(ctx, "5", []string{"a"}, nil))
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := s.GetEntities(cctx, "5")
		require.ErrorIs(t, err, context.Canceled)
		require.NotErrorIs(t, err, shardactor.ErrPermanent, "a time-out or cancellation is transient")
		err = s.Update(cctx, "5", []string{"b"}, nil)
		require.ErrorIs(t, err, context.Canceled)
		require.NotErrorIs(t, err, shardactor.ErrPermanent)
		requireEntities(t, s, "5", "a")
	})

	t.Run("RememberInvalidUpdates", func(t *testing.T) {
		// Each is refused for good: repeating it cannot help.
		s := impl.newStore(t)
		require.ErrorIs(t, s.Update(ctx, "", []string{"a"}, nil), shardactor.ErrPermanent, "empty shard ID")
		_, err := s.GetEntities(ctx, "")
		require.ErrorIs(t, err, shardactor.ErrPermanent, "empty shard ID")
		require.ErrorIs(t, s.Update(ctx, "1", []string{"a", ""}, nil), shardactor.ErrPermanent, "empty entity ID")
		require.ErrorIs(t, s.Update(ctx, "1", []string{"a", "\xff"}, nil), shardactor.ErrPermanent, "invalid UTF-8")
		require.ErrorIs(t, s.Update(ctx, "1", []string{"a", "b"}, []string{"b"}), shardactor.ErrPermanent, "started and stopped")
		require.Zero(t, s.Writes())
		requireEntities(t, s, "1")
	})
}

func requireEntities(t *testing.T, s shardactor.RememberEntitiesStore, shardID string, want ...string) {
	t.Helper()
	got, err := s.GetEntities(context.Background(), shardID)
	require.NoError(t, err)
	want = slices.Clone(want)
	slices.Sort(want)
	want = slices.Compact(want)
	if len(want) == 0 {
		require.Empty(t, got, "shard %q", shardID)
		return
	}
	require.Equal(t, want, got, "shard %q", shardID)
}

func entityIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%06d", prefix, i)
	}
	return ids
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
func TestRememberConsulKeyLayout(t *testing.T) {
	client := consulagent.Start(t).Client()
	ctx := context.Background()
	s := shardactor.NewConsulRememberEntitiesStore(client, "layout")

	require.Equal(t, "protoshard/sharding/layout/entities/12/", shardactor.ConsulRememberEntitiesPrefix("layout", "12"))
	require.Equal(t, "protoshard/sharding/layout/entities/a%2Fb/", shardactor.ConsulRememberEntitiesPrefix("layout", "a/b"))
	require.Equal(t, "protoshard/sharding/layout/entities/%2E./", shardactor.ConsulRememberEntitiesPrefix("layout", ".."))
	require.Equal(t, "protoshard/sharding/layout/entities/%25%20%C3%BC/", shardactor.ConsulRememberEntitiesPrefix("layout", "% ü"))

	ids := entityIDs("k", 1000)
	require.NoError(t, s.Update(ctx, "a/b", ids, nil))
	prefix := shardactor.ConsulRememberEntitiesPrefix("layout", "a/b")
	pairs, _, err := client.KV().List(prefix, nil)
	require.NoError(t, err)
	require.Len(t, pairs, shardactor.DefaultRememberBuckets, "1000 IDs fill every bucket")
	var all []string
	for _, p := range pairs {
		b, err := strconv.Atoi(strings.TrimPrefix(p.Key, prefix))
		require.NoError(t, err, p.Key)
		got := decodeBucket(t, p.Value)
		require.True(t, slices.IsSorted(got))
		for _, id := range got {
			require.Equal(t, b, fnvBucket(id, shardactor.DefaultRememberBuckets), "ID %s in bucket %d", id, b)
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
func TestRememberConsulBuckets(t *testing.T) {
	client := consulagent.Start(t).Client()
	ctx := context.Background()
	s := shardactor.NewConsulRememberEntitiesStore(client, "listed")
	require.NoError(t, s.Update(ctx, "a/b", []string{"x", "y"}, nil))
	require.NoError(t, s.Update(ctx, "..", []string{"z"}, nil))
	// Another type whose name makes its keys begin with this type's prefix.
	other := shardactor.NewConsulRememberEntitiesStore(client, "listed/entities/a%2Fb")
	require.NoError(t, other.Update(ctx, "0", []string{"o"}, nil))
	_, err := client.KV().Put(&api.KVPair{Key: "protoshard/sharding/listed/entities/a%2Fb/coordinator-state", Value: []byte("x")}, nil)
	require.NoError(t, err)
	_, err = client.KV().Put(&api.KVPair{Key: shardactor.ConsulRememberEntitiesPrefix("listed", "bad") + "2", Value: []byte{0xff}}, nil)
	require.NoError(t, err)

	buckets, err := s.Buckets(ctx)
	require.NoError(t, err)
	got := map[string][]string{}
	for _, b := range buckets {
		require.NotZero(t, b.ModifyIndex, b.Key)
		require.True(t, strings.HasPrefix(b.Key, shardactor.ConsulRememberEntitiesPrefix("listed", b.ShardID)), b.Key)
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
	require.True(t, slices.IsSortedFunc(buckets, func(a, b shardactor.ConsulRememberedBucket) int { return strings.Compare(a.Key, b.Key) }))

	empty, err := shardactor.NewConsulRememberEntitiesStore(client, "none").Buckets(ctx)
	require.NoError(t, err)
	require.Empty(t, empty)
	_, err = shardactor.NewConsulRememberEntitiesStore(client, "a//b").Buckets(ctx)
	require.ErrorIs(t, err, shardactor.ErrPermanent)
}

// Capacity: a full bucket is accepted by Consul's default limits, one ID
// more is a clear error and writes nothing.
func TestRememberConsulCapacity(t *testing.T) {
	client := consulagent.Start(t).Client()
	ctx := context.Background()
	s := shardactor.NewConsulRememberEntitiesStore(client, "capacity", shardactor.WithRememberBuckets(1))

	// 100-byte IDs take 102 bytes each: 3600 of them are 367,200 bytes,
	// just below the 368,640-byte bucket limit.
	id := func(i int) string { return fmt.Sprintf("%06d-%s", i, strings.Repeat("x", 93)) }
	var ids []string
	for i := range 3600 {
		ids = append(ids, id(i))
	}
	require.Len(t, ids[0], 100)
	require.NoError(t, s.Update(ctx, "0", ids, nil), "a bucket near its limit fits Consul's default request limits")
	requireEntities(t, s, "0", ids...)

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
	requireEntities(t, s, "0", ids...)

	// Room again after some stop.
	require.NoError(t, s.Update(ctx, "0", more, ids[:100]))
	requireEntities(t, s, "0", append(slices.Clone(ids[100:]), more...)...)
}

// Transactions are split at 64 operations and at the request size.
func TestRememberConsulTxnSplit(t *testing.T) {
	client := consulagent.Start(t).Client()
	ctx := context.Background()
	ids := entityIDs("split", 10_000)

	many := shardactor.NewConsulRememberEntitiesStore(client, "split-ops", shardactor.WithRememberBuckets(100))
	require.NoError(t, many.Update(ctx, "0", ids, nil))
	require.EqualValues(t, 2, many.Writes(), "100 buckets: 64 + 36 operations")
	requireEntities(t, many, "0", ids...)

	small := shardactor.NewConsulRememberEntitiesStore(client, "split-bytes", shardactor.WithRememberMaxTxnBytes(64<<10))
	require.NoError(t, small.Update(ctx, "0", ids, nil))
	// 10,000 IDs of 12 bytes: ~140 KB of values, ~190 KB as JSON.
	require.Greater(t, small.Writes(), int64(1))
	require.LessOrEqual(t, small.Writes(), int64(shardactor.DefaultRememberBuckets))
	requireEntities(t, small, "0", ids...)

	tiny := shardactor.NewConsulRememberEntitiesStore(client, "split-tiny", shardactor.WithRememberMaxTxnBytes(100))
	require.ErrorIs(t, tiny.Update(ctx, "0", ids[:10], nil), shardactor.ErrTooManyRememberedEntities)
	require.Zero(t, tiny.Writes())
}

// Other writers of the same keys: a store with another number of buckets,
// and damage beyond the bucket values.
func TestRememberConsulChangedBuckets(t *testing.T) {
	client := consulagent.Start(t).Client()
	ctx := context.Background()
	old := shardactor.NewConsulRememberEntitiesStore(client, "rebucket", shardactor.WithRememberBuckets(5))
	ids := entityIDs("r", 500)
	require.NoError(t, old.Update(ctx, "0", ids, nil))

	s := shardactor.NewConsulRememberEntitiesStore(client, "rebucket")
	requireEntities(t, s, "0", ids...)
	require.NoError(t, s.Update(ctx, "0", ids[:300], nil))
	require.Zero(t, s.Writes(), "IDs in a bucket of the old layout are remembered")
	require.NoError(t, s.Update(ctx, "0", []string{"new"}, ids[:250]))
	requireEntities(t, s, "0", append(slices.Clone(ids[250:]), "new")...)
	require.NoError(t, s.Update(ctx, "0", nil, append(slices.Clone(ids[250:]), "new")))
	requireEntities(t, s, "0")
	pairs, _, err := client.KV().List(shardactor.ConsulRememberEntitiesPrefix("rebucket", "0"), nil)
	require.NoError(t, err)
	require.Empty(t, pairs, "old buckets emptied and deleted")
}

func TestRememberConsulCorruptValues(t *testing.T) {
	client := consulagent.Start(t).Client()
	ctx := context.Background()
	s := shardactor.NewConsulRememberEntitiesStore(client, "corrupt")
	put := func(shard, suffix string, value []byte) {
		_, err := client.KV().Put(&api.KVPair{Key: shardactor.ConsulRememberEntitiesPrefix("corrupt", shard) + suffix, Value: value}, nil)
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
	requireEntities(t, s, "empty-value")
	require.NoError(t, s.Update(ctx, "empty-value", []string{"z"}, nil))
	requireEntities(t, s, "empty-value", "z")
}

func TestRememberConsulBadTypeName(t *testing.T) {
	client := consulagent.Start(t).Client()
	for _, typeName := range []string{"", "a//b", "..", "a/./b", "/a"} {
		s := shardactor.NewConsulRememberEntitiesStore(client, typeName)
		require.ErrorIs(t, s.Update(context.Background(), "0", []string{"a"}, nil), shardactor.ErrPermanent, "type %q", typeName)
		_, err := s.GetEntities(context.Background(), "0")
		require.ErrorIs(t, err, shardactor.ErrPermanent, "type %q", typeName)
	}
}

// What Consul will never accept is a permanent error; a Consul that cannot
// be reached is not.
func TestRememberConsulPermanentErrors(t *testing.T) {
	client := consulagent.Start(t).Client()
	ctx := context.Background()
	s := shardactor.NewConsulRememberEntitiesStore(client, "permanent")

	// One ID larger than a bucket may be.
	huge := strings.Repeat("x", shardactor.DefaultRememberMaxBucketBytes)
	err := s.Update(ctx, "0", []string{"small", huge}, nil)
	require.ErrorIs(t, err, shardactor.ErrTooManyRememberedEntities)
	require.ErrorIs(t, err, shardactor.ErrPermanent)
	requireEntities(t, s, "0")

	// Allowed by the store's own limits, refused by Consul's (413).
	loose := shardactor.NewConsulRememberEntitiesStore(client, "permanent",
		shardactor.WithRememberMaxBucketBytes(4<<20), shardactor.WithRememberMaxTxnBytes(8<<20))
	err = loose.Update(ctx, "1", []string{strings.Repeat("y", 1<<20)}, nil)
	require.ErrorIs(t, err, shardactor.ErrPermanent)
	t.Log(err)
	requireEntities(t, s, "1")

	cfg := api.DefaultConfig()
	cfg.Address = "127.0.0.1:1" // nothing listens there
	down, err := api.NewClient(cfg)
	require.NoError(t, err)
	unreachable := shardactor.NewConsulRememberEntitiesStore(down, "permanent")
	err = unreachable.Update(ctx, "0", []string{"a"}, nil)
	require.Error(t, err)
	require.NotErrorIs(t, err, shardactor.ErrPermanent, "an unreachable Consul may come back")
	_, err = unreachable.GetEntities(ctx, "0")
	require.Error(t, err)
	require.NotErrorIs(t, err, shardactor.ErrPermanent)
}

// A writer that loses a check-and-set race reads again and keeps the
// winner's change.
func TestRememberConsulRetryOnConflict(t *testing.T) {
	client := consulagent.Start(t).Client()
	ctx := context.Background()
	// Far more contention than the two writers of a hand-off race, so more
	// attempts than the default: the test is about losing nothing.
	opts := []shardactor.ConsulRememberOption{shardactor.WithRememberBuckets(1), shardactor.WithRememberMaxAttempts(100)}
	a := shardactor.NewConsulRememberEntitiesStore(client, "race", opts...)
	b := shardactor.NewConsulRememberEntitiesStore(client, "race", opts...)
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
		ids := entityIDs(fmt.Sprintf("w%d", g), 10)
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
	requireEntities(t, a, "0", append(want, "seed")...)
	writes := a.Writes() + b.Writes()
	t.Logf("80 single-ID updates from 8 writers took %d transactions (%d lost a race)", writes-1, writes-81)

}

// The store measures a transaction's body exactly as the Consul client
// sends it: at a budget of Consul's default txn_max_req_len (512 KiB), the
// largest bucket the store sends is accepted, and one base64 step (3 raw
// bytes, 4 in JSON) more is refused by Consul itself.
func TestRememberConsulTxnSizeMatchesConsul(t *testing.T) {
	client := consulagent.Start(t).Client()
	ctx := context.Background()
	const consulTxnMaxReqLen = 512 << 10
	s := shardactor.NewConsulRememberEntitiesStore(client, "txnsize", shardactor.WithRememberBuckets(1),
		shardactor.WithRememberMaxBucketBytes(1<<20), shardactor.WithRememberMaxTxnBytes(consulTxnMaxReqLen))
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

	over := shardactor.NewConsulRememberEntitiesStore(client, "txnsize", shardactor.WithRememberBuckets(1),
		shardactor.WithRememberMaxBucketBytes(1<<20), shardactor.WithRememberMaxTxnBytes(2*consulTxnMaxReqLen))
	// A shard name of the probes' length: the key is in the body too.
	err := over.Update(ctx, "probe-999", []string{strings.Repeat("x", lo+3)}, nil)
	require.Error(t, err, "Consul must refuse a body one base64 step larger")
	require.NotErrorIs(t, err, shardactor.ErrTooManyRememberedEntities)
	require.Contains(t, err.Error(), "too large")
}

// BenchmarkConsulRememberEntities10k stores 10,000 IDs in one shard in
// bursts of 100, as a shard batches the starts that arrive while its
// previous write is in flight.
func BenchmarkConsulRememberEntities10k(b *testing.B) {
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
		s := shardactor.NewConsulRememberEntitiesStore(client, fmt.Sprintf("bench-%d", i))
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
