// Package dispatch runs actor mailboxes on goroutines that are kept for
// the next run instead of started anew for each.
package dispatch

import (
	"time"
)

// Mailboxes serves the mailboxes of entities that keep proto.actor's
// default dispatcher and of reliable-delivery producers. It holds no state
// of any cluster, so one serves every actor system of the process.
var Mailboxes = NewReusing(300, 2*time.Second)

// Reusing is an actor.Dispatcher that runs each mailbox run on a goroutine
// that waits for work, if one does, else on a new goroutine, which then
// waits for further runs until it has been idle for a while.
//
// proto.actor's default dispatcher starts a goroutine for each run: a
// mailbox that goes from empty to busy for almost every message, as an
// entity's does when messages come one at a time, pays for a new goroutine
// each time and, where the actor's Receive goes deeper than the initial
// stack, for growing the stack again (copying it) each time: most of the
// CPU a reliable-delivery consumer spends. A kept goroutine keeps its
// stack.
//
// A run never waits for a goroutine: with none idle, Schedule starts one,
// as the default does. So a run that blocks (an actor waiting on a future)
// holds one goroutine, never the others' runs: no more waiting and no
// deadlock than with the default.
type Reusing struct {
	work       chan func()
	idle       time.Duration
	throughput int
}

// NewReusing returns a dispatcher whose goroutines end after idle without
// a run, and whose mailboxes run throughput messages before they yield
// (proto.actor's default is 300).
func NewReusing(throughput int, idle time.Duration) *Reusing {
	return &Reusing{work: make(chan func()), idle: idle, throughput: throughput}
}

// Schedule implements actor.Dispatcher.
func (d *Reusing) Schedule(fn func()) {
	if !d.handOff(fn) {
		go d.run(fn)
	}
}

// handOff gives fn to an idle goroutine, if one waits.
func (d *Reusing) handOff(fn func()) bool {
	select {
	case d.work <- fn:
		return true
	default:
		return false
	}
}

// Throughput implements actor.Dispatcher.
func (d *Reusing) Throughput() int { return d.throughput }

// run runs fn, then the runs handed to it, until it waits idle in vain.
//
// The garbage collector halves the stack of a goroutine that uses less
// than a quarter of it, as an idle one does, and the next run would grow
// it again, copying it each time. So the goroutine waits, and runs, above
// a frame of stackFloor bytes, which keeps its stack in use.
func (d *Reusing) run(fn func()) {
	var floor [stackFloor]byte
	d.loop(fn, &floor)
}

// stackFloor is about what a mailbox run of an entity that decodes a
// message needs (the stacks the CPU profiles showed grown to 8 KiB).
const stackFloor = 4 << 10

//go:noinline
func (d *Reusing) loop(fn func(), floor *[stackFloor]byte) {
	floor[0] = 1 // the frame is used: the compiler keeps it
	fn()
	idle := time.NewTimer(d.idle)
	defer idle.Stop()
	for {
		select {
		case fn := <-d.work:
			fn()
			idle.Reset(d.idle)
		case <-idle.C:
			return
		}
	}
}
