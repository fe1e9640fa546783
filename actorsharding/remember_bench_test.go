package actorsharding_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/actorsharding/consulstore"
	"github.com/protoshard/protoshard/internal/consulagent"
	"github.com/protoshard/protoshard/internal/raceflag"
	"github.com/protoshard/protoshard/membership/local"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/testkit"
)

// BenchmarkRememberEntities10kConsul starts 10,000 remembered entities in
// one shard with the Consul remember-entities store, then crashes the node
// and lets a new node start them all again from the store. It reports the
// Consul KV writes per entity of the first start and the entities started
// per second, first and on recovery. Run it with
//
//	go test -run '^$' -bench RememberEntities10k -benchtime 1x ./actorsharding
func BenchmarkRememberEntities10kConsul(b *testing.B) {
	if raceflag.Enabled {
		b.Skip("several proto.actor remotes in one process race on grpc's global logger")
	}
	const entities = 10000
	agent := consulagent.Start(b)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		typ := fmt.Sprintf("Bench%d-%d", time.Now().UnixNano(), i)
		store := consulstore.NewRememberEntitiesStore(agent.Client(), local.DefaultName, typ)
		coordinatorStore := consulstore.NewStateStore(agent.Client(), local.DefaultName, typ)
		cluster := testkit.NewCluster(b, testkit.NewLocalBackend())
		var started atomic.Int64
		props := actor.PropsFromFunc(func(ctx actor.Context) {
			if _, ok := ctx.Message().(*actor.Started); ok {
				started.Add(1)
			}
		})
		startRegion := func() (*testkit.Node, *actor.PID) {
			n := cluster.StartNode()
			s, err := actorsharding.New(n.System, n.Membership)
			if err != nil {
				b.Fatal(err)
			}
			region, err := s.StartRegion(typ, props, actorsharding.NewHashCodeMessageExtractor(1),
				actorsharding.WithRememberEntities(store), actorsharding.WithStateStore(coordinatorStore),
				actorsharding.WithRetryInterval(200*time.Millisecond))
			if err != nil {
				b.Fatal(err)
			}
			return n, region
		}
		waitStarted := func(want int64) {
			deadline := time.Now().Add(5 * time.Minute)
			for started.Load() < want {
				if time.Now().After(deadline) {
					b.Fatalf("only %d of %d entities started", started.Load(), want)
				}
				time.Sleep(time.Millisecond)
			}
		}
		n, region := startRegion()

		b.StartTimer()
		t0 := time.Now()
		for e := 0; e < entities; e++ {
			n.System.Root.Send(region, &messages.StartEntity{EntityId: fmt.Sprintf("entity-%05d", e)})
		}
		waitStarted(entities)
		first := time.Since(t0)
		writes := store.Writes()

		n.Crash()
		started.Store(0)
		t1 := time.Now()
		startRegion()
		waitStarted(entities)
		recovery := time.Since(t1)
		b.StopTimer()

		b.ReportMetric(float64(writes)/entities, "KV-writes/entity")
		b.ReportMetric(entities/first.Seconds(), "entities/s-first-start")
		b.ReportMetric(entities/recovery.Seconds(), "entities/s-recovery")
		b.Logf("%d entities in one shard: first start %v with %d Consul KV writes (%.4f per entity); recovery from the store after a crash %v",
			entities, first.Round(time.Millisecond), writes, float64(writes)/entities, recovery.Round(time.Millisecond))
		for _, node := range cluster.Running() {
			node.Crash()
		}
	}
}
