package shardeddaemonprocess_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/consul/api"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/protoshard/protoshard/actorsharding"
	shardingconsulstore "github.com/protoshard/protoshard/actorsharding/consulstore"
	"github.com/protoshard/protoshard/internal/raceflag"
	"github.com/protoshard/protoshard/internal/shard"
	"github.com/protoshard/protoshard/shardeddaemonprocess"
	"github.com/protoshard/protoshard/shardeddaemonprocess/consulstore"
	"github.com/protoshard/protoshard/singleton"
	"github.com/protoshard/protoshard/testkit"
)

// daemonWorld is a cluster running the daemon process "workers": the
// ledger checks at most one incarnation per worker index, revisions checks
// at most one revision at a time.
type daemonWorld struct {
	t         *testing.T
	cluster   *testkit.Cluster
	ledger    *testkit.Ledger
	revisions *revisionTracker
	daemons   map[*testkit.Node]*shardeddaemonprocess.ShardedDaemonProcess
	// opts are Init's options after the test's intervals.
	opts []shardeddaemonprocess.Option
	// receive, if set, sees every message of every worker's behavior.
	receive func(ctx actor.Context, node *testkit.Node)
	// removalMargin is the singletons': at least the TTL with Consul
	// (zero: the cluster's).
	removalMargin time.Duration
	// store, if set, makes each node's store of the number of processes.
	store func(n *testkit.Node) shardeddaemonprocess.Store
	// consul, if set, keeps the workers' coordinator state.
	consul *api.Client
}

// revisionTracker counts the running workers of each revision and records
// every start while another revision's workers still run.
type revisionTracker struct {
	mu         sync.Mutex
	running    map[int64]int
	violations []string
}

func (r *revisionTracker) started(rev int64, who string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for other, n := range r.running {
		if other != rev && n > 0 {
			r.violations = append(r.violations, fmt.Sprintf("%s of revision %d started while %d worker(s) of revision %d ran", who, rev, n, other))
		}
	}
	r.running[rev]++
}

func (r *revisionTracker) stopped(rev int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running[rev]--
}

func (r *revisionTracker) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.violations) > 0 {
		t.Errorf("more than one revision ran at once:\n  %s", strings.Join(r.violations, "\n  "))
	}
}

func newDaemonWorld(t *testing.T) *daemonWorld {
	skipUnderRace(t)
	return newDaemonWorldOf(t, testkit.NewCluster(t, testkit.NewLocalBackend()))
}

func skipUnderRace(t *testing.T) {
	if raceflag.Enabled {
		t.Skip("several proto.actor remotes in one process race on grpc's global logger; runs in the non-race pass")
	}
}

func newDaemonWorldOf(t *testing.T, cluster *testkit.Cluster) *daemonWorld {
	w := &daemonWorld{t: t, cluster: cluster, ledger: testkit.NewLedger(),
		revisions: &revisionTracker{running: map[int64]int{}},
		daemons:   map[*testkit.Node]*shardeddaemonprocess.ShardedDaemonProcess{}}
	t.Cleanup(func() { w.ledger.AssertNoOverlap(t); w.revisions.check(t) })
	return w
}

// revisionOf is the revision in the entity ID of the worker whose child
// (the user's behavior) ctx is.
func revisionOf(t *testing.T, ctx actor.Context) int64 {
	parent := ctx.Parent().GetId()
	id, err := shard.EntityID(parent[strings.LastIndexByte(parent, '/')+1:])
	if err != nil {
		t.Errorf("worker parent %q: %v", parent, err)
		return 0
	}
	rev, err := strconv.ParseInt(strings.Split(id, "|")[0], 10, 64)
	if err != nil {
		t.Errorf("worker %q: %v", id, err)
	}
	return rev
}

func (w *daemonWorld) startNode() *testkit.Node {
	w.t.Helper()
	n := w.cluster.StartNode()
	s, err := actorsharding.New(n.System, n.Membership)
	if err != nil {
		w.t.Fatal(err)
	}
	factory := func(index int) *actor.Props {
		key := "worker/" + strconv.Itoa(index)
		var rev int64
		return actor.PropsFromFunc(func(ctx actor.Context) {
			who := n.Name + "/" + ctx.Self().GetId()
			switch ctx.Message().(type) {
			case *actor.Started:
				rev = revisionOf(w.t, ctx)
				w.ledger.Started(key, who)
				w.revisions.started(rev, key+"@"+who)
			case *actor.Stopped:
				w.ledger.Stopped(key, who)
				w.revisions.stopped(rev)
			}
			if w.receive != nil {
				w.receive(ctx, n)
			}
		})
	}
	opts := w.opts
	if w.store != nil {
		opts = append(slices.Clone(opts), shardeddaemonprocess.WithStore(w.store(n)))
	}
	if w.consul != nil {
		opts = append(slices.Clone(opts), shardeddaemonprocess.WithShardingSettings(actorsharding.WithStateStore(
			shardingconsulstore.NewStateStore(w.consul, n.Membership.Name(), shardeddaemonprocess.TypeName("workers")))))
	}
	coordinatorSingleton := []singleton.Option{singleton.WithHandOverRetryInterval(200 * time.Millisecond)}
	if w.removalMargin > 0 {
		coordinatorSingleton = append(coordinatorSingleton, singleton.WithRemovalMargin(w.removalMargin))
	}
	d, err := shardeddaemonprocess.Init(s, "workers", 4, factory, append([]shardeddaemonprocess.Option{
		shardeddaemonprocess.WithKeepAliveInterval(300 * time.Millisecond),
		shardeddaemonprocess.WithShardingSettings(
			actorsharding.WithRetryInterval(200*time.Millisecond),
			actorsharding.WithRebalanceInterval(500*time.Millisecond),
			actorsharding.WithHandOffTimeout(15*time.Second),
			actorsharding.WithShardStartTimeout(2*time.Second),
			actorsharding.WithCoordinatorSingleton(coordinatorSingleton...),
		)}, opts...)...)
	if err != nil {
		w.t.Fatal(err)
	}
	w.daemons[n] = d
	return n
}

// active returns the indexes with a running worker, and whether each has
// exactly one.
func (w *daemonWorld) active(max int) (running []int, single bool) {
	single = true
	for i := range max {
		switch len(w.ledger.Active("worker/" + strconv.Itoa(i))) {
		case 0:
		case 1:
			running = append(running, i)
		default:
			single = false
		}
	}
	return running, single
}

// waitRunning waits until exactly workers 0..n-1 run, and returns how long
// that took from start.
func (w *daemonWorld) waitRunning(n int, start time.Time) time.Duration {
	w.t.Helper()
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	testkit.WaitFor(w.t, 60*time.Second, func() bool {
		got, single := w.active(8)
		return single && slices.Equal(got, want)
	}, "workers %v running (running now: %v)", want, testkit.Lazy(func() any { got, _ := w.active(8); return got }))
	return time.Since(start)
}

// hostOfAWorker waits until a running node other than the oldest runs a
// worker (the rebalance spreads them) and returns it.
func (w *daemonWorld) hostOfAWorker() *testkit.Node {
	w.t.Helper()
	var host *testkit.Node
	testkit.WaitFor(w.t, 60*time.Second, func() bool {
		host = w.nonOldestHost()
		return host != nil
	}, "a worker on a node other than the oldest")
	return host
}

func (w *daemonWorld) nonOldestHost() *testkit.Node {
	oldest := w.cluster.Oldest("")
	for _, n := range w.cluster.Running() {
		if n == oldest {
			continue
		}
		for i := range 8 {
			for _, inc := range w.ledger.Active("worker/" + strconv.Itoa(i)) {
				if strings.HasPrefix(inc, n.Name+"/") {
					return n
				}
			}
		}
	}
	return nil
}

// sameProcesses compares all but Started, which must be set.
func sameProcesses(got, want shardeddaemonprocess.NumberOfProcesses) bool {
	if got.Started.IsZero() || got.Started.Unix() <= 0 {
		return false
	}
	got.Started = want.Started
	return got == want
}

// TestWorkersRunOnceThroughCrashLeaveAndChanges: the workers of a daemon
// process run again after a member crashes or leaves, after the number of
// processes goes up and down, and after the coordinator's member crashes,
// with never two incarnations of a worker nor workers of two revisions at
// once.
func TestWorkersRunOnceThroughCrashLeaveAndChanges(t *testing.T) {
	w := newDaemonWorld(t)
	start := time.Now()
	first := w.startNode()
	w.startNode()
	w.startNode()
	t.Logf("start: all 4 workers run after %v", w.waitRunning(4, start))

	crashed := w.hostOfAWorker()
	start = time.Now()
	crashed.Crash()
	t.Logf("crash of %s: all 4 workers run again after %v", crashed.Name, w.waitRunning(4, start))

	w.startNode()
	leaving := w.hostOfAWorker()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start = time.Now()
	if err := leaving.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("leave of %s: all 4 workers run again after %v", leaving.Name, w.waitRunning(4, start))

	d := w.daemons[first]
	start = time.Now()
	if err := d.ChangeNumberOfProcesses(ctx, 6); err != nil {
		t.Fatal(err)
	}
	t.Logf("change 4 -> 6: all 6 workers run after %v", w.waitRunning(6, start))

	start = time.Now()
	if err := d.ChangeNumberOfProcesses(ctx, 2); err != nil {
		t.Fatal(err)
	}
	t.Logf("change 6 -> 2: the 2 workers run after %v", w.waitRunning(2, start))

	// The coordinator moves: the next oldest loads revision 3 from the store.
	oldest := w.cluster.Oldest("")
	start = time.Now()
	oldest.Crash()
	t.Logf("crash of the oldest, %s: the 2 workers run again after %v", oldest.Name, w.waitRunning(2, start))

	got, err := w.daemons[w.cluster.Running()[0]].GetNumberOfProcesses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (shardeddaemonprocess.NumberOfProcesses{NumberOfProcesses: 2, Revision: 3}); !sameProcesses(got, want) {
		t.Fatalf("GetNumberOfProcesses = %+v, want %+v", got, want)
	}
}

// TestAsksEndWithTheirContext: an ask under a context that has ended
// sends nothing and fails with the context's error; under a live one it
// is answered.
func TestAsksEndWithTheirContext(t *testing.T) {
	w := newDaemonWorld(t)
	n := w.startNode()
	w.waitRunning(4, time.Now())
	d := w.daemons[n]
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	if err := d.ChangeNumberOfProcesses(ended, 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("ChangeNumberOfProcesses under a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := d.GetNumberOfProcesses(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("GetNumberOfProcesses under a cancelled context: %v, want context.Canceled", err)
	}
	got, err := d.GetNumberOfProcesses(t.Context())
	if err != nil || got.NumberOfProcesses != 4 {
		t.Fatalf("GetNumberOfProcesses = %+v, %v, want the 4 unchanged", got, err)
	}
}

// TestWorkersGetTheStopMessage: a worker whose shard is handed off (its
// member leaves) or whose revision ends gets the stop message and stops
// itself, rather than being stopped.
func TestWorkersGetTheStopMessage(t *testing.T) {
	w := newDaemonWorld(t)
	w.opts = []shardeddaemonprocess.Option{shardeddaemonprocess.WithStopMessage(wrapperspb.String("stop"))}
	var mu sync.Mutex
	told := map[*actor.PID]bool{}
	var stops, unannounced int
	w.receive = func(ctx actor.Context, _ *testkit.Node) {
		mu.Lock()
		defer mu.Unlock()
		switch m := ctx.Message().(type) {
		case *wrapperspb.StringValue:
			if m.GetValue() == "stop" {
				told[ctx.Self()] = true
				stops++
				ctx.Stop(ctx.Self())
			}
		case *actor.Stopped:
			if !told[ctx.Self()] {
				unannounced++
			}
		}
	}
	first := w.startNode()
	w.startNode()
	w.startNode()
	w.waitRunning(4, time.Now())
	leaving := w.hostOfAWorker()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := leaving.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	w.waitRunning(4, time.Now())
	if err := w.daemons[first].ChangeNumberOfProcesses(ctx, 1); err != nil {
		t.Fatal(err)
	}
	w.waitRunning(1, time.Now())
	mu.Lock()
	defer mu.Unlock()
	// At least the leaving member's worker and the 4 of revision 1.
	if stops < 5 || unannounced > 0 {
		t.Fatalf("%d workers stopped on the stop message, %d without it; want at least 5 and none", stops, unannounced)
	}
}

// TestAChangeContinuesOnTheNextCoordinator: the coordinator's member
// crashes while workers of the previous revision are still stopping; the
// next coordinator continues the change, and the new revision's workers
// start only after the last old one stopped.
func TestAChangeContinuesOnTheNextCoordinator(t *testing.T) {
	w := newDaemonWorld(t)
	w.opts = []shardeddaemonprocess.Option{shardeddaemonprocess.WithStopMessage(wrapperspb.String("stop"))}
	var mu sync.Mutex
	type heldWorker struct {
		pid  *actor.PID
		node *testkit.Node
	}
	var held []heldWorker // workers that got the stop message and have not stopped yet
	var oldestName string
	w.receive = func(ctx actor.Context, n *testkit.Node) {
		m, ok := ctx.Message().(*wrapperspb.StringValue)
		if !ok || m.GetValue() != "stop" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if oldestName == "" || n.Name == oldestName {
			ctx.Stop(ctx.Self())
			return
		}
		held = append(held, heldWorker{ctx.Self(), n})
	}
	first := w.startNode()
	w.startNode()
	w.startNode()
	w.waitRunning(4, time.Now())
	w.hostOfAWorker()
	oldest := w.cluster.Oldest("")
	mu.Lock()
	oldestName = oldest.Name
	mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	changed := make(chan error, 1)
	go func() {
		changeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		changed <- w.daemons[first].ChangeNumberOfProcesses(changeCtx, 2)
	}()
	testkit.WaitFor(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(held) > 0
	}, "a worker holding its stop message")
	oldest.Crash()
	<-changed // the coordinator that took the change is gone: no answer

	survivor := w.daemons[w.cluster.Running()[0]]
	testkit.WaitFor(t, 30*time.Second, func() bool {
		got, err := survivor.GetNumberOfProcesses(ctx)
		return err == nil && sameProcesses(got, shardeddaemonprocess.NumberOfProcesses{NumberOfProcesses: 2, Revision: 2, RescaleInProgress: true})
	}, "the next coordinator continuing the change")
	time.Sleep(time.Second) // long enough for a wrongly started worker to show up
	if got, _ := w.active(8); len(got) != len(held) {
		t.Errorf("workers %v run while %d old ones hold their stop message", got, len(held))
	}
	mu.Lock()
	release := held
	mu.Unlock()
	for _, h := range release {
		h.node.System.Root.Stop(h.pid)
	}
	start := time.Now()
	t.Logf("the 2 workers of revision 2 run %v after the last old one was released", w.waitRunning(2, start))
	got, err := survivor.GetNumberOfProcesses(ctx)
	if err != nil || !sameProcesses(got, shardeddaemonprocess.NumberOfProcesses{NumberOfProcesses: 2, Revision: 2}) {
		t.Fatalf("GetNumberOfProcesses = %+v, %v; want 2 at revision 2, completed", got, err)
	}
}

// TestWorkersRunOnceOverConsul: over Consul membership, with the number
// of processes in Consul KV, a crashed member's workers run again once its
// TTL expired, and changes of the number hold.
func TestWorkersRunOnceOverConsul(t *testing.T) {
	skipUnderRace(t)
	b := testkit.NewConsulBackend(t)
	w := newDaemonWorldOf(t, testkit.NewCluster(t, b))
	w.removalMargin = 3 * time.Second // the test kit's TTL
	w.consul = b.Client()
	w.store = func(n *testkit.Node) shardeddaemonprocess.Store {
		return consulstore.NewStore(b.Client(), n.Membership.Name(), "workers")
	}
	start := time.Now()
	first := w.startNode()
	w.startNode()
	w.startNode()
	t.Logf("start: all 4 workers run after %v", w.waitRunning(4, start))

	// Consul members share no memory: Init wants a store.
	s, err := actorsharding.New(first.System, first.Membership)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shardeddaemonprocess.Init(s, "other", 1, func(int) *actor.Props { return nil }); !errors.Is(err, shardeddaemonprocess.ErrNoStore) {
		t.Fatalf("Init without a store over Consul: %v, want ErrNoStore", err)
	}

	crashed := w.hostOfAWorker()
	start = time.Now()
	crashed.Crash()
	t.Logf("crash of %s: all 4 workers run again after %v", crashed.Name, w.waitRunning(4, start))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start = time.Now()
	if err := w.daemons[first].ChangeNumberOfProcesses(ctx, 2); err != nil {
		t.Fatal(err)
	}
	t.Logf("change 4 -> 2: the 2 workers run after %v", w.waitRunning(2, start))
	stored, ok, err := w.store(first).Load(ctx)
	if err != nil || !ok || stored.Revision != 2 || stored.Count != 2 || !stored.Completed {
		t.Fatalf("stored in Consul: %+v, %v, %v; want 2 workers at revision 2, completed", stored, ok, err)
	}
}
