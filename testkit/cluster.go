package testkit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/protoshard/protoshard/internal/raceflag"
	"github.com/protoshard/protoshard/membership"
)

const (
	// joinTimeout is generous: the shared CI machines are slow, and a join
	// that fails is a test failure anyway.
	joinTimeout = 30 * time.Second
	// rejoinBackoff is short so that tests of re-join do not wait seconds.
	rejoinBackoff = 100 * time.Millisecond
)

// Cluster is a set of nodes of one test, each a separate actor system with
// its own remote on loopback, joined through one Backend.
type Cluster struct {
	t       testing.TB
	backend Backend

	// sole names the one node of a child process's cluster (see
	// ChildProcess.Cluster); empty: any number of nodes.
	sole string

	mu    sync.Mutex
	nodes []*Node
}

// NewCluster returns an empty cluster over backend (nil: a new
// LocalBackend). Every node still running when the test ends is stopped
// crash-style. Under the race detector the test is skipped (see the package
// documentation).
func NewCluster(t testing.TB, backend Backend) *Cluster {
	t.Helper()
	if raceflag.Enabled {
		t.Skip("multi-node test skipped under -race: each proto.actor Remote.Start replaces grpc's global logger")
	}
	return newCluster(t, backend, "")
}

// newCluster is NewCluster without the skip; sole: see Cluster.sole.
func newCluster(t testing.TB, backend Backend, sole string) *Cluster {
	if backend == nil {
		backend = NewLocalBackend()
	}
	c := &Cluster{t: t, backend: backend, sole: sole}
	t.Cleanup(func() {
		for _, n := range c.Nodes() {
			n.halt()
		}
	})
	return c
}

// NodeOption configures a node started by StartNode.
type NodeOption func(*nodeConfig)

type nodeConfig struct {
	name       string
	roles      []string
	stayOut    bool
	configure  []func(*membership.Config)
	beforeJoin []func(*Node)
	logs       []func(slog.Handler) slog.Handler
}

// WithLogHandler makes the node's actor system log through wrap(next) as
// well, where next is the handler it logs to without it: a handler that
// records lines for a test to assert on, passing each on to next. The
// system's logs, and the logs of all that uses its logger, carry the
// attribute node=<the node's name>.
func WithLogHandler(wrap func(next slog.Handler) slog.Handler) NodeOption {
	return func(c *nodeConfig) { c.logs = append(c.logs, wrap) }
}

// WithName names the node in logs and failure messages (default "node-N").
func WithName(name string) NodeOption {
	return func(c *nodeConfig) { c.name = name }
}

// WithRoles gives the node cluster roles.
func WithRoles(roles ...string) NodeOption {
	return func(c *nodeConfig) { c.roles = append(c.roles, roles...) }
}

// WithStayOutAfterRemoval makes a node that finds itself removed stay out
// of the cluster (membership.Terminate without OnTerminate), though its
// actor system runs on. By default it joins again as a new member, with a
// short back-off (membership.Rejoin, the library's default).
func WithStayOutAfterRemoval() NodeOption {
	return func(c *nodeConfig) { c.stayOut = true }
}

// WithMembershipConfig lets a test adjust the node's membership.Config
// (leave hook timeout, back-off) after the harness filled it in.
func WithMembershipConfig(fn func(*membership.Config)) NodeOption {
	return func(c *nodeConfig) { c.configure = append(c.configure, fn) }
}

// WithBeforeJoin runs fn once the node's system, remote and membership
// exist, before it joins: the place to subscribe to membership events from
// the very first CurrentClusterState, or to register leave hooks.
func WithBeforeJoin(fn func(*Node)) NodeOption {
	return func(c *nodeConfig) { c.beforeJoin = append(c.beforeJoin, fn) }
}

// Node is one member of a test cluster: an actor system with its remote and
// membership. Its fields are set once StartNode returns.
type Node struct {
	// Name is the node's name in logs.
	Name string
	// System is the node's actor system.
	System *actor.ActorSystem
	// Remote is the system's remote, listening on 127.0.0.1.
	Remote *remote.Remote
	// Membership is the node's view of the cluster.
	Membership *membership.Cluster

	cluster *Cluster
	rejoin  bool
	stopped atomic.Bool
}

// StartNode starts a node and joins it to the cluster; it returns once the
// node sees itself as a member. It fails the test (Fatal) if the node cannot
// join, so it must be called from the test's goroutine.
func (c *Cluster) StartNode(opts ...NodeOption) *Node {
	c.t.Helper()
	c.mu.Lock()
	cfg := nodeConfig{name: fmt.Sprintf("node-%d", len(c.nodes)+1)}
	started := len(c.nodes)
	c.mu.Unlock()
	if c.sole != "" {
		if started > 0 {
			c.t.Fatalf("testkit: %s: a child process runs one node: a second remote would race on grpc's global logger", c.sole)
		}
		cfg.name = c.sole
	}
	for _, o := range opts {
		o(&cfg)
	}

	system := actor.NewActorSystem(actor.WithLoggerFactory(testLogger(cfg.name, cfg.logs)))
	quarantine := membership.NewQuarantine()
	r := remote.NewRemote(system, remote.Configure("127.0.0.1", 0, quarantine.RemoteOption()))
	r.Start()
	provider, err := c.backend.NewProvider()
	if err != nil {
		r.Shutdown(false)
		system.Shutdown()
		c.t.Fatalf("testkit: %s: membership provider: %v", cfg.name, err)
	}
	mcfg := membership.Config{
		Roles:         slices.Clone(cfg.roles),
		RejoinBackoff: rejoinBackoff,
		Quarantine:    quarantine,
	}
	if cfg.stayOut {
		mcfg.AfterRemoval = membership.Terminate
	}
	for _, fn := range cfg.configure {
		fn(&mcfg)
	}
	n := &Node{
		Name:       cfg.name,
		System:     system,
		Remote:     r,
		Membership: membership.NewCluster(system, provider, mcfg),
		cluster:    c,
		rejoin:     mcfg.AfterRemoval == membership.Rejoin,
	}
	// Listed before joining, so that the cleanup stops it even if the join
	// fails half-way.
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()

	for _, fn := range cfg.beforeJoin {
		fn(n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
	defer cancel()
	if err := n.Membership.Join(ctx); err != nil {
		n.halt()
		c.t.Fatalf("testkit: %s: join: %v", cfg.name, err)
	}
	return n
}

// Nodes returns every node started, in start order, stopped ones included.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.nodes)
}

// Running returns the nodes on which neither Leave nor Crash was called, in
// start order.
func (c *Cluster) Running() []*Node {
	var out []*Node
	for _, n := range c.Nodes() {
		if !n.isStopped() {
			out = append(out, n)
		}
	}
	return out
}

// Oldest returns the running node whose member is the oldest Up member with
// the role (the empty role matches all), or nil. A node counts only while
// its own view lists it Up, so a node that was removed, or is leaving, is
// not a candidate.
func (c *Cluster) Oldest(role string) *Node {
	var best *Node
	var bestMember membership.Member
	for _, n := range c.Running() {
		m, ok := n.liveSelf()
		if !ok || m.Status != membership.Up || !m.HasRole(role) {
			continue
		}
		if best == nil || m.IsOlderThan(bestMember) {
			best, bestMember = n, m
		}
	}
	return best
}

// WaitConverged waits until the running nodes agree on the members: every
// running node that is a member lists exactly the members of the running
// nodes. A running node that was removed and does not re-join is left out;
// one that re-joins after removal is waited for. With a TTL-based backend,
// crashed members disappear only when their check expires, so timeout must
// cover the TTL. It fails t (Fatal) on timeout.
func (c *Cluster) WaitConverged(t testing.TB, timeout time.Duration) {
	t.Helper()
	var last string
	WaitFor(t, timeout, func() bool {
		ok, why := c.converged()
		last = why
		return ok
	}, "the cluster to converge: %s", Lazy(func() any { return last }))
}

// converged reports whether the running nodes agree, and if not, why.
func (c *Cluster) converged() (bool, string) {
	type view struct {
		n   *Node
		ids []string
	}
	var members []view
	var expected []string
	for _, n := range c.Running() {
		self := n.Membership.Self()
		ids := memberIDs(n.Membership.Members())
		if !slices.Contains(ids, self.ID) || self.ID == "" {
			if n.rejoin {
				return false, fmt.Sprintf("%s is not a member yet (re-joining)", n.Name)
			}
			continue // removed for good: not part of the cluster any more
		}
		members = append(members, view{n: n, ids: ids})
		expected = append(expected, self.ID)
	}
	sort.Strings(expected)
	for _, v := range members {
		if !slices.Equal(v.ids, expected) {
			return false, fmt.Sprintf("%s sees %v, running members are %v", v.n.Name, v.ids, expected)
		}
	}
	return true, ""
}

func memberIDs(ms []membership.Member) []string {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	sort.Strings(ids)
	return ids
}

// MemberID returns the node's current member id (a new one after a re-join;
// the last one after it stopped).
func (n *Node) MemberID() string { return n.Membership.Self().ID }

// Address returns the node's remote address (host:port).
func (n *Node) Address() string { return n.System.Address() }

// isStopped reports whether Leave or Crash was called on the node.
func (n *Node) isStopped() bool { return n.stopped.Load() }

// String names the node with its member id and address, for messages.
func (n *Node) String() string {
	return fmt.Sprintf("%s(%s@%s)", n.Name, n.MemberID(), n.Address())
}

// liveSelf returns the node's own member from its own view, if it is in it.
func (n *Node) liveSelf() (membership.Member, bool) {
	id := n.MemberID()
	for _, m := range n.Membership.Members() {
		if m.ID == id {
			return m, true
		}
	}
	return membership.Member{}, false
}

// Leave stops the node gracefully: the membership leave (the others see
// MemberLeft, the leave hooks run, then the member is removed), then the
// remote and the actor system shut down, as a process exiting after
// coordinated shutdown. The node's remaining actors are stopped. The error
// is the membership leave's, if any; the node is stopped regardless.
func (n *Node) Leave(ctx context.Context) error {
	if !n.stopped.CompareAndSwap(false, true) {
		return fmt.Errorf("testkit: %s: already stopped", n.Name)
	}
	err := n.Membership.Leave(ctx)
	n.Remote.Shutdown(true)
	stopAllActors(n.System)
	n.System.Shutdown()
	if err != nil {
		return fmt.Errorf("testkit: %s: leave: %w", n.Name, err)
	}
	return nil
}

// Crash stops the node without a goodbye, as if its process died: the
// remote is killed, membership stops watching without deregistering, and
// every actor is stopped (a dead process runs nothing, so its activations
// must end before the others can notice the crash). Then the backend makes
// the others notice (LocalBackend: the member is removed; Consul: the TTL
// check expires). A second call does nothing. The node of a child process
// (ChildProcess.Cluster) is not silenced first, so its stopping actors
// still say goodbye: to crash it, kill the process.
func (n *Node) Crash() {
	if !n.stopped.CompareAndSwap(false, true) {
		return
	}
	n.kill()
	n.cluster.backend.Crashed(n)
}

// halt stops a node crash-style without telling the backend: the test is
// over (cleanup) or the node never joined.
func (n *Node) halt() {
	if !n.stopped.CompareAndSwap(false, true) {
		return
	}
	n.kill()
}

func (n *Node) kill() {
	// silence writes a flag that the remote's senders read without
	// synchronisation, which the race detector of a child process would
	// report; there, a crash is better played by killing the process.
	if n.cluster.sole == "" {
		silence(n.Remote)
	}
	n.Remote.Shutdown(false)
	n.Membership.Close()
	stopAllActors(n.System)
	n.System.Shutdown()
}

// stopAllActors stops every actor of system, but the remote's own, and
// waits (bounded by proto.actor's stop timeout) until they have stopped, so
// that their Stopped handlers (which record the end of activations in a
// Ledger) have run when it returns. proto.actor has no "stop everything"
// call; the process registry holds every local process, of which the actors
// are *actor.ActorProcess (but for sharded entities, whose process is
// their shard's own kind: they stop with their shard, which waits for
// them).
//
// The remote's actors are left alone: an actor that stops notifies its
// remote watchers, and the remote resolves their endpoint by asking its
// endpoint supervisor and waiting for the answer without a timeout. With the
// supervisor stopped, that actor would never finish stopping (and its parent
// with it). After a graceful Leave, Remote.Shutdown(true) has stopped them
// already; after a crash, they only try to reconnect a few times and give up.
func stopAllActors(system *actor.ActorSystem) {
	futures := map[string]*actor.Future{}
	for _, bucket := range system.ProcessRegistry.LocalPIDs.LocalPIDs {
		for id, p := range bucket.Items() {
			if _, ok := p.(*actor.ActorProcess); !ok || isRemoteInternal(id) {
				continue // futures, the event stream, the remote's actors
			}
			futures[id] = system.Root.StopFuture(system.NewLocalPID(id))
		}
	}
	var errs []error
	for id, f := range futures {
		if err := f.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		system.Logger().Warn("testkit: some actors did not stop", slog.Any("error", err))
	}
}

// isRemoteInternal reports whether id names one of proto.actor remote's own
// actors (see remote/endpoint_manager.go: "activator", "EndpointSupervisor"
// and the endpoint writers and watchers it spawns as its children).
func isRemoteInternal(id string) bool {
	return id == "activator" || id == "EndpointSupervisor" || strings.HasPrefix(id, "EndpointSupervisor/")
}

// testLogger returns the actor system's logger factory: see testHandler;
// each of wraps handles the system's logs too (WithLogHandler).
func testLogger(name string, wraps []func(slog.Handler) slog.Handler) func(*actor.ActorSystem) *slog.Logger {
	return func(system *actor.ActorSystem) *slog.Logger {
		h := testHandler()
		for _, wrap := range wraps {
			h = wrap(h)
		}
		return slog.New(h).With(slog.String("node", name), slog.String("system", system.ID))
	}
}

// testHandler returns a handler that is silent unless the environment
// variable PROTOSHARD_TEST_LOG is set ("debug" for debug level, anything
// else but "0" for info); then it writes text to stderr. Tests are quiet
// by default because a dozen nodes' logs drown the failure message.
func testHandler() slog.Handler {
	level := slog.LevelInfo
	switch os.Getenv("PROTOSHARD_TEST_LOG") {
	case "", "0":
		return slog.DiscardHandler
	case "debug":
		level = slog.LevelDebug
	}
	return slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})
}

// silence makes the remote drop every message it would send from now on,
// as a dead process sends nothing. Without it, the actors that Crash stops
// would still tell remote watchers (Terminated) and peers (a region's
// RegionStopped) that they stopped, and the others would learn of the
// "crash" from those goodbyes instead of from failure detection.
// Remote.Shutdown(false) only stops the gRPC server; the outgoing
// connections stay up. protoactor-go has no API for this, so the endpoint
// manager's stopped flag (which remoteDeliver checks) is set through
// reflection; if a protoactor-go upgrade renames it, this does nothing and
// TestCrashSendsNothing fails.
func silence(r *remote.Remote) {
	em := reflect.ValueOf(r).Elem().FieldByName("edpManager")
	if !em.IsValid() || em.Kind() != reflect.Pointer || em.IsNil() {
		return
	}
	f := em.Elem().FieldByName("stopped")
	if !f.IsValid() || f.Kind() != reflect.Bool {
		return
	}
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().SetBool(true)
}
