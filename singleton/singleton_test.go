package singleton_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/singleton"
	"github.com/protoshard/protoshard/testkit"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const (
	key     = "singleton/counter"
	manager = "counter"
	// Generous: this shared 2-core machine is slow at times. The tests
	// wait for events, so a fast run stays fast.
	deadline = 60 * time.Second
)

// backends runs each scenario over in-process membership and over a real
// Consul agent.
var backends = []struct {
	name string
	new  func(t *testing.T) (testkit.Backend, time.Duration)
}{
	{"local", func(t *testing.T) (testkit.Backend, time.Duration) { return testkit.NewLocalBackend(), 0 }},
	{"consul", func(t *testing.T) (testkit.Backend, time.Duration) {
		b := testkit.NewConsulBackend(t)
		return b, b.TTL // removal margin: the check TTL, as recommended
	}},
}

// counter is the test singleton: it writes its life into the ledger,
// records every payload it receives, and answers with its incarnation.
type counter struct {
	f           *fixture
	incarnation string
}

func (c *counter) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		c.f.ledger.Started(key, c.incarnation)
	case *actor.Stopped:
		c.f.ledger.Stopped(key, c.incarnation)
	case *wrapperspb.StringValue:
		c.f.record(msg.Value)
		if ctx.Sender() != nil {
			ctx.Respond(wrapperspb.String(c.incarnation))
		}
	}
}

type fixture struct {
	t        *testing.T
	cluster  *testkit.Cluster
	ledger   *testkit.Ledger
	settings singleton.Settings
	proxies  map[*testkit.Node]*actor.PID

	mu       sync.Mutex
	received map[string]int
}

func newFixture(t *testing.T, backend testkit.Backend, removalMargin time.Duration) *fixture {
	f := &fixture{
		t:        t,
		cluster:  testkit.NewCluster(t, backend),
		ledger:   testkit.NewLedger(),
		proxies:  map[*testkit.Node]*actor.PID{},
		received: map[string]int{},
		settings: singleton.Settings{HandOverRetryInterval: 200 * time.Millisecond, RemovalMargin: removalMargin},
	}
	t.Cleanup(func() { f.ledger.AssertNoOverlap(t) })
	return f
}

func (f *fixture) record(v string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.received[v]++
}

func (f *fixture) count(v string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.received[v]
}

func (f *fixture) startNodes(n int) []*testkit.Node {
	nodes := make([]*testkit.Node, n)
	for i := range nodes {
		nodes[i] = f.startNode()
	}
	f.cluster.WaitConverged(f.t, deadline)
	return nodes
}

func (f *fixture) startNode() *testkit.Node {
	node := f.cluster.StartNode()
	inc := incarnation(node)
	props := actor.PropsFromProducer(func() actor.Actor { return &counter{f: f, incarnation: inc} })
	_, err := singleton.StartManager(node.System, node.Membership, props, manager, f.settings)
	require.NoError(f.t, err)
	proxy, err := singleton.StartProxy(node.System, node.Membership, manager, singleton.ProxySettings{
		SingletonIdentificationInterval: 200 * time.Millisecond,
	})
	require.NoError(f.t, err)
	f.proxies[node] = proxy
	return node
}

func incarnation(n *testkit.Node) string { return n.Name + "/" + n.MemberID() }

// waitSingletonOn waits until exactly the given node's singleton is active.
func (f *fixture) waitSingletonOn(n *testkit.Node) {
	f.t.Helper()
	want := incarnation(n)
	f.ledger.WaitFor(f.t, deadline, func() bool {
		a := f.ledger.Active(key)
		return len(a) == 1 && a[0] == want
	}, "singleton to run on %s only (active: %v)", want, func() []string { return f.ledger.Active(key) })
}

// allProxiesReach asks the singleton through every running node's proxy and
// checks that the answer comes from the expected incarnation.
func (f *fixture) allProxiesReach(on *testkit.Node) {
	f.t.Helper()
	want := incarnation(on)
	for _, n := range f.cluster.Running() {
		proxy := f.proxies[n]
		testkit.WaitFor(f.t, deadline, func() bool {
			res, err := n.System.Root.RequestFuture(proxy, wrapperspb.String("ping from "+n.Name), 5*time.Second).Result()
			if err != nil {
				return false
			}
			got, ok := res.(*wrapperspb.StringValue)
			return ok && got.Value == want
		}, "the proxy on %s to reach the singleton on %s", n.Name, want)
	}
}

func forEachBackend(t *testing.T, test func(t *testing.T, f *fixture)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			backend, margin := b.new(t)
			test(t, newFixture(t, backend, margin))
		})
	}
}

// (a) 3-5 nodes: exactly one singleton, on the oldest; every proxy reaches it.
func TestSingletonRunsOnOldest(t *testing.T) {
	forEachBackend(t, func(t *testing.T, f *fixture) {
		f.startNodes(4)
		oldest := f.cluster.Oldest("")
		f.waitSingletonOn(oldest)
		f.allProxiesReach(oldest)
		require.Equal(t, 1, f.ledger.Starts(key), "the singleton started once")
	})
}

// (b) + (e) the oldest leaves gracefully while messages flow through a
// younger node's proxy: the next oldest takes over, never two at once, and
// every message sent during the hand-over is delivered exactly once.
func TestSingletonGracefulHandOver(t *testing.T) {
	forEachBackend(t, func(t *testing.T, f *fixture) {
		nodes := f.startNodes(3)
		oldest := f.cluster.Oldest("")
		f.waitSingletonOn(oldest)
		f.allProxiesReach(oldest)

		youngest := nodes[len(nodes)-1]
		proxy := f.proxies[youngest]
		const n = 300
		sent := make(chan struct{})
		go func() {
			defer close(sent)
			for i := 0; i < n; i++ {
				youngest.System.Root.Send(proxy, wrapperspb.String(fmt.Sprintf("m-%d", i)))
				time.Sleep(5 * time.Millisecond)
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		require.NoError(t, oldest.Leave(ctx))
		<-sent

		next := f.cluster.Oldest("")
		require.NotEqual(t, oldest, next)
		f.waitSingletonOn(next)
		testkit.WaitFor(t, deadline, func() bool {
			for i := 0; i < n; i++ {
				if f.count(fmt.Sprintf("m-%d", i)) == 0 {
					return false
				}
			}
			return true
		}, "every message sent through the proxy during the hand-over to arrive")
		for i := 0; i < n; i++ {
			require.Equal(t, 1, f.count(fmt.Sprintf("m-%d", i)), "m-%d delivered once", i)
		}
		f.allProxiesReach(next)
		require.Equal(t, 2, f.ledger.Starts(key))
	})
}

// (c) the oldest crashes: the next oldest takes over after failure detection.
func TestSingletonOldestCrashes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, f *fixture) {
		f.startNodes(3)
		oldest := f.cluster.Oldest("")
		f.waitSingletonOn(oldest)
		oldest.Crash()
		next := f.cluster.Oldest("")
		f.waitSingletonOn(next)
		f.allProxiesReach(next)
	})
}

// (d) the three oldest of six crash together: exactly one singleton again,
// on the fourth oldest.
func TestSingletonThreeOldestCrashTogether(t *testing.T) {
	forEachBackend(t, func(t *testing.T, f *fixture) {
		nodes := f.startNodes(6)
		f.waitSingletonOn(nodes[0])
		for _, n := range nodes[:3] {
			n.Crash()
		}
		require.Equal(t, nodes[3], f.cluster.Oldest(""))
		f.waitSingletonOn(nodes[3])
		f.allProxiesReach(nodes[3])
	})
}

// Bad input: a non-protobuf message to the proxy is dropped with a reason,
// and the proxy keeps working. (A nil message never reaches an actor:
// proto.actor's mailbox takes a popped nil for "empty" and loses it.)
func TestProxyRejectsBadInput(t *testing.T) {
	f := newFixture(t, testkit.NewLocalBackend(), 0)
	nodes := f.startNodes(2)
	f.waitSingletonOn(nodes[0])
	events := make(chan string, 10)
	sub := nodes[1].System.EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(interface{ String() string }); ok {
			if _, isDL := evt.(*actor.DeadLetterEvent); !isDL {
				events <- e.String()
			}
		}
	})
	defer nodes[1].System.EventStream.Unsubscribe(sub)
	proxy := f.proxies[nodes[1]]
	nodes[1].System.Root.Send(proxy, struct{ Name string }{"not proto"})
	for i := 0; i < 1; i++ {
		select {
		case e := <-events:
			t.Log(e)
		case <-time.After(deadline):
			t.Fatal("no dead-letter event for a bad message")
		}
	}
	f.allProxiesReach(nodes[0])
}
