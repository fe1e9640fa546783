package consul_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/internal/consulagent"
	"github.com/protoshard/protoshard/internal/raceflag"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/consul"
)

// Test timings: short TTLs keep the tests fast; every wait has a generous
// deadline because a loaded machine may be slow, and no assertion is made on
// elapsed time.
const (
	testTTL      = 2 * time.Second
	waitDeadline = 60 * time.Second
)

// testLog collects the logs of one test and prints them if it fails. Logs
// are not written with t.Log: goroutines may still log after the test ended.
type testLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *testLog) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := strings.Split(strings.TrimRight(l.buf.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func newTestLogger(t *testing.T) *slog.Logger {
	l := &testLog{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("test log (tail):\n%s", l.tail(300))
		}
	})
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// recorder is a subscriber actor's memory: every membership event in order.
type recorder struct {
	mu     sync.Mutex
	events []any
}

func (r *recorder) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *membership.CurrentClusterState, membership.MemberUp, membership.MemberLeft, membership.MemberRemoved:
		r.mu.Lock()
		r.events = append(r.events, m)
		r.mu.Unlock()
	}
}

func (r *recorder) snapshot() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// node is one actor system with remoting, a Consul provider and a Cluster.
type node struct {
	name     string
	system   *actor.ActorSystem
	remote   *remote.Remote
	provider membership.Provider
	cluster  *membership.Cluster
	rec      *recorder
}

type nodeOpts struct {
	roles  []string
	rejoin bool
	// options are added to the provider's; noProviderLogger leaves out
	// its default logger (the node's).
	options          []consul.Option
	noProviderLogger bool
}

// newNode starts an actor system with remoting on a free loopback port and a
// Cluster over a Consul provider talking to agent. It does not join.
func newNode(t *testing.T, agent *consulagent.Agent, logger *slog.Logger, name string, o nodeOpts) *node {
	t.Helper()
	if raceflag.Enabled {
		// Each Remote.Start replaces grpc's global logger: with several
		// remotes in one process the race detector reports it.
		t.Skip("multi-node test skipped under -race (proto.actor remotes share grpc's global logger)")
	}
	nodeLog := logger.With(slog.String("node", name))
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return nodeLog }))
	r := remote.NewRemote(system, remote.Configure("127.0.0.1", 0))
	r.Start()
	opts := []consul.Option{consul.WithClient(agent.Client()), consul.WithServiceName("protoshard-test"),
		consul.WithTTL(testTTL), consul.WithRetryBackoff(100 * time.Millisecond)}
	if !o.noProviderLogger {
		opts = append(opts, consul.WithLogger(nodeLog))
	}
	p, err := consul.New(append(opts, o.options...)...)
	if err != nil {
		t.Fatalf("%s: consul.New: %v", name, err)
	}
	c := membership.NewCluster(system, p, membership.Config{
		Roles:         o.roles,
		AfterRemoval:  afterRemoval(o.rejoin),
		RejoinBackoff: 200 * time.Millisecond,
	})
	rec := &recorder{}
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return rec }))
	c.Subscribe(pid)
	n := &node{name: name, system: system, remote: r, provider: p, cluster: c, rec: rec}
	t.Cleanup(func() {
		c.Close()
		r.Shutdown(false)
		system.Shutdown()
	})
	return n
}

func (n *node) join(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	if err := n.cluster.Join(ctx); err != nil {
		t.Fatalf("%s: join: %v", n.name, err)
	}
}

// startNodes starts and joins n nodes one after the other, so that their
// ages follow their index.
func startNodes(t *testing.T, agent *consulagent.Agent, logger *slog.Logger, count int, o nodeOpts) []*node {
	t.Helper()
	nodes := make([]*node, count)
	for i := range nodes {
		nodes[i] = newNode(t, agent, logger, fmt.Sprintf("node%d", i), o)
		nodes[i].join(t)
	}
	return nodes
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last state: %s", timeout, what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func ids(ms []membership.Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func describe(ms []membership.Member) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = fmt.Sprintf("%s@%s age=%d %s %v", m.ID, m.Address, m.Age, m.Status, m.Roles)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// converged reports whether every node sees the same members, in the same
// order, those being exactly the nodes' current selves.
func converged(nodes []*node) (bool, string) {
	var want []string
	for _, n := range nodes {
		self := n.cluster.Self()
		if self.ID == "" {
			return false, n.name + " has no self"
		}
		want = append(want, self.ID)
	}
	slices.Sort(want)
	first := nodes[0].cluster.Members()
	var b strings.Builder
	ok := true
	for _, n := range nodes {
		ms := n.cluster.Members()
		fmt.Fprintf(&b, "%s(self %s) sees %s; ", n.name, n.cluster.Self().ID, describe(ms))
		got := ids(ms)
		sorted := slices.Clone(got)
		slices.Sort(sorted)
		if !slices.Equal(sorted, want) || !slices.Equal(got, ids(first)) {
			ok = false
		}
		if len(ms) != len(first) {
			ok = false
			continue
		}
		for i := range ms {
			if ms[i].Age != first[i].Age {
				ok = false
			}
		}
	}
	return ok, b.String()
}

// findEvent returns the index of the first event at or after from that
// matches, or -1.
func findEvent(events []any, from int, match func(any) bool) int {
	for i := from; i < len(events); i++ {
		if match(events[i]) {
			return i
		}
	}
	return -1
}

func isRemoved(id string, graceful *bool) func(any) bool {
	return func(e any) bool {
		r, ok := e.(membership.MemberRemoved)
		return ok && r.Member.ID == id && (graceful == nil || r.Graceful == *graceful)
	}
}

func isUp(id string) func(any) bool {
	return func(e any) bool {
		u, ok := e.(membership.MemberUp)
		return ok && u.Member.ID == id
	}
}

func isLeft(id string) func(any) bool {
	return func(e any) bool {
		l, ok := e.(membership.MemberLeft)
		return ok && l.Member.ID == id
	}
}

func ptr[T any](v T) *T { return &v }

func describeEvents(events []any) string {
	var b strings.Builder
	for _, e := range events {
		switch e := e.(type) {
		case *membership.CurrentClusterState:
			fmt.Fprintf(&b, "CurrentClusterState(self %s, %s); ", e.Self.ID, describe(e.Members))
		case membership.MemberUp:
			fmt.Fprintf(&b, "Up(%s age=%d); ", e.Member.ID, e.Member.Age)
		case membership.MemberLeft:
			fmt.Fprintf(&b, "Left(%s age=%d); ", e.Member.ID, e.Member.Age)
		case membership.MemberRemoved:
			fmt.Fprintf(&b, "Removed(%s graceful=%v); ", e.Member.ID, e.Graceful)
		}
	}
	return b.String()
}

// catalogEntry reads one instance of the test service from the catalog.
func catalogEntry(t *testing.T, c *api.Client, id string) *api.CatalogService {
	t.Helper()
	services, _, err := c.Catalog().Service("protoshard-test", "", &api.QueryOptions{RequireConsistent: true})
	if err != nil {
		t.Fatalf("catalog read: %v", err)
	}
	for _, s := range services {
		if s.ServiceID == id {
			return s
		}
	}
	return nil
}

// afterRemoval is Rejoin when rejoin, else Terminate (the node stays out).
func afterRemoval(rejoin bool) membership.AfterRemoval {
	if rejoin {
		return membership.Rejoin
	}
	return membership.Terminate
}
