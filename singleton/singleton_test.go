package singleton_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/consul/api"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/consulkey"
	"github.com/protoshard/protoshard/internal/testsupport"
	"github.com/protoshard/protoshard/lease"
	"github.com/protoshard/protoshard/lease/caslease"
	leaseconsul "github.com/protoshard/protoshard/lease/consul"
	"github.com/protoshard/protoshard/lease/consulcas"
	consulmembership "github.com/protoshard/protoshard/membership/consul"
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
// Consul agent; with use-lease, over the lease that goes with each.
// casLeases is the compare-and-set lease's, run as well.
var backends = []struct {
	name      string
	new       func(t *testing.T) (testkit.Backend, time.Duration)
	leases    func(t *testing.T, b testkit.Backend) *leaseKit
	casLeases func(t *testing.T, b testkit.Backend) *leaseKit
}{
	{"local", func(t *testing.T) (testkit.Backend, time.Duration) { return testkit.NewLocalBackend(), 0 }, memoryLeases, memoryCASLeases},
	{"consul", func(t *testing.T) (testkit.Backend, time.Duration) {
		b := testkit.NewConsulBackend(t)
		return b, b.TTL // removal margin: the check TTL, as recommended
	}, consulLeases, consulCASLeases},
}

// leaseKit is the lease of one backend: the provider every node's manager
// uses, and a way to make the current holder of a lease lose it.
type leaseKit struct {
	provider lease.Provider
	lose     func(t *testing.T, leaseName string)
}

// memoryLeases: in-process leases; a revoked holder keeps others off the
// lease until it released it.
func memoryLeases(*testing.T, testkit.Backend) *leaseKit {
	leases := lease.NewMemoryLeases()
	return &leaseKit{provider: leases, lose: func(t *testing.T, name string) {
		if _, ok := leases.Revoke(name); !ok {
			t.Fatalf("nobody holds the lease %q", name)
		}
	}}
}

// consulLeases: leases on the backend's Consul agent; a holder loses its
// lease when its session is destroyed from outside (Consul's lock delay then
// keeps the lock from everybody, the holder too, for a few seconds).
func consulLeases(t *testing.T, b testkit.Backend) *leaseKit {
	client := b.(*testkit.ConsulBackend).Client()
	p, err := leaseconsul.NewProvider(consulmembership.DefaultServiceName, // the test kit's members' service
		leaseconsul.WithClient(client),
		leaseconsul.WithHeartbeatTimeout(10*time.Second), leaseconsul.WithHeartbeatInterval(time.Second),
		leaseconsul.WithOperationTimeout(2*time.Second), leaseconsul.WithLockDelay(3*time.Second),
		leaseconsul.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	return &leaseKit{provider: p, lose: func(t *testing.T, name string) {
		key := consulkey.LeasePrefix(consulmembership.DefaultServiceName) + name
		pair, _, err := client.KV().Get(key, &api.QueryOptions{RequireConsistent: true})
		require.NoError(t, err)
		require.NotNil(t, pair, "the lock %s", key)
		require.NotEmpty(t, pair.Session, "the lock %s has no holder", key)
		_, err = client.Session().Destroy(pair.Session, nil)
		require.NoError(t, err)
	}}
}

// counter is the test singleton: it writes its life into the ledger,
// records every payload it receives, and answers with its incarnation (the
// node and member, and under a lease "#" and its fencing token, so that two
// runs on one node are two incarnations).
type counter struct {
	f           *fixture
	incarnation string
}

func (c *counter) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		if token, ok := singleton.FencingToken(ctx); ok {
			c.incarnation += fmt.Sprintf("#%d", token)
			c.f.recordToken(token)
		}
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
	options  []singleton.Option // the managers'
	leases   *leaseKit          // nil: no lease
	proxies  map[*testkit.Node]*actor.PID
	managers map[*testkit.Node]*actor.PID
	// singletonProps makes the singleton of a node; nil: a counter.
	singletonProps func(n *testkit.Node) *actor.Props
	// identificationInterval is the proxies' (zero: 200ms).
	identificationInterval time.Duration

	mu       sync.Mutex
	received map[string]int
	tokens   []uint64 // fencing tokens of the singletons, in start order
}

// newFixture: removalMargin zero takes the cluster's margin, negative none.
func newFixture(t *testing.T, backend testkit.Backend, removalMargin time.Duration) *fixture {
	f := &fixture{
		t:        t,
		cluster:  testkit.NewCluster(t, backend),
		ledger:   testkit.NewLedger(),
		proxies:  map[*testkit.Node]*actor.PID{},
		managers: map[*testkit.Node]*actor.PID{},
		received: map[string]int{},
		options:  []singleton.Option{singleton.WithHandOverRetryInterval(200 * time.Millisecond)},
	}
	switch {
	case removalMargin > 0:
		f.options = append(f.options, singleton.WithRemovalMargin(removalMargin))
	case removalMargin < 0:
		f.options = append(f.options, singleton.WithRemovalMargin(0))
	}
	t.Cleanup(func() { f.ledger.AssertNoOverlap(t) })
	return f
}

const leaseRetryInterval = 300 * time.Millisecond

// useLease makes the nodes started from now on run the singleton under the
// lease of kit, retrying a failed acquisition every 300ms.
func (f *fixture) useLease(kit *leaseKit) {
	f.leases = kit
	f.options = append(f.options, singleton.WithLease(kit.provider), singleton.WithLeaseRetryInterval(leaseRetryInterval))
}

func (f *fixture) recordToken(token uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokens = append(f.tokens, token)
}

// requireTokensGrow checks that every singleton got a larger fencing token
// than the one before it.
func (f *fixture) requireTokensGrow() {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := 1; i < len(f.tokens); i++ {
		require.Greater(f.t, f.tokens[i], f.tokens[i-1], "fencing tokens in start order: %v", f.tokens)
	}
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
	if f.singletonProps != nil {
		props = f.singletonProps(node)
	}
	mgr, err := singleton.StartManager(node.System, node.Membership, props, manager, f.options...)
	require.NoError(f.t, err)
	f.managers[node] = mgr
	interval := f.identificationInterval
	if interval == 0 {
		interval = 200 * time.Millisecond
	}
	proxy, err := singleton.StartProxy(node.System, node.Membership, manager, singleton.WithSingletonIdentificationInterval(interval))
	require.NoError(f.t, err)
	f.proxies[node] = proxy
	return node
}

func incarnation(n *testkit.Node) string { return n.Name + "/" + n.MemberID() }

// runsOn reports whether the singleton incarnation inc is the node's
// current member's (under any fencing token).
func runsOn(inc string, n *testkit.Node) bool {
	want := incarnation(n)
	return inc == want || strings.HasPrefix(inc, want+"#")
}

// waitSingletonOn waits until exactly the given node's singleton is active.
func (f *fixture) waitSingletonOn(n *testkit.Node) {
	f.t.Helper()
	want := incarnation(n)
	testkit.WaitFor(f.t, deadline, func() bool {
		a := f.ledger.Active(key)
		return len(a) == 1 && runsOn(a[0], n)
	}, "singleton to run on %s only (active: %v)", want, func() []string { return f.ledger.Active(key) })
}

// managerState asks the node's manager for its state name.
func (f *fixture) managerState(n *testkit.Node) string {
	res, err := n.System.Root.RequestFuture(f.managers[n], singleton.GetState{}, 5*time.Second).Result()
	if err != nil {
		return "unknown: " + err.Error()
	}
	return res.(*singleton.CurrentState).State
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
			return ok && runsOn(got.Value, on)
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

// forEachBackendWithLease runs test on each backend with use-lease on.
func forEachBackendWithLease(t *testing.T, test func(t *testing.T, f *fixture)) {
	for _, b := range backends {
		t.Run(b.name+"+lease", func(t *testing.T) {
			backend, margin := b.new(t)
			f := newFixture(t, backend, margin)
			f.useLease(b.leases(t, backend))
			test(t, f)
		})
		t.Run(b.name+"+caslease", func(t *testing.T) {
			backend, margin := b.new(t)
			f := newFixture(t, backend, margin)
			f.useLease(b.casLeases(t, backend))
			test(t, f)
		})
	}
}

// forEachBackendWithAndWithoutLease runs test on each backend, without and
// with use-lease.
func forEachBackendWithAndWithoutLease(t *testing.T, test func(t *testing.T, f *fixture)) {
	forEachBackend(t, test)
	forEachBackendWithLease(t, test)
}

// casTimings are short compare-and-set lease timings: a holder gives up
// 1.48 s after its last renewal, a dead one is taken over after 2.52 s.
var casTimings = []caslease.Option{caslease.WithDuration(2 * time.Second), caslease.WithRenewInterval(300 * time.Millisecond),
	caslease.WithSafetyMargin(500 * time.Millisecond), caslease.WithOperationTimeout(time.Second), caslease.WithLogger(slog.New(slog.DiscardHandler))}

// casLeaseKit: compare-and-set leases on store, their records under
// prefix; a holder loses its lease
// when another holder's record is written over its own (it notices at its
// next renewal; the record then looks held by a silent holder, which is
// taken over after the lease duration, plus drift and margin).
func casLeaseKit(p *caslease.Provider, store caslease.Store, prefix string) *leaseKit {
	return &leaseKit{provider: p, lose: func(t *testing.T, name string) {
		key := prefix + name
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		_, version, found, err := store.Get(ctx, key)
		require.NoError(t, err)
		require.True(t, found, "the record %s", key)
		_, ok, err := store.CAS(ctx, key, []byte(`{"holder":"intruder#0","owner":"intruder","token":1}`), version)
		require.NoError(t, err)
		require.True(t, ok, "overwriting %s", key)
	}}
}

func memoryCASLeases(t *testing.T, _ testkit.Backend) *leaseKit {
	store := &caslease.MemoryStore{}
	p, err := caslease.NewProvider(store, append([]caslease.Option{caslease.WithKeyPrefix("lease/")}, casTimings...)...)
	require.NoError(t, err)
	return casLeaseKit(p, store, "lease/")
}

// consulKV is caslease.Store on Consul KV as lease/consulcas keeps its
// records (versions are ModifyIndexes), for casLeaseKit's overwrite, which
// reads only whether a CAS succeeded.
type consulKV struct{ client *api.Client }

func (s consulKV) Get(ctx context.Context, key string) ([]byte, uint64, bool, error) {
	pair, _, err := s.client.KV().Get(key, (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil || pair == nil {
		return nil, 0, false, err
	}
	return pair.Value, pair.ModifyIndex, true, nil
}

func (s consulKV) CAS(ctx context.Context, key string, value []byte, version uint64) (uint64, bool, error) {
	ok, _, err := s.client.KV().CAS(&api.KVPair{Key: key, Value: value, ModifyIndex: version}, (&api.WriteOptions{}).WithContext(ctx))
	return 0, ok, err
}

func consulCASLeases(t *testing.T, b testkit.Backend) *leaseKit {
	client := b.(*testkit.ConsulBackend).Client()
	p, err := consulcas.NewProvider(consulmembership.DefaultServiceName, consulcas.WithClient(client), consulcas.WithLeaseOptions(casTimings...))
	require.NoError(t, err)
	return casLeaseKit(p, consulKV{client}, consulkey.LeasePrefix(consulmembership.DefaultServiceName))
}

// (a) 3-5 nodes: exactly one singleton, on the oldest; every proxy reaches it.
func TestSingletonRunsOnOldest(t *testing.T) {
	forEachBackendWithAndWithoutLease(t, func(t *testing.T, f *fixture) {
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
	forEachBackendWithAndWithoutLease(t, func(t *testing.T, f *fixture) {
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
		f.requireTokensGrow()
	})
}

// (c) the oldest crashes: the next oldest takes over after failure detection.
func TestSingletonOldestCrashes(t *testing.T) {
	forEachBackendWithAndWithoutLease(t, func(t *testing.T, f *fixture) {
		f.startNodes(3)
		oldest := f.cluster.Oldest("")
		f.waitSingletonOn(oldest)
		oldest.Crash()
		next := f.cluster.Oldest("")
		f.waitSingletonOn(next)
		f.allProxiesReach(next)
	})
}

// The proxies identify the new oldest when the oldest crashes, while its
// manager still waits out the removal margin; its manager tells them the
// singleton as soon as it starts, long before their next identification.
func TestProxiesFindSingletonAsItStarts(t *testing.T) {
	f := newFixture(t, testkit.NewLocalBackend(), time.Second)
	f.identificationInterval = time.Minute
	nodes := f.startNodes(3)
	f.waitSingletonOn(nodes[0])
	f.allProxiesReach(nodes[0])
	nodes[0].Crash()
	f.waitSingletonOn(nodes[1])
	started := time.Now()
	for _, n := range nodes[1:] {
		// Buffered by the proxy until it knows the singleton.
		res, err := n.System.Root.RequestFuture(f.proxies[n], wrapperspb.String("ping from "+n.Name), 5*time.Second).Result()
		require.NoError(t, err, "the proxy on %s never found the singleton on %s (%v after it started)", n.Name, nodes[1].Name, time.Since(started))
		require.True(t, runsOn(res.(*wrapperspb.StringValue).Value, nodes[1]), "answer from %v", res)
	}
	require.Less(t, time.Since(started), 5*time.Second, "the proxies found the new singleton only after")
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

// Bad input: a non-protobuf message to the proxy, a nil message to the
// proxy or the manager, and a message too large for the singleton's node
// are each dropped with a reason (a requester fails at once), nothing
// spins, and the proxy keeps working.
func TestProxyRejectsBadInput(t *testing.T) {
	f := newFixture(t, testkit.NewLocalBackend(), 0)
	nodes := f.startNodes(2)
	f.waitSingletonOn(nodes[0])
	events := make(chan *deadletter.Event, 10)
	sub := nodes[1].System.EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*deadletter.Event); ok {
			events <- e
		}
	})
	defer nodes[1].System.EventStream.Unsubscribe(sub)
	expect := func(what string, match func(*deadletter.Event) bool) {
		t.Helper()
		for {
			select {
			case e := <-events:
				t.Log(e)
				if match(e) {
					return
				}
			case <-time.After(deadline):
				t.Fatalf("no dead-letter event for %s", what)
			}
		}
	}
	root := nodes[1].System.Root
	proxy := f.proxies[nodes[1]]
	root.Send(proxy, struct{ Name string }{"not proto"})
	expect("a non-protobuf message", func(e *deadletter.Event) bool { return strings.Contains(e.Reason, "not a protobuf message") })
	for _, pid := range []*actor.PID{proxy, f.managers[nodes[1]]} {
		if _, err := root.RequestFuture(pid, nil, deadline).Result(); !errors.Is(err, actor.ErrDeadLetter) {
			t.Errorf("request of nil to %s: %v, want a dead letter at once", pid, err)
		}
		expect("nil to "+pid.String(), func(e *deadletter.Event) bool {
			return errors.Is(e.Err, deadletter.ErrNilMessage) && e.Target.Equal(pid)
		})
	}
	huge := wrapperspb.String(strings.Repeat("x", 5<<20))
	if _, err := root.RequestFuture(proxy, huge, deadline).Result(); !errors.Is(err, actor.ErrDeadLetter) {
		t.Errorf("request of 5 MiB through the proxy: %v, want a dead letter at once", err)
	}
	expect("a message too large", func(e *deadletter.Event) bool { return errors.Is(e.Err, deadletter.ErrMessageTooLarge) })
	testsupport.AssertNotSpinning(t, time.Second)
	f.allProxiesReach(nodes[0])
}

// With use-lease the singleton runs only while its node holds the lease. The
// holder loses it: the singleton stops at once, and starts again on the same
// node (still the oldest) only once the lease is acquired again, with a
// larger fencing token; never two at a time (the ledger's cleanup checks).
func TestSingletonLeaseLost(t *testing.T) {
	forEachBackendWithLease(t, func(t *testing.T, f *fixture) {
		f.startNodes(3)
		oldest := f.cluster.Oldest("")
		f.waitSingletonOn(oldest)
		first := f.ledger.Active(key)[0]

		f.leases.lose(t, singleton.LeaseName(manager))
		testkit.WaitFor(t, deadline, func() bool {
			a := f.ledger.Active(key)
			return len(a) == 1 && a[0] != first && runsOn(a[0], oldest)
		}, "the singleton to stop and start again under a new holding on %s (active: %v)", oldest.Name,
			func() []string { return f.ledger.Active(key) })
		require.Equal(t, 2, f.ledger.Starts(key))
		f.requireTokensGrow()
		f.allProxiesReach(oldest)
	})
}

// Another owner holds the lease: the oldest waits in AcquiringLease without
// a singleton, retries every lease-retry-interval, and starts the singleton
// once the lease is free, with a larger fencing token.
func TestSingletonWaitsForTheLease(t *testing.T) {
	forEachBackendWithLease(t, func(t *testing.T, f *fixture) {
		other, err := f.leases.provider.NewLease(singleton.LeaseName(manager), "another owner")
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		otherToken, ok, err := other.Acquire(ctx, nil)
		require.NoError(t, err)
		require.True(t, ok)

		nodes := f.startNodes(2)
		testkit.WaitFor(t, deadline, func() bool { return f.managerState(nodes[0]) == singleton.StateAcquiringLease },
			"the oldest's manager to wait in AcquiringLease")
		time.Sleep(3 * leaseRetryInterval) // a few refused retries
		require.Equal(t, 0, f.ledger.Starts(key), "no singleton while another owner holds the lease")
		require.Equal(t, singleton.StateAcquiringLease, f.managerState(nodes[0]))

		released, err := other.Release(ctx)
		require.NoError(t, err)
		require.True(t, released)
		f.waitSingletonOn(nodes[0])
		f.mu.Lock()
		require.Greater(t, f.tokens[0], otherToken)
		f.mu.Unlock()
		f.allProxiesReach(nodes[0])
	})
}

// Membership alone would start the singleton twice here: the oldest is
// removed while it runs (as failure detection would remove a node that is
// only cut off) and there is no removal margin, so the next oldest takes
// over at once, while the removed node is still stopping its singleton.
// The lease keeps the next oldest waiting until the removed node's
// singleton has terminated and its manager has released the lease.
func TestSingletonLeaseCoversRemovalWithoutMargin(t *testing.T) {
	backend := testkit.NewLocalBackend()
	f := newFixture(t, backend, -1)
	f.useLease(memoryLeases(t, backend))
	nodes := f.startNodes(3)
	f.waitSingletonOn(nodes[0])

	backend.Registry.Remove(nodes[0].MemberID())
	f.waitSingletonOn(nodes[1])
	require.Equal(t, 2, f.ledger.Starts(key))
	f.requireTokensGrow()
	f.allProxiesReach(nodes[1])
}

// A proxy that cannot find its singleton buffers up to its buffer size;
// past it the oldest message is dropped (ErrBufferFull), and what it still
// buffers when it stops is dropped too (ErrShuttingDown), each with an
// event that names the message. The answers to its identifications of a
// manager that does not run take no slot.
func TestProxyBufferDropsOldestWhenFull(t *testing.T) {
	f := newFixture(t, testkit.NewLocalBackend(), 0)
	node := f.startNodes(1)[0]
	events := make(chan *deadletter.Event, 10)
	sub := node.System.EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*deadletter.Event); ok {
			events <- e
		}
	})
	defer node.System.EventStream.Unsubscribe(sub)
	// No manager has this name: the singleton is never identified.
	proxy, err := singleton.StartProxy(node.System, node.Membership, "no-such-manager", singleton.WithBufferSize(2))
	require.NoError(t, err)
	for _, v := range []string{"m1", "m2", "m3"} {
		node.System.Root.Send(proxy, wrapperspb.String(v))
	}
	next := func() *deadletter.Event {
		t.Helper()
		select {
		case e := <-events:
			return e
		case <-time.After(deadline):
			t.Fatal("no dead-letter event")
			return nil
		}
	}
	e := next()
	require.ErrorIs(t, e.Err, deadletter.ErrBufferFull)
	require.Equal(t, "m1", e.Message.(*wrapperspb.StringValue).GetValue())
	require.NoError(t, node.System.Root.StopFuture(proxy).Wait())
	for _, want := range []string{"m2", "m3"} {
		e := next()
		require.ErrorIs(t, e.Err, deadletter.ErrShuttingDown)
		require.Equal(t, want, e.Message.(*wrapperspb.StringValue).GetValue())
	}
}
