package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/actorsharding/delivery"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/testkit"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// queueCluster is two nodes hosting the entities, which store their
// progress, and producer nodes that only route (proxies), started and
// crashed by the test.
type queueCluster struct {
	cluster *testkit.Cluster
	l       *ledger
}

func newQueueCluster(t *testing.T) *queueCluster {
	t.Helper()
	if testkit.RaceEnabled {
		t.Skip("several remotes in one process race on grpc's global logger")
	}
	l := &ledger{processed: map[string][]int64{}, progress: map[string]*messages.ConsumerProgress{}}
	props := actor.PropsFromProducer(func() actor.Actor { return &entity{l: l, storeProgress: true} })
	c := &queueCluster{cluster: testkit.NewCluster(t, nil), l: l}
	for range 2 {
		node := c.cluster.StartNode()
		s, err := actorsharding.New(node.System, node.Membership)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.StartRegion("Reliable", props, actorsharding.NewHashCodeMessageExtractor(20)); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// producerNode starts a node that routes to the entities and a producer
// p1 on it, with the file queue in dir.
func (c *queueCluster) producerNode(t *testing.T, dir string) (*testkit.Node, *delivery.ShardingProducerController) {
	t.Helper()
	queue, err := delivery.OpenFileQueue(dir, "p1", delivery.FileQueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node := c.cluster.StartNode()
	s, err := actorsharding.New(node.System, node.Membership)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartProxy("Reliable", actorsharding.NewHashCodeMessageExtractor(20)); err != nil {
		t.Fatal(err)
	}
	c.cluster.WaitConverged(t, 30*time.Second)
	p, err := delivery.StartShardingProducerController(s, "Reliable", "p1", delivery.ProducerSettings{DurableQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	return node, p
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

// waitProcessed waits until each of n entities processed every value in
// from..to.
func (c *queueCluster) waitProcessed(t *testing.T, n, from, to int) {
	t.Helper()
	missing := ""
	testkit.WaitFor(t, 90*time.Second, func() bool {
		c.l.mu.Lock()
		defer c.l.mu.Unlock()
		for i := range n {
			id := fmt.Sprintf("e-%d", i)
			seen := map[int64]bool{}
			for _, v := range c.l.payloads[id] {
				seen[v] = true
			}
			for v := from; v <= to; v++ {
				if !seen[int64(v)] {
					missing = fmt.Sprintf("%s has not processed %d: %v", id, v, c.l.payloads[id])
					return false
				}
			}
		}
		return true
	}, "every message processed: %s", testkit.Lazy(func() any { return missing }))
}

// twice counts the values an entity processed more than once.
func (c *queueCluster) twice(n int) int {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	again := 0
	for i := range n {
		seen := map[int64]bool{}
		for _, v := range c.l.payloads[fmt.Sprintf("e-%d", i)] {
			if seen[v] {
				again++
			}
			seen[v] = true
		}
	}
	return again
}

// crashProducer crashes the producer's node and waits until its claim on
// the file queue is gone, as the kernel releases a dead process's flock.
func crashProducer(t *testing.T, node *testkit.Node, dir string) {
	t.Helper()
	node.Crash()
	testkit.WaitFor(t, 30*time.Second, func() bool {
		q, err := delivery.OpenFileQueue(dir, "p1", delivery.FileQueueOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = q.LoadState(context.Background())
		_ = q.Close()
		return err == nil
	}, "the crashed producer's claim released")
}

// TestDurableQueueProducerCrash: a producer with a file queue crashes
// while its messages are on their way. A new producer with the same queue
// sends what was not confirmed under its stored numbers before its own
// messages: entities that store their progress lose none and process none
// twice. A new producer whose queue is empty (lost with its disk) numbers
// anew, under new incarnations, and the entities take none of its
// messages for one they processed.
func TestDurableQueueProducerCrash(t *testing.T) {
	for _, wiped := range []bool{false, true} {
		t.Run(fmt.Sprintf("queue wiped %v", wiped), func(t *testing.T) {
			const n, perEntity = 20, 30
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			c := newQueueCluster(t)
			dir := t.TempDir()
			node1, p1 := c.producerNode(t, dir)
			sendRounds(ctx, t, p1, n, 1, perEntity/2)
			// Every entity has progress of the first producer's numbering.
			c.waitProcessed(t, n, 1, 1)
			st, _ := p1.Stats(ctx)
			t.Logf("first producer before its crash: %+v", st)
			crashProducer(t, node1, dir)

			if wiped {
				dir = t.TempDir()
			}
			_, p2 := c.producerNode(t, dir)
			defer p2.Stop(context.Background())
			sendRounds(ctx, t, p2, n, perEntity/2+1, perEntity)
			st, _ = p2.Stats(ctx)
			t.Logf("second producer: %+v", st)
			if wiped {
				c.waitProcessed(t, n, perEntity/2+1, perEntity)
			} else {
				c.waitProcessed(t, n, 1, perEntity)
			}
			if again := c.twice(n); again != 0 {
				t.Errorf("%d messages processed twice", again)
			}
			if wiped {
				return
			}
			if st.Resent+st.Sent <= int64(n*perEntity/2) {
				t.Errorf("the second producer sent nothing of the first's (%+v): the test shows nothing", st)
			}
			// The numbering continued: every entity's seqNrs are its values.
			if again := judge(t, c.l, n, perEntity); again != 0 {
				t.Errorf("%d messages processed twice by seqNr", again)
			}
		})
	}
}

// TestDurableQueueTwoProducersOneID: a second producer with the ID of a
// running one, on the same file queue, is fenced: every Send fails with
// ErrQueueFenced, and the first goes on.
func TestDurableQueueTwoProducersOneID(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newQueueCluster(t)
	dir := t.TempDir()
	_, p1 := c.producerNode(t, dir)
	defer p1.Stop(context.Background())
	sendRounds(ctx, t, p1, 1, 1, 1)
	_, p2 := c.producerNode(t, dir)
	for range 2 {
		if err := p2.Send(ctx, "e-0", wrapperspb.Int64(2)); !errors.Is(err, delivery.ErrQueueFenced) {
			t.Fatalf("second producer's Send: %v, want ErrQueueFenced", err)
		}
	}
	if _, err := p2.Stats(ctx); !errors.Is(err, delivery.ErrQueueFenced) {
		t.Errorf("second producer's Stats: %v, want ErrQueueFenced", err)
	}
	sendRounds(ctx, t, p1, 1, 2, 3)
	c.waitProcessed(t, 1, 1, 3)
}
