package actorsharding_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/actorsharding/consulstore"
	"github.com/protoshard/protoshard/internal/consulagent"
	"github.com/protoshard/protoshard/internal/testpb"
	leaseconsul "github.com/protoshard/protoshard/lease/consul"
	"github.com/protoshard/protoshard/membership/consul"
	"github.com/protoshard/protoshard/singleton"
)

// Two applications on one Consul, each a cluster of its own service with
// an entity type Counter, set up as docs/sharding.md shows (coordinator
// state and remembered entities in Consul, the coordinator's singleton under a
// Consul lease): every key lives under its cluster's name, so neither
// disturbs the other. Each answers every request from its own entities,
// and no coordinator stops as stale or fails a write.
func TestTwoClustersShareOneConsul(t *testing.T) {
	skipUnderRace(t)
	agent := consulagent.Start(t)
	logs := &lockedBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	services := []string{"app-a", "app-b"}
	nodes := map[string][]*actorsharding.Sharding{}
	for _, service := range services {
		for i := range 2 {
			nodes[service] = append(nodes[service], startCounterNode(ctx, t, agent.Client(), service, fmt.Sprintf("%s-%d", service, i), logs))
		}
	}

	// Each node of each cluster asks its own cluster's entities, round
	// after round, both clusters at once.
	const entities = 20
	const sendFor = 6 * time.Second
	type outcome struct {
		service        string
		answered, fail int
		firstFailure   string
	}
	results := make(chan outcome, 4)
	deadline := time.Now().Add(sendFor)
	for _, service := range services {
		for _, s := range nodes[service] {
			go func() {
				o := outcome{service: service}
				// A failure ends the sender: the test fails anyway, and
				// more requests that time out would only make it slow.
				for seq := int64(1); o.fail == 0 && (time.Now().Before(deadline) || seq == 1); seq++ {
					for e := range entities {
						if err := askCounter(s, fmt.Sprintf("e-%d", e), seq, service); err != nil {
							o.fail, o.firstFailure = 1, err.Error()
							break
						}
						o.answered++
					}
				}
				results <- o
			}()
		}
	}
	answered := map[string]int{}
	for range 4 {
		o := <-results
		if o.fail > 0 {
			t.Errorf("cluster %s: a request failed after %d answered: %s", o.service, o.answered, o.firstFailure)
		}
		answered[o.service] += o.answered
	}
	t.Logf("answered in %v: %v", sendFor, answered)
	for _, service := range services {
		if answered[service] < 2*entities {
			t.Errorf("cluster %s answered %d requests, want at least %d", service, answered[service], 2*entities)
		}
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=ERROR") && strings.Contains(line, `msg="shard coordinator:`) {
			t.Errorf("a coordinator stopped: %s", line)
		}
	}

	for _, service := range services {
		for _, s := range nodes[service] {
			if err := s.Leave(ctx); err != nil {
				t.Errorf("%s: leave: %v", service, err)
			}
		}
	}
	// Everything either cluster wrote is under its own name.
	keys, _, err := agent.Client().KV().Keys("", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, service := range services {
		own := "protoshard/" + service + "/"
		var state, remembered bool
		for _, k := range keys {
			state = state || k == consulstore.StateKey(service, "Counter")
			remembered = remembered || strings.HasPrefix(k, own+"sharding/Counter/entities/")
		}
		if !state || !remembered {
			t.Errorf("cluster %s: coordinator state stored %v, remembered entities stored %v; keys %q", service, state, remembered, keys)
		}
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "protoshard/app-a/") && !strings.HasPrefix(k, "protoshard/app-b/") {
			t.Errorf("key %s lies outside both clusters' keys", k)
		}
	}
}

// startCounterNode joins a node to the cluster of Consul service service
// and starts its Counter region the way of docs/sharding.md; its logs at
// WARN and above go to logs.
func startCounterNode(ctx context.Context, t *testing.T, client *api.Client, service, name string, logs *lockedBuffer) *actorsharding.Sharding {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})).With(slog.String("node", name))
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	t.Cleanup(system.Shutdown)
	provider, err := consul.New(consul.WithClient(client), consul.WithServiceName(service), consul.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	sharding, err := actorsharding.Join(ctx, system, actorsharding.WithMembership(provider))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sharding.Leave(context.Background()) })
	cluster := sharding.Cluster().Name()
	leases, err := leaseconsul.NewProvider(cluster,
		leaseconsul.WithClient(client),
		leaseconsul.WithHeartbeatTimeout(10*time.Second), leaseconsul.WithHeartbeatInterval(time.Second),
		leaseconsul.WithOperationTimeout(2*time.Second), leaseconsul.WithLockDelay(3*time.Second),
		leaseconsul.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	props := actor.PropsFromProducer(func() actor.Actor { return &clusterCounter{cluster: cluster} })
	_, err = sharding.StartRegion("Counter", props, actorsharding.NewHashCodeMessageExtractor(10),
		actorsharding.WithStateStore(consulstore.NewStateStore(client, cluster, "Counter")),
		actorsharding.WithRememberEntities(consulstore.NewRememberEntitiesStore(client, cluster, "Counter")),
		actorsharding.WithCoordinatorSingleton(singleton.WithLease(leases), singleton.WithLeaseRetryInterval(200*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	return sharding
}

// askCounter asks entity id of s's cluster for its count, and checks that
// the answer comes from an entity of that cluster.
func askCounter(s *actorsharding.Sharding, id string, seq int64, cluster string) error {
	ref, err := s.EntityRefFor("Counter", id)
	if err != nil {
		return err
	}
	res, err := ref.Request(context.Background(), &testpb.Ping{EntityId: id, Seq: seq})
	if err != nil {
		return fmt.Errorf("entity %s, request %d: %w", id, seq, err)
	}
	pong, ok := res.(*testpb.Pong)
	if !ok || pong.GetEntityId() != id || pong.GetSeq() != seq || pong.GetNode() != cluster {
		return fmt.Errorf("entity %s, request %d of cluster %s: answer %v", id, seq, cluster, res)
	}
	return nil
}

// clusterCounter answers every Ping with a Pong that names its cluster.
type clusterCounter struct {
	cluster string
	count   int
}

func (c *clusterCounter) Receive(ctx actor.Context) {
	if p, ok := ctx.Message().(*testpb.Ping); ok {
		c.count++
		ctx.Respond(&testpb.Pong{EntityId: p.GetEntityId(), Seq: p.GetSeq(), Node: c.cluster, Incarnation: fmt.Sprint(c.count)})
	}
}

// lockedBuffer is a bytes.Buffer for several goroutines' logs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
