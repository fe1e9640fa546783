package testwait

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Probe is an actor that records every message it receives, in order, for a
// test to wait on: subscribe it to membership events, or make it the target
// of a message under test. Lifecycle messages (Started, Stopping, ...) are
// not recorded.
type Probe struct {
	pid *actor.PID

	mu   sync.Mutex
	msgs []any
}

// NewProbe spawns a probe in system.
func NewProbe(system *actor.ActorSystem) *Probe {
	p := &Probe{}
	p.pid = system.Root.Spawn(actor.PropsFromFunc(p.receive))
	return p
}

func (p *Probe) receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
		return
	}
	p.mu.Lock()
	p.msgs = append(p.msgs, ctx.Message())
	p.mu.Unlock()
}

// PID is the probe's address.
func (p *Probe) PID() *actor.PID { return p.pid }

// Messages returns what the probe received so far, in order.
func (p *Probe) Messages() []any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.msgs)
}

// Index returns the position of the first message matching pred, or -1.
func (p *Probe) Index(pred func(any) bool) int {
	return slices.IndexFunc(p.Messages(), pred)
}

// Wait waits for a message matching pred and returns its position and the
// message; it fails t (Fatal) after timeout, listing what was received.
func (p *Probe) Wait(t testing.TB, timeout time.Duration, what string, pred func(any) bool) (int, any) {
	t.Helper()
	For(t, timeout, func() bool { return p.Index(pred) >= 0 }, "%s; probe received %s",
		what, func() any { return fmt.Sprintf("%+v", p.Messages()) })
	msgs := p.Messages()
	i := slices.IndexFunc(msgs, pred)
	return i, msgs[i]
}
