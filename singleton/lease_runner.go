package singleton

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/leaselog"
	"github.com/protoshard/protoshard/lease"
)

// leaseRunner runs the manager's lease operations off the actor, one after
// the other in the order asked for (an acquisition and a release of one
// lease must not overtake each other), and sends their answers to the
// manager as messages until it has stopped. leaseHolding decides which
// operations to ask for.
type leaseRunner struct {
	lease         lease.Lease
	owner         string          // the member incarnation lease was made for
	opsTail       chan struct{}   // closed when the last queued operation is over
	ctx           context.Context // canceled when the manager has stopped
	cancel        context.CancelFunc
	stopObserving context.CancelFunc // ends the current lease's Observe (lease.Observer)
}

func newLeaseRunner() leaseRunner {
	ctx, cancel := context.WithCancel(context.Background())
	return leaseRunner{ctx: ctx, cancel: cancel}
}

// current returns the lease of owner (a member incarnation), creating it
// on first use (logging to logger): a re-joined member is a new owner. A
// lease.Observer observes from its creation until it is replaced or the
// manager stops.
func (r *leaseRunner) current(p lease.Provider, name, owner string, logger *slog.Logger) (lease.Lease, error) {
	if r.lease != nil && r.owner == owner {
		return r.lease, nil
	}
	l, err := leaselog.NewLease(p, name, owner, logger)
	if err != nil {
		return nil, fmt.Errorf("singleton: lease %q for %s: %w", name, owner, err)
	}
	r.lease, r.owner = l, owner
	if r.stopObserving != nil {
		r.stopObserving()
		r.stopObserving = nil
	}
	if o, ok := l.(lease.Observer); ok {
		var octx context.Context
		octx, r.stopObserving = context.WithCancel(r.ctx)
		go o.Observe(octx)
	}
	return r.lease, nil
}

// made reports whether a lease has been made.
func (r *leaseRunner) made() bool { return r.lease != nil }

// held is the lease's CheckLease (false without a lease).
func (r *leaseRunner) held() bool { return r.lease != nil && r.lease.CheckLease() }

// acquire asks l for a holding; the answer comes back to self as an
// acquireLeaseResult, and a later loss as a leaseLost, both numbered gen.
func (r *leaseRunner) acquire(system *actor.ActorSystem, self *actor.PID, l lease.Lease, gen int) {
	stopped := r.ctx
	lost := func(reason error) {
		if stopped.Err() == nil {
			system.Root.Send(self, leaseLost{gen: gen, reason: reason})
		}
	}
	r.run(system, self, func() any {
		token, acquired, err := l.Acquire(stopped, lost)
		return acquireLeaseResult{gen: gen, token: token, acquired: acquired, err: err}
	})
}

// release gives the current lease back; the answer comes back to self as
// a releaseLeaseResult.
func (r *leaseRunner) release(system *actor.ActorSystem, self *actor.PID, afterHandOver bool) {
	l := r.lease
	r.run(system, self, func() any {
		rctx, cancel := context.WithTimeout(context.Background(), leaseReleaseTimeout)
		defer cancel()
		released, err := l.Release(rctx)
		return releaseLeaseResult{released: released, err: err, afterHandOver: afterHandOver}
	})
}

// leaseReleaseTimeout bounds a release on top of the lease's own operation
// timeout: a hand-over waits for it.
const leaseReleaseTimeout = 30 * time.Second

// run runs op after every operation queued before it, and sends its answer
// to self unless the manager has stopped.
func (r *leaseRunner) run(system *actor.ActorSystem, self *actor.PID, op func() any) {
	prev := r.opsTail
	done := make(chan struct{})
	r.opsTail = done
	stopped := r.ctx
	go func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		answer := op()
		if stopped.Err() == nil {
			system.Root.Send(self, answer)
		}
	}()
}

// stop makes an acquisition still running give up; no answers any more.
func (r *leaseRunner) stop() { r.cancel() }
