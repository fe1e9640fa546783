package coordinatoractor

import (
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/deadletter"
)

type supStop struct{}

type supPanic struct{}

type supPing struct{}

// The supervisor starts a new coordinator after the back-off when the
// coordinator stops or panics, passes messages on with their sender, drops
// them with a reason while there is none, and starts none once the
// singleton manager stops it.
func TestSupervisorRestartsTheCoordinator(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	defer system.Shutdown()
	var mu sync.Mutex
	var starts []time.Time
	var drops []string
	system.EventStream.Subscribe(func(e any) {
		if d, ok := e.(*deadletter.Event); ok {
			mu.Lock()
			drops = append(drops, d.Reason)
			mu.Unlock()
		}
	})
	child := actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *actor.Started:
			mu.Lock()
			starts = append(starts, time.Now())
			mu.Unlock()
		case supStop:
			ctx.Stop(ctx.Self())
		case supPanic:
			panic("coordinator bug")
		case supPing:
			ctx.Respond("pong")
		}
	})
	backoff := 200 * time.Millisecond
	sup := system.Root.Spawn(SupervisorProps(child, backoff))
	startCount := func() int { mu.Lock(); defer mu.Unlock(); return len(starts) }
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		end := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(end) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitUntil("the first coordinator", func() bool { return startCount() == 1 })
	if res, err := system.Root.RequestFuture(sup, supPing{}, 5*time.Second).Result(); err != nil || res != "pong" {
		t.Fatalf("a message through the supervisor: %v, %v", res, err)
	}

	system.Root.Send(sup, supStop{})
	time.Sleep(backoff / 4)
	system.Root.Send(sup, supPing{}) // no coordinator now
	waitUntil("a dead-letter event for the message sent meanwhile", func() bool { mu.Lock(); defer mu.Unlock(); return len(drops) == 1 })
	waitUntil("the coordinator after a stop", func() bool { return startCount() == 2 })

	system.Root.Send(sup, supPanic{})
	waitUntil("the coordinator after a panic", func() bool { return startCount() == 3 })
	mu.Lock()
	first, second := starts[1].Sub(starts[0]), starts[2].Sub(starts[1])
	mu.Unlock()
	if first < backoff || second < 2*backoff {
		t.Fatalf("restarts after %v and %v; want at least the back-off, doubling (%v, %v)", first, second, backoff, 2*backoff)
	}

	if err := system.Root.StopFuture(sup).Wait(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * backoff)
	if n := startCount(); n != 3 {
		t.Fatalf("%d coordinators started; none after the supervisor was stopped", n)
	}
}
