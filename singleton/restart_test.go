package singleton_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/internal/staleness"
	"github.com/protoshard/protoshard/internal/testsupport"
	"github.com/protoshard/protoshard/singleton"
	"github.com/protoshard/protoshard/testkit"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// life records the lives of the flaky singletons of one test: when each
// incarnation started and ended, and how many were stopped for good (by
// themselves, or by their supervisor after too many failures).
type life struct {
	f          *fixture
	seq        atomic.Int32
	panicsLeft atomic.Int32 // Started panics while this is positive

	mu          sync.Mutex
	starts      []time.Time
	ends        []time.Time
	tokens      []uint64
	terminated  int
	terminateCh chan struct{}
}

func newLife(f *fixture) *life {
	l := &life{f: f, terminateCh: make(chan struct{}, 100)}
	f.singletonProps = func(n *testkit.Node) *actor.Props {
		return actor.PropsFromProducer(func() actor.Actor { return &flaky{l: l, node: incarnation(n)} })
	}
	return l
}

func (l *life) started(inc string, token uint64, leased bool) {
	l.f.ledger.Started(key, inc)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.starts = append(l.starts, time.Now())
	if leased {
		l.tokens = append(l.tokens, token)
	}
}

func (l *life) ended(inc string, terminated bool) {
	if inc != "" {
		l.f.ledger.Stopped(key, inc)
		l.mu.Lock()
		l.ends = append(l.ends, time.Now())
		l.mu.Unlock()
	}
	if terminated {
		l.mu.Lock()
		l.terminated++
		l.mu.Unlock()
		l.terminateCh <- struct{}{}
	}
}

// gap is the time from the end of incarnation i to the start of i+1.
func (l *life) gap(i int) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.starts[i+1].Sub(l.ends[i])
}

func (l *life) counts() (starts, ends, terminated int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.starts), len(l.ends), l.terminated
}

// flaky is a singleton that stops itself on "stop", panics on "panic" (and
// in Started while life.panicsLeft is positive), and otherwise answers with
// its incarnation: node/member#n, each life (a restart in place too) a new
// n.
type flaky struct {
	l           *life
	node        string
	incarnation string
}

func (a *flaky) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		if a.l.panicsLeft.Load() > 0 { // one incarnation at a time: no race
			a.l.panicsLeft.Add(-1)
			panic("flaky singleton: failing in Started")
		}
		a.incarnation = fmt.Sprintf("%s#%d", a.node, a.l.seq.Add(1))
		token, leased := singleton.FencingToken(ctx)
		a.l.started(a.incarnation, token, leased)
	case *actor.Restarting:
		a.l.ended(a.incarnation, false)
		a.incarnation = ""
	case *actor.Stopped:
		a.l.ended(a.incarnation, true)
		a.incarnation = ""
	case *wrapperspb.StringValue:
		switch msg.Value {
		case "stop":
			ctx.Stop(ctx.Self())
		case "panic":
			panic("flaky singleton: asked to fail")
		default:
			a.l.f.record(msg.Value)
			if ctx.Sender() != nil {
				ctx.Respond(wrapperspb.String(a.incarnation))
			}
		}
	}
}

// restartSettings: a short, visible back-off whose series never resets
// within a test.
func restartSettings(f *fixture, minBackoff time.Duration) {
	f.options = append(f.options, singleton.WithSingletonRestartBackoff(minBackoff, 20*minBackoff, 0.2),
		singleton.WithSingletonRestartResetAfter(time.Hour))
}

// startFlaky starts n nodes running flaky singletons (f.options as set
// before) and waits until the oldest runs it and every proxy reaches it.
func startFlaky(f *fixture, n int) (*life, []*testkit.Node) {
	f.t.Helper()
	l := newLife(f)
	nodes := f.startNodes(n)
	f.waitSingletonOn(nodes[0])
	f.allProxiesReach(nodes[0])
	return l, nodes
}

// tell sends value to the singleton through the proxy of n.
func (f *fixture) tell(n *testkit.Node, value string) {
	n.System.Root.Send(f.proxies[n], wrapperspb.String(value))
}

// waitTerminated waits for the n-th stop for good of a singleton incarnation.
func (l *life) waitTerminated(t *testing.T, n int) {
	t.Helper()
	testkit.WaitFor(t, deadline, func() bool { _, _, terminated := l.counts(); return terminated >= n },
		"%d singleton incarnation(s) to stop for good", n)
}

// waitStarts waits until n incarnations have started and one of them runs.
func (l *life) waitStarts(t *testing.T, n int) {
	t.Helper()
	testkit.WaitFor(t, deadline, func() bool {
		starts, _, _ := l.counts()
		return starts >= n && len(l.f.ledger.Active(key)) == 1
	}, "%d singleton incarnation(s) to have started, one running (active: %v)", n, func() []string { return l.f.ledger.Active(key) })
}

// ask sends a request through the proxy of n and waits for the answer.
func (f *fixture) ask(n *testkit.Node, value string) (string, error) {
	res, err := n.System.Root.RequestFuture(f.proxies[n], wrapperspb.String(value), deadline).Result()
	if err != nil {
		return "", err
	}
	return res.(*wrapperspb.StringValue).Value, nil
}

// The singleton stops itself twice in a row while its node stays the
// oldest: it starts again each time, after at least the minimum back-off and
// then at least twice it; a request sent through a proxy while it is down
// is answered by the restarted one. Under a lease the restarted singletons
// run under the same holding (the same fencing token).
func TestSingletonStoppedIsStartedAgainAfterBackoff(t *testing.T) {
	for _, withLease := range []bool{false, true} {
		t.Run(fmt.Sprintf("lease=%v", withLease), func(t *testing.T) {
			backend := testkit.NewLocalBackend()
			f := newFixture(t, backend, 0)
			if withLease {
				f.useLease(memoryLeases(t, backend))
			}
			const minBackoff = 500 * time.Millisecond
			restartSettings(f, minBackoff)
			l, nodes := startFlaky(f, 2)
			oldest, younger := nodes[0], nodes[1]

			f.tell(younger, "stop")
			l.waitTerminated(t, 1)
			l.waitStarts(t, 2)
			require.GreaterOrEqual(t, l.gap(0), minBackoff, "the first restart waits the minimum back-off")
			f.allProxiesReach(oldest)

			f.tell(younger, "stop")
			l.waitTerminated(t, 2)
			sent := time.Now()
			answer, err := f.ask(younger, "asked while it is down")
			require.NoError(t, err)
			l.waitStarts(t, 3)
			require.GreaterOrEqual(t, l.gap(1), 2*minBackoff, "a stop soon after a restart doubles the back-off")
			l.mu.Lock()
			restarted := l.starts[2]
			l.mu.Unlock()
			require.True(t, sent.Before(restarted), "the request was sent during the back-off")
			require.Equal(t, fmt.Sprintf("%s#3", incarnation(oldest)), answer, "the restarted singleton answered")
			require.Equal(t, 1, f.count("asked while it is down"))
			require.Equal(t, singleton.StateOldest, f.managerState(oldest))
			if withLease {
				l.mu.Lock()
				require.Len(t, l.tokens, 3)
				require.Equal(t, l.tokens[0], l.tokens[1], "a restart under the same holding keeps its token")
				require.Equal(t, l.tokens[0], l.tokens[2])
				l.mu.Unlock()
			}
		})
	}
}

// A panic loop exhausts the supervisor's restarts in place (proto.actor's
// default OneForOne: ten within ten seconds) twice in a row: the manager
// starts the singleton again after a back-off each time, growing, and never
// runs two incarnations at once (the ledger).
func TestSingletonFailingPastItsSupervisorIsStartedAgain(t *testing.T) {
	f := newFixture(t, testkit.NewLocalBackend(), 0)
	const minBackoff = 300 * time.Millisecond
	restartSettings(f, minBackoff)
	l, nodes := startFlaky(f, 2)

	// The "panic" message is the first failure, ten restarts in place fail
	// in Started: the supervisor stops it. The manager's restart fails in
	// Started eleven times: stopped again. The second restart runs.
	l.panicsLeft.Store(10 + 11)
	stoppedAt := time.Now()
	f.tell(nodes[1], "panic")
	l.waitTerminated(t, 2)
	l.waitStarts(t, 2)
	require.Zero(t, l.panicsLeft.Load(), "every planned failure happened")
	starts, _, terminated := l.counts()
	require.Equal(t, 2, starts, "only the second restart ran")
	require.Equal(t, 2, terminated)
	l.mu.Lock()
	restartedAfter := l.starts[1].Sub(stoppedAt)
	l.mu.Unlock()
	require.GreaterOrEqual(t, restartedAfter, minBackoff+2*minBackoff, "two back-offs, the second twice the first")
	f.allProxiesReach(nodes[0])
	f.ledger.AssertNoOverlap(t)
}

// WithoutSingletonRestart the manager keeps Akka's
// behaviour: a singleton that stopped itself stays stopped while its node is
// the oldest, and proxied messages are dropped.
func TestSingletonStoppedStaysStoppedWithoutRestart(t *testing.T) {
	f := newFixture(t, testkit.NewLocalBackend(), 0)
	f.options = append(f.options, singleton.WithoutSingletonRestart())
	l, nodes := startFlaky(f, 2)

	f.tell(nodes[1], "stop")
	l.waitTerminated(t, 1)
	// Several times the default back-off.
	time.Sleep(3 * time.Second)
	_, err := nodes[1].System.Root.RequestFuture(f.proxies[nodes[1]], wrapperspb.String("anyone?"), time.Second).Result()
	require.Error(t, err, "nothing answers")
	starts, _, _ := l.counts()
	require.Equal(t, 1, starts, "never started again")
	require.Empty(t, f.ledger.Active(key))
	require.Equal(t, singleton.StateOldest, f.managerState(nodes[0]))
}

// The oldest leaves while its singleton's restart is pending: it does not
// start it again, and the next oldest runs it, once.
func TestSingletonHandOverCancelsPendingRestart(t *testing.T) {
	f := newFixture(t, testkit.NewLocalBackend(), 0)
	const minBackoff = 3 * time.Second
	restartSettings(f, minBackoff)
	l, nodes := startFlaky(f, 3)
	oldest, next := nodes[0], nodes[1]

	f.tell(next, "stop")
	l.waitTerminated(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	require.NoError(t, oldest.Leave(ctx))
	f.waitSingletonOn(next)
	// Past the back-off the old oldest would have waited.
	time.Sleep(minBackoff + time.Second)
	starts, _, _ := l.counts()
	require.Equal(t, 2, starts, "the singleton started once more, on the next oldest")
	active := f.ledger.Active(key)
	require.Len(t, active, 1)
	require.Equal(t, incarnation(next)+"#2", active[0])
	f.allProxiesReach(next)
}

// The oldest's singleton stops itself just before its node is paused past
// the failure detection timeout; the others remove the node and start their
// singleton. The paused node's restart back-off ends before it has heard of
// its removal: its membership is stale, so it must not start the singleton
// again. It hears of its removal on resume, and joins again as a younger
// member. One singleton at a time (the ledger), and only the new oldest's
// ran after the stop.
func TestSingletonRestartRefusedWhileMemberStale(t *testing.T) {
	backend := testsupport.NewPausableBackend(300 * time.Millisecond)
	f := newFixture(t, backend, 0) // the removal margin: the failure detection timeout
	const minBackoff = 2 * time.Second
	restartSettings(f, minBackoff)
	l, nodes := startFlaky(f, 2)
	paused, next := nodes[0], nodes[1]
	pausedID := paused.MemberID()

	f.tell(next, "stop")
	l.waitTerminated(t, 1)
	stoppedAt := time.Now()
	backend.Pause(paused)
	testkit.WaitFor(t, deadline, membershiphook.Of(paused.Membership).Stale, "the paused node's membership to be stale")
	backend.RemovePaused(paused)
	l.waitStarts(t, 2)
	require.Equal(t, incarnation(next)+"#2", f.ledger.Active(key)[0], "the next oldest runs the singleton")
	// Past the paused node's back-off (at most 1.2 times the minimum, with
	// the default random factor): its restart was due while it had not
	// heard of its removal. A slow timer here can only hide a start, never
	// make one.
	time.Sleep(time.Until(stoppedAt.Add(minBackoff*12/10 + time.Second)))
	backend.Resume(paused)
	testkit.WaitFor(t, deadline, func() bool { return paused.MemberID() != pausedID && f.managerState(paused) == singleton.StateYounger },
		"the paused node to join again as a younger member (state %s)", func() string { return f.managerState(paused) })
	starts, _, _ := l.counts()
	require.Equal(t, 2, starts, "the paused node never started the singleton again")
	f.ledger.AssertNoOverlap(t)
	f.allProxiesReach(next)
}

// A node whose membership goes stale while its singleton's restart is due
// does not start it; once it confirms its membership again (it was not
// removed), the restart is tried again and the singleton runs.
func TestSingletonRestartWaitsForConfirmedMembership(t *testing.T) {
	backend := testsupport.NewPausableBackend(300 * time.Millisecond)
	f := newFixture(t, backend, 0)
	const minBackoff = time.Second
	restartSettings(f, minBackoff)
	l, nodes := startFlaky(f, 1)
	n := nodes[0]

	f.tell(n, "stop")
	l.waitTerminated(t, 1)
	stoppedAt := time.Now()
	backend.Pause(n)
	testkit.WaitFor(t, deadline, membershiphook.Of(n.Membership).Stale, "the paused node's membership to be stale")
	time.Sleep(time.Until(stoppedAt.Add(minBackoff*12/10 + time.Second)))
	starts, _, _ := l.counts()
	require.Equal(t, 1, starts, "no start while the membership is stale")
	require.Equal(t, singleton.StateOldest, f.managerState(n))

	backend.Resume(n)
	l.waitStarts(t, 2)
	f.allProxiesReach(n)
}

// ticker is a singleton that counts a tick of its own timer every 20ms,
// in ledger incarnations node/member#n.
type ticker struct {
	f      *fixture
	node   string
	starts *atomic.Int32
	ticks  *atomic.Int64
	inc    string
}

type tick struct{}

func (a *ticker) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		a.inc = fmt.Sprintf("%s#%d", a.node, a.starts.Add(1))
		a.f.ledger.Started(key, a.inc)
		scheduler.NewTimerScheduler(ctx).SendRepeatedly(20*time.Millisecond, 20*time.Millisecond, ctx.Self(), tick{})
	case tick:
		a.ticks.Add(1)
	case *actor.Stopped:
		a.f.ledger.Stopped(key, a.inc)
	}
}

// The singleton's own timer keeps firing on a node whose membership has
// gone stale (a paused node's timers fire as it resumes, before its manager
// hears of the removal). The first tick while stale stops the singleton
// instead, with a dead-letter event; it handles no tick until the node
// confirms its membership again, and then it runs again, restarts
// disabled or not.
func TestSingletonDoesNoWorkWhileMemberStale(t *testing.T) {
	backend := testsupport.NewPausableBackend(300 * time.Millisecond)
	f := newFixture(t, backend, 0)
	f.options = append(f.options, singleton.WithoutSingletonRestart()) // Akka's: a stop on its own is not restarted
	var starts atomic.Int32
	var ticks atomic.Int64
	f.singletonProps = func(n *testkit.Node) *actor.Props {
		return actor.PropsFromProducer(func() actor.Actor { return &ticker{f: f, node: incarnation(n), starts: &starts, ticks: &ticks} })
	}
	n := f.startNodes(1)[0]
	f.waitSingletonOn(n)
	var fenced atomic.Int32
	n.System.EventStream.Subscribe(func(e any) {
		if d, ok := e.(*deadletter.Event); ok && errors.Is(d.Err, staleness.ErrStale) {
			fenced.Add(1)
		}
	})
	testkit.WaitFor(t, deadline, func() bool { return ticks.Load() > 0 }, "the singleton to tick")

	backend.Pause(n)
	testkit.WaitFor(t, deadline, membershiphook.Of(n.Membership).Stale, "the paused node's membership to be stale")
	testkit.WaitFor(t, deadline, func() bool { return len(f.ledger.Active(key)) == 0 },
		"the singleton to stop at its first tick while stale (ticks: %d)", testkit.Lazy(func() any { return ticks.Load() }))
	stale := ticks.Load()
	time.Sleep(time.Second)
	require.Equal(t, stale, ticks.Load(), "ticks handled while the membership is stale")
	require.Positive(t, fenced.Load(), "no dead-letter event for the fenced tick")
	require.EqualValues(t, 1, starts.Load(), "no start while stale")

	backend.Resume(n)
	testkit.WaitFor(t, deadline, func() bool { return starts.Load() == 2 && ticks.Load() > stale },
		"the singleton to run again once the membership is confirmed (starts %d)", testkit.Lazy(func() any { return starts.Load() }))
}
