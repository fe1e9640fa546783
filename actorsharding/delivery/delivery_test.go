package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/actorsharding/delivery"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/raceflag"
	"github.com/protoshard/protoshard/membership/local"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/testkit"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// ledger is what the entities processed, and, for the entities that store
// their progress, that progress: both written together, as an entity's
// own store would.
type ledger struct {
	mu        sync.Mutex
	processed map[string][]int64 // entity -> seqNrs in the order processed
	payloads  map[string][]int64 // entity -> the messages' values, in the same order
	progress  map[string]*messages.ConsumerProgress
	starts    int      // entity incarnations started
	short     int      // messages that came in short form
	dropped   []string // the dead letters' reasons
}

func newLedger() *ledger {
	return &ledger{processed: map[string][]int64{}, progress: map[string]*messages.ConsumerProgress{}}
}

func (l *ledger) seqs(id string) []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.processed[id])
}

// entity is a sharded entity that takes reliable deliveries; with
// storeProgress it stores its progress with each message's effect and
// restores it when it starts.
type entity struct {
	l             *ledger
	storeProgress bool
	consumer      *delivery.ShardingConsumerController
}

func (e *entity) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); ok {
		id, _ := actorsharding.EntityID(ctx)
		var restored *messages.ConsumerProgress
		e.l.mu.Lock()
		e.l.starts++
		if e.storeProgress {
			restored = e.l.progress[id]
		}
		e.l.mu.Unlock()
		var err error
		e.consumer, err = delivery.NewShardingConsumerController(restored,
			func(ctx actor.Context, d delivery.Delivery) {
				e.l.mu.Lock()
				e.l.processed[id] = append(e.l.processed[id], d.SeqNr)
				if v, ok := d.Message.(*wrapperspb.Int64Value); ok {
					if e.l.payloads == nil {
						e.l.payloads = map[string][]int64{}
					}
					e.l.payloads[id] = append(e.l.payloads[id], v.GetValue())
				}
				if e.storeProgress {
					e.l.progress[id] = e.consumer.ProgressAfter(d)
				}
				e.l.mu.Unlock()
				if err := e.consumer.Confirm(ctx, d); err != nil {
					panic(err) // the test entity confirms only what it got
				}
			}, delivery.WithFlowControlWindow(8))
		if err != nil {
			panic(err)
		}
		return
	}
	if m, ok := ctx.Message().(*messages.SequencedMessage); ok && m.GetMessage() == nil && m.GetTypeId() != 0 {
		e.l.mu.Lock()
		e.l.short++
		e.l.mu.Unlock()
	}
	if e.consumer != nil {
		e.consumer.Receive(ctx)
	}
}

// runRebalance sends perEntity messages to each of n entities from a
// producer on the first of two nodes while a third node joins and takes
// shards; it returns the ledger once every message is confirmed. No
// message becomes a dead letter: planned moves lose none, and what the
// consumers discard (duplicates, out of order) the producer sent again.
func runRebalance(t *testing.T, storeProgress bool, n, perEntity int) *ledger {
	t.Helper()
	if raceflag.Enabled {
		t.Skip("several remotes in one process race on grpc's global logger")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	registry := local.NewRegistry()
	l := newLedger()
	props := actor.PropsFromProducer(func() actor.Actor { return &entity{l: l, storeProgress: storeProgress} })
	start := func() *actorsharding.Sharding {
		system := actor.NewActorSystem()
		system.EventStream.Subscribe(func(e any) {
			if d, ok := e.(*deadletter.Event); ok {
				l.mu.Lock()
				l.dropped = append(l.dropped, d.Reason)
				l.mu.Unlock()
			}
		})
		t.Cleanup(system.Shutdown)
		s, err := actorsharding.Join(ctx, system, actorsharding.WithMembership(registry.Provider()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Leave(context.Background()) })
		if _, err := s.StartRegion("Reliable", props, actorsharding.NewHashCodeMessageExtractor(20),
			actorsharding.WithRebalanceInterval(100*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := start()
	start()
	producer, err := delivery.StartShardingProducerController(a, "Reliable", "p1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = producer.Stop(context.Background()) })
	// Half the rounds; then a third node joins, and the other half goes
	// on while shards move to it: their entities start again there.
	sendRounds(ctx, t, producer, n, 1, perEntity/2)
	// Every entity runs (so its shard has its home) before the third node
	// joins: what it gets, it gets by moves.
	testkit.WaitFor(t, 60*time.Second, func() bool {
		for i := range n {
			if len(l.seqs(fmt.Sprintf("e-%d", i))) == 0 {
				return false
			}
		}
		return true
	}, "every entity to process a message")
	start()
	// The coordinator moves shards to it (a rebalance round every 100ms);
	// a moved shard starts again at the new node on its next message.
	for seq := perEntity/2 + 1; seq <= perEntity; seq++ {
		sendRounds(ctx, t, producer, n, seq, seq)
		time.Sleep(50 * time.Millisecond)
	}
	total := int64(n * perEntity)
	var st delivery.ProducerStats
	testkit.WaitFor(t, 90*time.Second, func() bool {
		st, _ = producer.Stats(ctx)
		return st.Confirmed >= total
	}, "all %d messages confirmed: %+v", total, testkit.Lazy(func() any { return st }))
	t.Logf("producer: %+v", st)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.starts <= n {
		t.Fatalf("%d entity incarnations for %d entities: no entity moved, the test shows nothing", l.starts, n)
	}
	if l.short == 0 {
		t.Fatal("no message reached an entity on another node in short form")
	}
	t.Logf("%d entity incarnations for %d entities", l.starts, n)
	if len(l.dropped) > 0 {
		t.Errorf("%d dead letters, first: %s", len(l.dropped), l.dropped[0])
	}
	return l
}

// sendRounds sends the values from..to to each of n entities, waiting
// while the buffer is full.
func sendRounds(ctx context.Context, t *testing.T, p *delivery.ShardingProducerController, n, from, to int) {
	t.Helper()
	for v := from; v <= to; v++ {
		for i := range n {
			for {
				err := p.Send(ctx, fmt.Sprintf("e-%d", i), wrapperspb.Int64(int64(v)))
				if err == nil {
					break
				}
				if !errors.Is(err, delivery.ErrBufferFull) || ctx.Err() != nil {
					t.Fatal(err)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
}

// judge checks that each entity processed 1..perEntity, each new one in
// order; it returns how many were processed again.
func judge(t *testing.T, l *ledger, n, perEntity int) (again int) {
	t.Helper()
	for i := range n {
		id := fmt.Sprintf("e-%d", i)
		seqs := l.seqs(id)
		var high int64
		for _, s := range seqs {
			switch {
			case s == high+1:
				high = s
			case s <= high:
				again++
			default:
				t.Errorf("%s processed %d after %d (none of %d..%d): %v", id, s, high, high+1, s-1, seqs)
				return again
			}
		}
		if high != int64(perEntity) {
			t.Errorf("%s processed up to %d of %d: %v", id, high, perEntity, seqs)
		}
	}
	return again
}

// TestReliableDeliveryAcrossRebalance: every message reaches its entity in
// order although shards move; processed again only what an entity that
// moved had processed but not yet confirmed to the producer.
func TestReliableDeliveryAcrossRebalance(t *testing.T) {
	l := runRebalance(t, false, 30, 40)
	t.Logf("processed again after moves: %d", judge(t, l, 30, 40))
}

// TestReliableDeliveryWithStoredProgress: an entity that stores its
// progress with its effects processes no message twice.
func TestReliableDeliveryWithStoredProgress(t *testing.T) {
	l := runRebalance(t, true, 30, 40)
	if again := judge(t, l, 30, 40); again != 0 {
		t.Fatalf("%d messages processed twice with stored progress", again)
	}
}

// TestReliableDeliveryAcrossCrash: a node hosting entities crashes while
// a producer on another node sends; its entities start again elsewhere,
// and the producer resends what they had not confirmed. Nothing is lost,
// each entity's messages come in order, and entities that store their
// progress with their effects process none twice.
func TestReliableDeliveryAcrossCrash(t *testing.T) {
	testReliableDeliveryAcross(t, "crash", func(t *testing.T, n *testkit.Node) { n.Crash() })
}

// TestReliableDeliveryAcrossLeave: the same with a graceful leave of the
// node instead of a crash.
func TestReliableDeliveryAcrossLeave(t *testing.T) {
	testReliableDeliveryAcross(t, "leave", func(t *testing.T, n *testkit.Node) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := n.Leave(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func testReliableDeliveryAcross(t *testing.T, fault string, inject func(*testing.T, *testkit.Node)) {
	for _, storeProgress := range []bool{false, true} {
		t.Run(fmt.Sprintf("stored progress %v", storeProgress), func(t *testing.T) {
			const n, perEntity = 30, 40
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			l := newLedger()
			props := actor.PropsFromProducer(func() actor.Actor { return &entity{l: l, storeProgress: storeProgress} })
			cluster := testkit.NewCluster(t, nil)
			var shardings []*actorsharding.Sharding
			for range 3 {
				node := cluster.StartNode()
				s, err := actorsharding.New(node.System, node.Membership)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.StartRegion("Reliable", props, actorsharding.NewHashCodeMessageExtractor(20)); err != nil {
					t.Fatal(err)
				}
				shardings = append(shardings, s)
			}
			cluster.WaitConverged(t, 30*time.Second)
			// Every region registered, so that shards go to all three.
			region0, _ := shardings[0].Region("Reliable")
			testkit.WaitFor(t, 30*time.Second, func() bool {
				res, err := shardings[0].System().Root.RequestFuture(region0, &messages.GetCurrentRegions{}, 5*time.Second).Result()
				regions, ok := res.(*messages.CurrentRegions)
				return err == nil && ok && len(regions.GetAddresses()) == 3
			}, "three regions registered")
			// The producer on the oldest node, which also runs the
			// coordinator: the crash takes the youngest.
			producer, err := delivery.StartShardingProducerController(shardings[0], "Reliable", "p1")
			if err != nil {
				t.Fatal(err)
			}
			defer producer.Stop(context.Background())
			for seq := 1; seq <= perEntity; seq++ {
				sendRounds(ctx, t, producer, n, seq, seq)
				if seq == perEntity/2 {
					// The younger node that hosts more shards.
					victim, most := 1, -1
					for i := 1; i < 3; i++ {
						region, _ := shardings[i].Region("Reliable")
						res, err := shardings[i].System().Root.RequestFuture(region, &messages.GetShardRegionStats{}, 5*time.Second).Result()
						if st, ok := res.(*messages.ShardRegionStats); err == nil && ok && len(st.GetStats()) > most {
							victim, most = i, len(st.GetStats())
						}
					}
					t.Logf("%s of node %d (%d shards)", fault, victim, most)
					inject(t, cluster.Nodes()[victim])
				}
				time.Sleep(10 * time.Millisecond)
			}
			var st delivery.ProducerStats
			testkit.WaitFor(t, 90*time.Second, func() bool {
				st, _ = producer.Stats(ctx)
				return st.Confirmed >= n*perEntity
			}, "all %d messages confirmed: %+v", n*perEntity, testkit.Lazy(func() any { return st }))
			l.mu.Lock()
			starts := l.starts
			l.mu.Unlock()
			if starts <= n {
				t.Fatalf("%d entity incarnations for %d entities: no entity lived on the node of the %s", starts, n, fault)
			}
			again := judge(t, l, n, perEntity)
			t.Logf("producer: %+v; %d incarnations; processed again: %d", st, starts, again)
			if storeProgress && again != 0 {
				t.Fatalf("%d messages processed twice with stored progress", again)
			}
		})
	}
}
