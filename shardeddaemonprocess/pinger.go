package shardeddaemonprocess

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/protoshard/protoshard/internal/ticker"
	"github.com/protoshard/protoshard/messages"
)

// keepAliveTick starts a pinger's round.
type keepAliveTick struct{}

// keepAlivePinger is Akka's KeepAlivePinger: every interval it asks the
// coordinator for the current revision and starts each of its workers
// through the region, so that a worker whose member died runs again
// elsewhere. While a change is under way it starts none.
type keepAlivePinger struct {
	coordinator *actor.PID
	region      *actor.PID
	interval    time.Duration
	cancel      scheduler.CancelFunc
}

func (p *keepAlivePinger) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.cancel = ticker.SendRepeatedly(ctx, 0, p.interval, ctx.Self(), keepAliveTick{})
	case *actor.Stopping:
		if p.cancel != nil {
			p.cancel()
		}
	case keepAliveTick:
		ctx.Request(p.coordinator, &messages.GetNumberOfProcesses{})
	case *messages.NumberOfProcesses:
		for _, id := range keepAliveTargets(m.GetRevision(), int(m.GetNumberOfProcesses()), m.GetRescaleInProgress()) {
			ctx.Send(p.region, &messages.StartEntity{EntityId: id})
		}
	}
}
