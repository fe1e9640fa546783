package coordinator

import (
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/staleness"
)

type supStop struct{}

type supPanic struct{}

type supPing struct{}

// supervised is a supervisor over a test coordinator that records when
// each incarnation started, with the reasons of the messages dropped.
type supervised struct {
	t      *testing.T
	system *actor.ActorSystem
	sup    *actor.PID

	mu     sync.Mutex
	starts []time.Time
	drops  []string
}

// newSupervised starts a supervisor with failure back-off backoff on a
// system whose staleness check is stale (nil: none).
func newSupervised(t *testing.T, backoff time.Duration, stale func() bool) *supervised {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	t.Cleanup(system.Shutdown)
	if stale != nil {
		staleness.Set(system, stale)
	}
	s := &supervised{t: t, system: system}
	system.EventStream.Subscribe(func(e any) {
		if d, ok := e.(*deadletter.Event); ok {
			s.mu.Lock()
			s.drops = append(s.drops, d.Reason)
			s.mu.Unlock()
		}
	})
	child := actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *actor.Started:
			s.mu.Lock()
			s.starts = append(s.starts, time.Now())
			s.mu.Unlock()
		case supStop:
			ctx.Stop(ctx.Self())
		case supPanic:
			panic("coordinator bug")
		case supPing:
			ctx.Respond("pong")
		}
	})
	s.sup = system.Root.Spawn(SupervisorProps(child, backoff))
	return s
}

func (s *supervised) startCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.starts)
}

func (s *supervised) dropCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.drops)
}

func (s *supervised) waitUntil(what string, cond func() bool) {
	s.t.Helper()
	end := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(end) {
			s.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The supervisor starts a new coordinator after the back-off when the
// coordinator stops or panics, passes messages on with their sender, drops
// them with a reason while there is none, and starts none once the
// singleton manager stops it.
func TestSupervisorRestartsTheCoordinator(t *testing.T) {
	backoff := 200 * time.Millisecond
	s := newSupervised(t, backoff, nil)
	system, sup := s.system, s.sup
	s.waitUntil("the first coordinator", func() bool { return s.startCount() == 1 })
	if res, err := system.Root.RequestFuture(sup, supPing{}, 5*time.Second).Result(); err != nil || res != "pong" {
		t.Fatalf("a message through the supervisor: %v, %v", res, err)
	}

	system.Root.Send(sup, supStop{})
	time.Sleep(backoff / 4)
	system.Root.Send(sup, supPing{}) // no coordinator now
	s.waitUntil("a dead-letter event for the message sent meanwhile", func() bool { return s.dropCount() == 1 })
	s.waitUntil("the coordinator after a stop", func() bool { return s.startCount() == 2 })

	system.Root.Send(sup, supPanic{})
	s.waitUntil("the coordinator after a panic", func() bool { return s.startCount() == 3 })
	s.mu.Lock()
	first, second := s.starts[1].Sub(s.starts[0]), s.starts[2].Sub(s.starts[1])
	s.mu.Unlock()
	if first < backoff || second < 2*backoff {
		t.Fatalf("restarts after %v and %v; want at least the back-off, doubling (%v, %v)", first, second, backoff, 2*backoff)
	}

	if err := system.Root.StopFuture(sup).Wait(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * backoff)
	if n := s.startCount(); n != 3 {
		t.Fatalf("%d coordinators started; none after the supervisor was stopped", n)
	}
}

// While the node's membership is stale, the supervisor's back-off starts
// no coordinator (the coordinator may run on the new oldest by now, and a
// second one would claim the state under a new epoch); it tries again after
// the back-off, and starts one once the membership is confirmed again.
func TestSupervisorStartsNoCoordinatorWhileMemberStale(t *testing.T) {
	backoff := 100 * time.Millisecond
	var stale atomic.Bool
	s := newSupervised(t, backoff, stale.Load)
	s.waitUntil("the first coordinator", func() bool { return s.startCount() == 1 })

	stale.Store(true)
	s.system.Root.Send(s.sup, supStop{})
	// Several back-offs: each start due meanwhile was refused. A slow
	// timer can only hide a start here, never make one.
	time.Sleep(10 * backoff)
	if n := s.startCount(); n != 1 {
		t.Fatalf("%d coordinators started while the membership is stale; want none after the first", n)
	}
	stale.Store(false)
	s.waitUntil("the coordinator once the membership is confirmed again", func() bool { return s.startCount() == 2 })
}
