package delivery

import "sync"

// pinnedDispatcher runs one actor's mailbox on a goroutine of its own that
// lives as long as the actor. proto.actor's default dispatcher starts a
// goroutine each time the mailbox goes from empty to busy; a producer
// controller that is handed one Send at a time goes through that for
// almost every message, and its stack grows again each time: most of its
// CPU in the bench. After stop, it falls back to the default.
type pinnedDispatcher struct {
	mu      sync.Mutex
	work    chan func()
	stopped bool
}

func newPinnedDispatcher() *pinnedDispatcher {
	// A mailbox schedules again only once its last run set it idle, so
	// at most one run waits while one ends: the buffer never fills.
	d := &pinnedDispatcher{work: make(chan func(), 2)}
	go func() {
		for fn := range d.work {
			fn()
		}
	}()
	return d
}

// Schedule implements actor.Dispatcher.
func (d *pinnedDispatcher) Schedule(fn func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		go fn()
		return
	}
	d.work <- fn
}

// Throughput implements actor.Dispatcher: proto.actor's default.
func (d *pinnedDispatcher) Throughput() int { return 300 }

// stop ends the goroutine once it ran what waits; safe to call from it.
func (d *pinnedDispatcher) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.stopped {
		d.stopped = true
		close(d.work)
	}
}
