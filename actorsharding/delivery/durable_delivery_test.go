package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/consul/api"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/actorsharding/consulstore"
	"github.com/protoshard/protoshard/actorsharding/delivery"
	"github.com/protoshard/protoshard/internal/raceflag"
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
	if raceflag.Enabled {
		t.Skip("several remotes in one process race on grpc's global logger")
	}
	l := newLedger()
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
	queue, err := delivery.OpenFileQueue(dir, "p1")
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
	p, err := delivery.StartShardingProducerController(s, "Reliable", "p1", delivery.WithDurableQueue(queue))
	if err != nil {
		t.Fatal(err)
	}
	return node, p
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
		q, err := delivery.OpenFileQueue(dir, "p1")
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
			if wiped {
				c.waitProcessed(t, n, perEntity/2+1, perEntity)
			} else {
				c.waitProcessed(t, n, 1, perEntity)
			}
			// Read once everything is processed: just after its Sends, the
			// new producer may still hold most of them in its buffer.
			st, _ = p2.Stats(ctx)
			t.Logf("second producer: %+v", st)
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

// slowQueue is a queue whose StoreMessageSent takes a while, as a
// Consul write that is retried does.
type slowQueue struct {
	delivery.DurableProducerQueue
	delay time.Duration
}

func (q slowQueue) StoreMessageSent(ctx context.Context, sent []*messages.MessageSent) error {
	time.Sleep(q.delay)
	return q.DurableProducerQueue.StoreMessageSent(ctx, sent)
}

// TestSendErrorMeansNotAccepted: a Send whose context ends while its
// message is being stored waits for the write and reports it stored, and a
// Send whose context ended before the controller took the message reports
// an error and the message is never delivered: an error always means "not
// accepted", so sending again cannot deliver a message twice.
func TestSendErrorMeansNotAccepted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, h := oneNode(t, ctx)
	p, err := delivery.StartShardingProducerController(s, "Held", "p1",
		delivery.WithDurableQueue(slowQueue{delivery.NewMemoryQueue(), 300 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	sctx, scancel := context.WithTimeout(ctx, 50*time.Millisecond)
	start := time.Now()
	err = p.Send(sctx, "a", wrapperspb.Int64(1))
	scancel()
	if err != nil {
		t.Fatalf("Send whose context ended during the write: %v, want nil once stored", err)
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Fatalf("Send returned after %v, before the write ended", took)
	}
	testkit.WaitFor(t, 20*time.Second, func() bool { return len(h.seqs("a")) == 1 }, "the stored message processed")

	// Sends with a context that has ended: each is either taken (nil, and
	// delivered) or given up (an error, and never delivered).
	ended, cancelEnded := context.WithCancel(ctx)
	cancelEnded()
	var accepted int
	for range 40 {
		err := p.Send(ended, "b", wrapperspb.Int64(1))
		switch {
		case err == nil:
			accepted++
		case !errors.Is(err, context.Canceled):
			t.Fatalf("Send with an ended context: %v", err)
		}
	}
	// The held entity confirms nothing: it processes the first and keeps
	// the rest stashed (the window is 20), so count what it got by then.
	if accepted > 0 {
		testkit.WaitFor(t, 20*time.Second, func() bool { return len(h.seqs("b")) == 1 }, "the first accepted message processed")
	}
	st, err := p.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Accepted != int64(1+accepted) {
		t.Fatalf("%d Sends returned nil, the controller accepted %d: %+v", accepted, st.Accepted-1, st)
	}
	t.Logf("with an ended context: %d of 40 accepted", accepted)
}

// TestFencedControllerKeepsTheHoldersClaim: a controller that could not
// claim the queue (another holds it) stops without releasing the claim, so
// a third one is fenced too and the first goes on.
func TestFencedControllerKeepsTheHoldersClaim(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q := delivery.NewMemoryQueue()
	// One producer ID on three nodes, one queue.
	start := func() *delivery.ShardingProducerController {
		s, _ := oneNode(t, ctx)
		p, err := delivery.StartShardingProducerController(s, "Held", "p1", delivery.WithDurableQueue(q))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Stop(context.Background()) })
		return p
	}
	a := start()
	if err := a.Send(ctx, "x", wrapperspb.Int64(1)); err != nil {
		t.Fatal(err)
	}
	b := start()
	if err := b.Send(ctx, "x", wrapperspb.Int64(2)); !errors.Is(err, delivery.ErrQueueFenced) {
		t.Fatalf("second controller: %v, want ErrQueueFenced", err)
	}
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	c := start()
	if err := c.Send(ctx, "y", wrapperspb.Int64(3)); !errors.Is(err, delivery.ErrQueueFenced) {
		t.Fatalf("third controller after the second stopped: %v, want ErrQueueFenced", err)
	}
	if err := a.Send(ctx, "x", wrapperspb.Int64(4)); err != nil {
		t.Fatalf("the holder after the others stopped: %v", err)
	}
}

// A Consul queue made for another cluster (or entity type) would share
// that cluster's keys: the controller refuses it before it claims anything.
func TestProducerRefusesAQueueOfAnotherCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, _ := oneNode(t, ctx)
	// Nothing listens here: a request would fail, not hang.
	client, err := api.NewClient(&api.Config{Address: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range []delivery.DurableProducerQueue{
		consulstore.NewDurableProducerQueue(client, s.Cluster().Name()+"-other", "Held", "p1"),
		consulstore.NewDurableProducerQueue(client, s.Cluster().Name(), "Other", "p1"),
	} {
		_, err := delivery.StartShardingProducerController(s, "Held", "p1", delivery.WithDurableQueue(q))
		if !errors.Is(err, actorsharding.ErrStoreMismatch) {
			t.Errorf("queue %d: %v, want ErrStoreMismatch", i, err)
		}
	}
}
