package deadletters

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/extensions"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/sysext"
	"github.com/protoshard/protoshard/internal/throttle"
)

// logInterval is how long the drops of one reason class after a logged
// one are only counted: a full buffer or a removed node drops thousands
// of messages a second, and a warning each would bury everything else.
const logInterval = 10 * time.Second

var logsID = extensions.NextExtensionID()

// logs is an actor system's rate limit of drop warnings.
type logs struct {
	system *actor.ActorSystem
	now    func() time.Time
	// afterFunc arms the flush of a window's count (time.AfterFunc).
	afterFunc func(time.Duration, func())

	mu      sync.Mutex
	limiter *throttle.Limiter
}

func (*logs) ExtensionID() extensions.ExtensionID { return logsID }

func logsOf(system *actor.ActorSystem) *logs {
	return sysext.Get(system, logsID, func() *logs {
		return newLogs(system, logInterval, time.Now, func(d time.Duration, f func()) { time.AfterFunc(d, f) })
	})
}

func newLogs(system *actor.ActorSystem, interval time.Duration, now func() time.Time, afterFunc func(time.Duration, func())) *logs {
	return &logs{system: system, now: now, afterFunc: afterFunc, limiter: throttle.New(interval)}
}

// warn logs e, unless a drop of its class was logged less than the
// interval ago; then it is counted, and the count logged when the
// interval ends.
func (l *logs) warn(e *deadletter.Event, class string) {
	l.mu.Lock()
	now := l.now()
	d := l.limiter.Allow(class, now)
	l.mu.Unlock()
	if !d.FlushAt.IsZero() {
		l.afterFunc(d.FlushAt.Sub(now), l.flush)
	}
	if !d.Log {
		return
	}
	attrs := []any{
		slog.String("class", class),
		slog.String("reason", e.Reason),
		slog.String("type", fmt.Sprintf("%T", e.Message)),
		slog.Any("target", e.Target),
		slog.Any("sender", e.Sender),
	}
	msg := "message dropped"
	if d.Suppressed > 0 {
		msg = fmt.Sprintf("message dropped (and %d more of class %s before it, not logged)", d.Suppressed, class)
	}
	l.system.Logger().Warn(msg, attrs...)
}

// flush logs the counts of the windows that have ended.
func (l *logs) flush() {
	l.mu.Lock()
	held := l.limiter.Flush(l.now())
	l.mu.Unlock()
	for _, h := range held {
		l.system.Logger().Warn(fmt.Sprintf("... and %d more messages dropped in the last %s", h.Count, l.limiter.Interval()),
			slog.String("class", h.Key), slog.Int("dropped", h.Count))
	}
}
