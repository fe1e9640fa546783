// Package ask runs a proto.actor request under a context.Context: the
// request waits until the context's deadline, or DefaultTimeout without
// one, and ends as soon as the context is cancelled. Every public request
// of protoshard that takes a context waits this way.
package ask

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// DefaultTimeout bounds a request whose context has no deadline, so that
// an answer that never comes cannot hold its caller for ever.
const DefaultTimeout = 10 * time.Second

// Call is one request under way: send the request with Future's PID as
// the sender, then wait with Result.
type Call struct {
	ctx    context.Context
	system *actor.ActorSystem
	f      *actor.Future
	// ended: ctx ended before the answer came, and stopped the future.
	ended   atomic.Bool
	release func() bool
}

// ErrNilContext: a request was given a nil context.
var ErrNilContext = errors.New("nil context (use context.Background)")

// Start makes the future of a request under ctx. It fails, and nothing
// must be sent, if ctx has already ended or is nil.
func Start(ctx context.Context, system *actor.ActorSystem) (*Call, error) {
	if ctx == nil {
		return nil, ErrNilContext
	}
	timeout := DefaultTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if err := ctx.Err(); err != nil {
		return nil, expired(err)
	}
	if timeout <= 0 {
		// The deadline passed, but ctx's timer has not fired yet; a
		// negative duration would make a future without a timeout.
		return nil, expired(context.DeadlineExceeded)
	}
	c := &Call{ctx: ctx, system: system, f: actor.NewFuture(system, timeout), release: neverEnds}
	if ctx.Done() != nil {
		c.release = context.AfterFunc(ctx, c.stop)
	}
	return c, nil
}

// neverEnds releases nothing: a context that cannot end has nothing to
// release.
func neverEnds() bool { return false }

// Future is the request's future; its PID is the request's sender.
func (c *Call) Future() *actor.Future { return c.f }

// stop ends the future without an answer, for a ctx that ended. Stopping
// a future that has its answer already does nothing.
func (c *Call) stop() {
	pid := c.f.PID()
	if p, ok := c.system.ProcessRegistry.Get(pid); ok {
		c.ended.Store(true)
		p.Stop(pid)
	}
}

// Result waits for the answer. The error is actor.ErrDeadLetter when the
// request was dropped; when no answer came in time it wraps ctx.Err() (or
// context.DeadlineExceeded for a deadline reached a moment before ctx's
// own timer fired), and also actor.ErrTimeout for a deadline; without a
// deadline on ctx, actor.ErrTimeout alone after DefaultTimeout.
func (c *Call) Result() (any, error) {
	res, err := c.f.Result()
	c.release()
	if err == nil && (res != nil || !c.ended.Load()) {
		return res, nil
	}
	if err != nil && !errors.Is(err, actor.ErrTimeout) {
		return nil, err
	}
	cause := c.ctx.Err()
	if cause == nil {
		if _, ok := c.ctx.Deadline(); !ok {
			return nil, err
		}
		cause = context.DeadlineExceeded
	}
	return nil, expired(cause)
}

// expired is the error of a request whose ctx ended: it wraps cause, and
// actor.ErrTimeout too for a deadline, so that the callers that test for
// proto.actor's timeout find it.
func expired(cause error) error {
	if errors.Is(cause, context.DeadlineExceeded) {
		return fmt.Errorf("%w (%w)", cause, actor.ErrTimeout)
	}
	return cause
}

// Request sends msg to pid, with the call's future as the sender, and
// waits for the answer as Start and Result do: the errors are theirs.
func Request(ctx context.Context, system *actor.ActorSystem, pid *actor.PID, msg any) (any, error) {
	call, err := Start(ctx, system)
	if err != nil {
		return nil, err
	}
	system.Root.RequestWithCustomSender(pid, msg, call.Future().PID())
	return call.Result()
}
