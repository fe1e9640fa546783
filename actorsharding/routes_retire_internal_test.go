package actorsharding

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
	"github.com/protoshard/protoshard/messages"
)

// arrivals records, per sender, the sequence numbers in the order they
// reach the shard's home, and whether one came out of order.
type arrivals struct {
	mu       sync.Mutex
	last     map[string]int64
	n        int
	disorder string
}

func (a *arrivals) arrive(p *testpb.Ping) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if last := a.last[p.EntityId]; p.Seq <= last && a.disorder == "" {
		a.disorder = fmt.Sprintf("sender %s: %d arrived after %d", p.EntityId, p.Seq, last)
	}
	a.last[p.EntityId] = p.Seq
	a.n++
}

func arrivedInOrder(a *arrivals) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.disorder == ""
}

// homeProcess is the shard's home on another node: the router's direct
// sends arrive in its mailbox, on the sender's goroutine.
type homeProcess struct {
	arrivals *arrivals
	direct   atomic.Int64
}

func (h *homeProcess) SendUserMessage(_ *actor.PID, m any) {
	env, ok := m.(*messages.ShardingEnvelope)
	if !ok {
		panic(fmt.Sprintf("the home got %T", m))
	}
	p, err := unpackEnvelope(env)
	if err != nil {
		panic(err)
	}
	h.direct.Add(1)
	h.arrivals.arrive(p.(*testpb.Ping))
}
func (h *homeProcess) SendSystemMessage(*actor.PID, any) {}
func (h *homeProcess) Stop(*actor.PID)                   {}

// chanProcess stands for the region actor's mailbox.
type chanProcess chan *routed

func (c chanProcess) SendUserMessage(_ *actor.PID, m any) { c <- m.(*routed) }
func (c chanProcess) SendSystemMessage(*actor.PID, any)   {}
func (c chanProcess) Stop(*actor.PID)                     {}

// TestRouterKeepsOrderWhileRoutesRetire: senders send through the router
// while the region, on its own goroutine, forwards what comes the slow
// way to the shard's home and, while it holds such a message, forgets the
// home and retires the shard's route, or learns the home again (on the
// route that replaced it). Whatever way each message takes, every
// sender's messages reach the home in the order sent. Meaningful under
// -race too.
func TestRouterKeepsOrderWhileRoutesRetire(t *testing.T) {
	system := actor.NewActorSystem()
	table := newRouteTable(system, "T")
	arrived := &arrivals{last: map[string]int64{}}
	home := &homeProcess{arrivals: arrived}
	homePID, _ := system.ProcessRegistry.Add(home, "home")
	mailbox := make(chanProcess, 1<<16)
	cluster := membership.NewCluster(system, local.NewRegistry().Provider(), membership.Config{})
	router := &regionProcess{region: mailbox, table: table, extractor: NewHashCodeMessageExtractor(1), typeName: "T",
		cluster: cluster, stale: membershiphook.Of(cluster).Stale, maxMessageSize: 1 << 20}
	shard := router.extractor.ShardID("any")

	done := make(chan struct{})
	var regionDone sync.WaitGroup
	var retired atomic.Int64
	regionDone.Add(1)
	go func() { // the region actor
		defer regionDone.Done()
		var held *routed // taken from the mailbox, not forwarded yet
		for {
			select {
			case r := <-mailbox:
				held = r
			case <-done:
				if len(mailbox) == 0 && held == nil {
					return
				}
			default:
			}
			// The region forgets the shard's home and retires its route,
			// or learns the home again, between taking a message and
			// forwarding it, as it may between messages of its own.
			sr := table.shard(shard)
			if sr.remote.Load() != nil {
				sr.closeRemote()
				if table.retire(shard, sr) {
					retired.Add(1)
				}
			} else {
				sr.setRemote(homePID, "m1")
			}
			runtime.Gosched()
			if held != nil {
				arrived.arrive(held.message.(*testpb.Ping))
				held.pending.Release()
				held = nil
			}
		}
	}()

	const senders = 2
	var sent atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range senders {
		id, seq := fmt.Sprintf("sender-%d", i), int64(0)
		loopUntil(&wg, stop, func() {
			seq++
			router.SendUserMessage(homePID, &testpb.Ping{EntityId: id, Seq: seq})
			sent.Add(1)
			for len(mailbox) > 0 { // no faster than the region
				runtime.Gosched()
			}
		})
	}
	deadline := time.Now().Add(15 * time.Second)
	for (retired.Load() < 300 || home.direct.Load() < 150) && arrivedInOrder(arrived) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	close(done)
	regionDone.Wait()
	arrived.mu.Lock()
	defer arrived.mu.Unlock()
	t.Logf("%d messages sent, %d directly; the route was retired %d times", sent.Load(), home.direct.Load(), retired.Load())
	if arrived.disorder != "" {
		t.Fatal(arrived.disorder)
	}
	if arrived.n != int(sent.Load()) {
		t.Fatalf("%d messages arrived, %d sent", arrived.n, sent.Load())
	}
	if retired.Load() < 100 || home.direct.Load() < 50 {
		t.Fatal("too few retirements or direct sends: the test proved little")
	}
}
