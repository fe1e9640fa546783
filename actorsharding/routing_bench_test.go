package actorsharding_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/raceflag"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
)

const (
	benchEntities = 1000
	benchShards   = 100
	benchTimeout  = time.Minute
)

// benchCount counts the Pings the entities receive and signals when a
// target is reached; one per benchmark node, shared by all its entities.
type benchCount struct {
	n      atomic.Int64
	target atomic.Int64
	done   atomic.Pointer[chan struct{}]
}

// expect resets the count and returns a channel closed once n more Pings
// have arrived.
func (c *benchCount) expect(n int64) <-chan struct{} {
	ch := make(chan struct{})
	c.n.Store(0)
	c.target.Store(n)
	c.done.Store(&ch)
	if n <= 0 {
		close(ch)
	}
	return ch
}

func (c *benchCount) hit() {
	if c.n.Add(1) == c.target.Load() {
		if ch := c.done.Load(); ch != nil {
			close(*ch)
		}
	}
}

// benchEntityProps is the entity of the routing benchmarks, sharded or
// plain: it counts every Ping and answers it with a Pong (a fire-and-forget
// Ping has no sender and gets no answer).
func benchEntityProps(count *benchCount) *actor.Props {
	return actor.PropsFromFunc(func(ctx actor.Context) {
		if p, ok := ctx.Message().(*testpb.Ping); ok {
			count.hit()
			if ctx.Sender() != nil {
				ctx.Respond(&testpb.Pong{EntityId: p.EntityId, Seq: p.Seq})
			}
		}
	})
}

// benchNode is one node, started as Example starts it, with a region of
// benchEntities entities in benchShards shards (all started and their shard
// homes known) and the same number of plain actors of the same entity type
// for the direct baseline.
type benchNode struct {
	system *actor.ActorSystem
	region *actor.PID
	// pings[i] is the Ping to entity i; the same message values go through
	// the region and directly, so only the routing differs.
	pings  []*testpb.Ping
	direct []*actor.PID // plain actor i stands for entity i
	count  *benchCount
}

func newBenchNode(b *testing.B) *benchNode {
	b.Helper()
	if raceflag.Enabled {
		b.Skip("several proto.actor remotes in one process race on grpc's global logger; runs in the non-race pass")
	}
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	b.Cleanup(system.Shutdown)
	quarantine := membership.NewQuarantine()
	r := remote.NewRemote(system, remote.Configure("127.0.0.1", 0, quarantine.RemoteOption()))
	r.Start() // before membership: members are known by their address
	b.Cleanup(func() { r.Shutdown(false) })

	cluster := membership.NewCluster(system, local.NewRegistry().Provider(), membership.Config{Quarantine: quarantine})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cluster.Join(ctx); err != nil {
		b.Fatalf("join: %v", err)
	}
	sharding, err := actorsharding.New(system, cluster)
	if err != nil {
		b.Fatal(err)
	}
	n := &benchNode{system: system, count: &benchCount{}}
	props := benchEntityProps(n.count)
	n.region, err = sharding.StartRegion("BenchRouting", props, actorsharding.NewHashCodeMessageExtractor(benchShards))
	if err != nil {
		b.Fatalf("start region: %v", err)
	}
	for i := range benchEntities {
		n.pings = append(n.pings, &testpb.Ping{EntityId: fmt.Sprintf("entity-%04d", i), Seq: int64(i), From: "bench"})
		n.direct = append(n.direct, system.Root.Spawn(props))
	}

	// Warm up: one request per entity through the region, so every shard
	// is started, its home known to the region and every entity running.
	futures := make([]*actor.Future, benchEntities)
	for i, p := range n.pings {
		futures[i] = system.Root.RequestFuture(n.region, p, benchTimeout)
	}
	for i, f := range futures {
		if _, err := f.Result(); err != nil {
			b.Fatalf("warm-up of entity %d: %v", i, err)
		}
	}
	shards := map[string]bool{}
	ex := actorsharding.NewHashCodeMessageExtractor(benchShards)
	for _, p := range n.pings {
		shards[ex.ShardID(p.EntityId)] = true
	}
	if len(shards) != benchShards {
		b.Fatalf("the %d entities fall into %d shards, want %d", benchEntities, len(shards), benchShards)
	}
	// And the direct actors, so both sides start from running actors.
	for i, pid := range n.direct {
		if _, err := system.Root.RequestFuture(pid, n.pings[i], benchTimeout).Result(); err != nil {
			b.Fatalf("warm-up of plain actor %d: %v", i, err)
		}
	}
	return n
}

// sendAll sends b.N Pings, round robin over the entities, to target(i) and
// waits until the entities have received them all.
func (n *benchNode) sendAll(b *testing.B, target func(i int) *actor.PID) {
	b.Helper()
	b.ReportAllocs()
	done := n.count.expect(int64(b.N))
	b.ResetTimer()
	for i := range b.N {
		e := i % benchEntities
		n.system.Root.Send(target(e), n.pings[e])
	}
	select {
	case <-done:
	case <-time.After(benchTimeout):
		b.Fatalf("only %d of %d messages arrived", n.count.n.Load(), b.N)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkRegionRouting measures fire-and-forget messages per second
// through a region on one node (region -> shard -> entity), against the
// same messages sent straight to plain actors (direct). Read the ratio of
// the two msgs/s figures.
func BenchmarkRegionRouting(b *testing.B) {
	n := newBenchNode(b)
	b.Run("region", func(b *testing.B) {
		n.sendAll(b, func(int) *actor.PID { return n.region })
	})
	b.Run("direct", func(b *testing.B) {
		n.sendAll(b, func(e int) *actor.PID { return n.direct[e] })
	})
}

// BenchmarkRegionRequestResponse measures one RequestFuture round trip at
// a time, through the region and straight to plain actors.
func BenchmarkRegionRequestResponse(b *testing.B) {
	n := newBenchNode(b)
	run := func(b *testing.B, target func(e int) *actor.PID) {
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			e := i % benchEntities
			res, err := n.system.Root.RequestFuture(target(e), n.pings[e], benchTimeout).Result()
			if err != nil {
				b.Fatal(err)
			}
			if _, ok := res.(*testpb.Pong); !ok {
				b.Fatalf("answer %T, want *testpb.Pong", res)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	}
	b.Run("region", func(b *testing.B) {
		run(b, func(int) *actor.PID { return n.region })
	})
	b.Run("direct", func(b *testing.B) {
		run(b, func(e int) *actor.PID { return n.direct[e] })
	})
}
