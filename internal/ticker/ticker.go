// Package ticker sends an actor a message repeatedly, like proto.actor's
// scheduler.TimerScheduler.SendRepeatedly, without that one's data race:
// its timer function reads the cancelled state without an atomic load
// once the timer fires, so a cancel that meets a tick is a race (the
// race detector reports it when an actor stops a timer as it fires).
package ticker

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// SendRepeatedly sends msg to pid through sender after initial and then
// every interval, until the returned cancel is called. After cancel
// returns no further message is sent; calling it again does nothing.
func SendRepeatedly(sender actor.SenderContext, initial, interval time.Duration, pid *actor.PID, msg any) (cancel func()) {
	var (
		mu      sync.Mutex
		stopped bool
		t       *time.Timer
	)
	mu.Lock() // the first tick waits until t is set
	t = time.AfterFunc(initial, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		sender.Send(pid, msg)
		t.Reset(interval)
	})
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			stopped = true
			t.Stop()
		}
	}
}
