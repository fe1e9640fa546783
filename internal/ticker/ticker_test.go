package ticker_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/internal/ticker"
)

type tick struct{}

// Ticks arrive until cancel, none after it; cancels that meet a tick are
// no data race (run with -race).
func TestSendRepeatedly(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	var ticks atomic.Int64
	pid := system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(tick); ok {
			ticks.Add(1)
		}
	}))
	cancel := ticker.SendRepeatedly(system.Root, 0, time.Millisecond, pid, tick{})
	deadline := time.Now().Add(10 * time.Second)
	for ticks.Load() < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("%d ticks in 10s at 1ms, want 5", ticks.Load())
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	cancel()
	time.Sleep(20 * time.Millisecond) // a tick sent before cancel may still be in the mailbox
	after := ticks.Load()
	time.Sleep(50 * time.Millisecond)
	if got := ticks.Load(); got != after {
		t.Fatalf("%d ticks after cancel, want none", got-after)
	}

	// Cancel as the timers fire, many times over.
	for range 200 {
		c := ticker.SendRepeatedly(system.Root, 0, time.Microsecond, pid, tick{})
		time.Sleep(time.Duration(time.Now().UnixNano()%50) * time.Microsecond)
		c()
	}
}
