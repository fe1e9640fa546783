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
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/testkit"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// heldEntity processes reliable deliveries but confirms them only once it
// is released: an entity that is slow to confirm, or never does.
type heldEntity struct {
	h        *holds
	consumer *delivery.ShardingConsumerController
	pending  []delivery.Delivery
	released bool
}

// holds is what the held entities processed, by entity, and the release.
type holds struct {
	mu        sync.Mutex
	processed map[string][]int64
}

func (h *holds) seqs(id string) []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.processed[id])
}

// release is the message that makes a held entity confirm what it holds
// and everything after it.
var release = wrapperspb.String("release")

func (e *heldEntity) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		id, _ := actorsharding.EntityID(ctx)
		var err error
		e.consumer, err = delivery.NewShardingConsumerController(nil,
			func(ctx actor.Context, d delivery.Delivery) {
				e.h.mu.Lock()
				e.h.processed[id] = append(e.h.processed[id], d.SeqNr)
				e.h.mu.Unlock()
				if e.released {
					_ = e.consumer.Confirm(ctx, d)
					return
				}
				e.pending = append(e.pending, d)
			}, delivery.WithFlowControlWindow(20))
		if err != nil {
			panic(err)
		}
		return
	case *wrapperspb.StringValue:
		if msg.GetValue() == release.GetValue() {
			e.released = true
			for _, d := range e.pending {
				_ = e.consumer.Confirm(ctx, d)
			}
			e.pending = nil
		}
		return
	}
	e.consumer.Receive(ctx)
}

// oneNode joins one node with a region of held entities and returns its
// sharding and the processed record.
func oneNode(t *testing.T, ctx context.Context) (*actorsharding.Sharding, *holds) {
	t.Helper()
	s := joinAlone(t, ctx, actor.NewActorSystem())
	h := &holds{processed: map[string][]int64{}}
	props := actor.PropsFromProducer(func() actor.Actor { return &heldEntity{h: h} })
	if _, err := s.StartRegion("Held", props, actorsharding.NewHashCodeMessageExtractor(10)); err != nil {
		t.Fatal(err)
	}
	return s, h
}

// joinAlone joins system as a cluster of its own, which leaves and shuts
// down when the test ends.
func joinAlone(t *testing.T, ctx context.Context, system *actor.ActorSystem) *actorsharding.Sharding {
	t.Helper()
	if raceflag.Enabled {
		t.Skip("the package's other tests leave remotes behind, which race on grpc's global logger")
	}
	t.Cleanup(system.Shutdown)
	s, err := actorsharding.Join(ctx, system)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Leave(context.Background()) })
	return s
}

// TestFullWindowAndFullBuffer: an entity that confirms nothing gets no
// more than its window (20: the first message, then 19 more stashed in its
// consumer); later messages wait in the producer's buffer, a full buffer
// refuses at once with ErrBufferFull, and nothing is lost: once the entity
// confirms, everything accepted arrives, once and in order, and
// SendWithConfirmation returns only then.
func TestFullWindowAndFullBuffer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, h := oneNode(t, ctx)
	producer, err := delivery.StartShardingProducerController(s, "Held", "p1", delivery.WithBufferSize(5))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = producer.Stop(context.Background()) })

	confirmed := make(chan error, 1)
	go func() { confirmed <- producer.SendWithConfirmation(ctx, "a", wrapperspb.Int64(1)) }()
	testkit.WaitFor(t, 20*time.Second, func() bool { return len(h.seqs("a")) == 1 }, "the first message processed")
	// The first message's Request opens the window; until it arrives the
	// buffer may fill, so these retry.
	for seq := int64(2); seq <= 20; seq++ {
		for {
			err := producer.Send(ctx, "a", wrapperspb.Int64(seq))
			if err == nil {
				break
			}
			if !errors.Is(err, delivery.ErrBufferFull) {
				t.Fatalf("send %d: %v", seq, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// 20 sent, the window is used: 5 more fit in the buffer, not a sixth.
	for seq := int64(21); seq <= 25; seq++ {
		if err := producer.Send(ctx, "a", wrapperspb.Int64(seq)); err != nil {
			t.Fatalf("send %d into the buffer: %v", seq, err)
		}
	}
	err = producer.Send(ctx, "a", wrapperspb.Int64(26))
	if !errors.Is(err, delivery.ErrBufferFull) || !errors.Is(err, deadletter.ErrBufferFull) {
		t.Fatalf("send into a full buffer: %v, want ErrBufferFull", err)
	}
	st, err := producer.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Unconfirmed != 20 || st.Buffered != 5 || st.Accepted != 25 {
		t.Fatalf("stats with a full window and buffer: %+v, want 20 unconfirmed, 5 buffered, 25 accepted", st)
	}
	select {
	case err := <-confirmed:
		t.Fatalf("SendWithConfirmation returned %v before the entity confirmed", err)
	case <-time.After(300 * time.Millisecond):
	}
	if got := h.seqs("a"); !slices.Equal(got, []int64{1}) {
		t.Fatalf("processed %v while the first is not confirmed, want [1]", got)
	}

	ref, err := s.EntityRefFor("Held", "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := ref.Send(release); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-confirmed:
		if err != nil {
			t.Fatalf("SendWithConfirmation: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("SendWithConfirmation did not return after the entity confirmed")
	}
	testkit.WaitFor(t, 20*time.Second, func() bool {
		st, _ = producer.Stats(ctx)
		return st.Confirmed == 25
	}, "25 confirmed: %+v", testkit.Lazy(func() any { return st }))
	if err := producer.Send(ctx, "a", wrapperspb.Int64(26)); err != nil {
		t.Fatalf("send once the buffer drained: %v", err)
	}
	testkit.WaitFor(t, 20*time.Second, func() bool {
		st, _ = producer.Stats(ctx)
		return st.Confirmed == 26
	}, "26 confirmed: %+v", testkit.Lazy(func() any { return st }))
	want := make([]int64, 26)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if got := h.seqs("a"); !slices.Equal(got, want) {
		t.Fatalf("processed %v, want 1..26 once each, in order", got)
	}
}

// TestProducerStopDropsUnconfirmed: a producer that stops drops what its
// entities have not confirmed, sent or buffered, each with a dead-letter
// event saying so, and a waiting SendWithConfirmation fails.
func TestProducerStopDropsUnconfirmed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, h := oneNode(t, ctx)
	var mu sync.Mutex
	var dropped []int64
	sub := s.System().EventStream.Subscribe(func(e any) {
		if d, ok := e.(*deadletter.Event); ok && errors.Is(d.Err, delivery.ErrProducerStopped) {
			if m, ok := d.Message.(*messages.SequencedMessage); ok {
				mu.Lock()
				dropped = append(dropped, m.GetSeqNr())
				mu.Unlock()
			}
		}
	})
	t.Cleanup(func() { s.System().EventStream.Unsubscribe(sub) })
	producer, err := delivery.StartShardingProducerController(s, "Held", "p1")
	if err != nil {
		t.Fatal(err)
	}
	confirmed := make(chan error, 1)
	go func() { confirmed <- producer.SendWithConfirmation(ctx, "b", wrapperspb.Int64(1)) }()
	testkit.WaitFor(t, 20*time.Second, func() bool { return len(h.seqs("b")) == 1 }, "the first message processed")
	for seq := int64(2); seq <= 3; seq++ {
		if err := producer.Send(ctx, "b", wrapperspb.Int64(seq)); err != nil {
			t.Fatal(err)
		}
	}
	if err := producer.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-confirmed:
		if !errors.Is(err, delivery.ErrProducerStopped) {
			t.Fatalf("SendWithConfirmation after Stop: %v, want ErrProducerStopped", err)
		}
	case <-ctx.Done():
		t.Fatal("SendWithConfirmation still waits after Stop")
	}
	testkit.WaitFor(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(dropped) >= 3
	}, "three dead-letter events")
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(dropped)
	if !slices.Equal(dropped, []int64{1, 2, 3}) {
		t.Fatalf("dead letters for seqNrs %v, want 1, 2 and 3", dropped)
	}
}

// TestEntityGoneForLong: while no node can host the entities' shards,
// their first messages stay unconfirmed and are resent, and the rest wait
// in the buffer; once a node of the role joins, every message arrives,
// once and in order.
func TestEntityGoneForLong(t *testing.T) {
	if raceflag.Enabled {
		t.Skip("several remotes in one process race on grpc's global logger")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n, perEntity = 3, 10
	l := newLedger()
	cluster := testkit.NewCluster(t, nil)
	front := cluster.StartNode()
	fs, err := actorsharding.New(front.System, front.Membership)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.StartProxy("Late", actorsharding.NewHashCodeMessageExtractor(10), actorsharding.WithRole("late")); err != nil {
		t.Fatal(err)
	}
	producer, err := delivery.StartShardingProducerController(fs, "Late", "p1",
		delivery.WithResendFirstUnconfirmedIdleTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = producer.Stop(context.Background()) })
	for seq := int64(1); seq <= perEntity; seq++ {
		for i := range n {
			if err := producer.Send(ctx, fmt.Sprintf("e-%d", i), wrapperspb.Int64(seq)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Gone for a while: the first of each entity is resent, nothing
	// arrives, nothing is dropped by the producer.
	var st delivery.ProducerStats
	testkit.WaitFor(t, 30*time.Second, func() bool {
		st, _ = producer.Stats(ctx)
		return st.Resent >= n
	}, "the first messages resent while no node hosts the entities: %+v", testkit.Lazy(func() any { return st }))
	if st.Unconfirmed != n || st.Buffered != n*(perEntity-1) || st.Confirmed != 0 {
		t.Fatalf("stats while the entities are gone: %+v, want %d unconfirmed, %d buffered", st, n, n*(perEntity-1))
	}

	host := cluster.StartNode(testkit.WithRoles("late"))
	hs, err := actorsharding.New(host.System, host.Membership)
	if err != nil {
		t.Fatal(err)
	}
	props := actor.PropsFromProducer(func() actor.Actor { return &entity{l: l} })
	if _, err := hs.StartRegion("Late", props, actorsharding.NewHashCodeMessageExtractor(10), actorsharding.WithRole("late")); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 60*time.Second, func() bool {
		st, _ = producer.Stats(ctx)
		return st.Confirmed == n*perEntity
	}, "every message confirmed once a node hosts the entities: %+v, processed %v", testkit.Lazy(func() any { return st }),
		testkit.Lazy(func() any {
			l.mu.Lock()
			defer l.mu.Unlock()
			return l.processed
		}))
	if again := judge(t, l, n, perEntity); again != 0 {
		t.Fatalf("%d messages processed twice by one incarnation", again)
	}
	t.Logf("producer: %+v", st)
}

// TestReliableDeliveryAcrossPassivation: entities passivated when idle
// (200ms) between bursts start again on their next message; with stored
// progress each message is processed once, in order, and nothing is
// lost. A passivated entity acknowledges what it confirmed as it stops: the
// producer learns it without waiting for its idle resend (a minute here).
func TestReliableDeliveryAcrossPassivation(t *testing.T) {
	if raceflag.Enabled {
		t.Skip("the package's other tests leave remotes behind, which race on grpc's global logger")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n, perEntity = 10, 12
	l := newLedger()
	system := actor.NewActorSystem()
	t.Cleanup(system.Shutdown)
	s, err := actorsharding.Join(ctx, system)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Leave(context.Background()) })
	props := actor.PropsFromProducer(func() actor.Actor { return &entity{l: l, storeProgress: true} })
	if _, err := s.StartRegion("Idle", props, actorsharding.NewHashCodeMessageExtractor(10),
		actorsharding.WithPassivationIdleTimeout(200*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	producer, err := delivery.StartShardingProducerController(s, "Idle", "p1",
		delivery.WithResendFirstUnconfirmedIdleTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = producer.Stop(context.Background()) })
	for seq := int64(1); seq <= perEntity; seq++ {
		for i := range n {
			if err := producer.Send(ctx, fmt.Sprintf("e-%d", i), wrapperspb.Int64(seq)); err != nil {
				t.Fatal(err)
			}
		}
		if seq%3 == 0 {
			time.Sleep(600 * time.Millisecond) // idle: the entities passivate
		}
	}
	var st delivery.ProducerStats
	testkit.WaitFor(t, 30*time.Second, func() bool {
		st, _ = producer.Stats(ctx)
		return st.Confirmed == n*perEntity
	}, "every message confirmed: %+v", testkit.Lazy(func() any { return st }))
	l.mu.Lock()
	starts := l.starts
	l.mu.Unlock()
	if starts < 2*n {
		t.Fatalf("%d incarnations of %d entities: they did not passivate between bursts", starts, n)
	}
	if again := judge(t, l, n, perEntity); again != 0 {
		t.Fatalf("%d messages processed twice with stored progress", again)
	}
	t.Logf("producer: %+v; %d incarnations", st, starts)
}

// TestSendsRacingStop: Sends from several goroutines while the producer
// stops. Each Send that returned nil was accepted, and the entities
// confirm nothing, so each such message, and only those, ends as a
// dead-letter event for the stop: none is lost without one, whether the
// controller had numbered it or it still waited for the controller.
func TestSendsRacingStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, _ := oneNode(t, ctx)
	var mu sync.Mutex
	dropped := map[int64]int{}
	sub := s.System().EventStream.Subscribe(func(e any) {
		d, ok := e.(*deadletter.Event)
		if !ok || !errors.Is(d.Err, delivery.ErrProducerStopped) {
			return
		}
		var v int64
		switch m := d.Message.(type) {
		case *messages.SequencedMessage: // numbered, unconfirmed
			var i wrapperspb.Int64Value
			if err := m.GetMessage().UnmarshalTo(&i); err != nil {
				t.Errorf("dead letter %v: %v", m, err)
				return
			}
			v = i.GetValue()
		case *wrapperspb.Int64Value: // accepted, not yet numbered
			v = m.GetValue()
		default:
			t.Errorf("dead letter of %T", d.Message)
			return
		}
		mu.Lock()
		dropped[v]++
		mu.Unlock()
	})
	t.Cleanup(func() { s.System().EventStream.Unsubscribe(sub) })
	producer, err := delivery.StartShardingProducerController(s, "Held", "p1", delivery.WithBufferSize(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	const senders, entities = 4, 50
	accepted := make([][]int64, senders)
	var wg sync.WaitGroup
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(0); ; i++ {
				v := int64(g)<<40 | i
				err := producer.Send(ctx, fmt.Sprintf("e-%d", i%entities), wrapperspb.Int64(v))
				switch {
				case errors.Is(err, delivery.ErrBufferFull):
					time.Sleep(time.Millisecond) // not accepted
					continue
				case errors.Is(err, delivery.ErrProducerStopped):
					return
				case err != nil:
					t.Errorf("send: %v", err)
					return
				}
				accepted[g] = append(accepted[g], v)
			}
		}()
	}
	// The buffer has room for all: Sends queue up while the controller
	// takes them, and still do while it stops.
	time.Sleep(20 * time.Millisecond)
	if err := producer.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	total := 0
	for _, a := range accepted {
		total += len(a)
	}
	testkit.WaitFor(t, 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(dropped) >= total
	}, "%d dead-letter events for %d accepted messages", testkit.Lazy(func() any {
		mu.Lock()
		defer mu.Unlock()
		return len(dropped)
	}), total)
	mu.Lock()
	defer mu.Unlock()
	for _, a := range accepted {
		for _, v := range a {
			if dropped[v] != 1 {
				t.Fatalf("accepted message %x: %d dead-letter events, want 1", v, dropped[v])
			}
		}
	}
	if len(dropped) != total {
		t.Fatalf("%d messages dead-lettered, %d accepted", len(dropped), total)
	}
	t.Logf("%d accepted, each dropped once at the stop", total)
}
