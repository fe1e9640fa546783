package singleton

import (
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/membership"
)

// oldestChangedBuffer is Akka's OldestChangedBuffer: it subscribes to the
// membership events and hands the manager (its parent) one oldest change at a
// time, on getNext, so that the manager never misses an intermediate oldest
// while it is busy in a hand-over.
type oldestChangedBuffer struct {
	cluster *membership.Cluster
	role    string
	tracker *oldestTracker
	changes []any
	waiting bool
	exiting bool
}

func newOldestChangedBuffer(cluster *membership.Cluster, role string) actor.Producer {
	return func() actor.Actor { return &oldestChangedBuffer{cluster: cluster, role: role} }
}

func (b *oldestChangedBuffer) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		b.cluster.Subscribe(ctx.Self())
	case *actor.Stopping:
		b.cluster.Unsubscribe(ctx.Self())
	case *membership.CurrentClusterState:
		// A (re)join: a new self incarnation starts over.
		b.tracker = newOldestTracker(b.role, msg)
		b.exiting = false
		b.changes = []any{&initialOldestState{
			self:           msg.Self,
			oldest:         b.tracker.oldest,
			safeToBeOldest: b.tracker.safeToBeOldest(),
		}}
		b.deliver(ctx)
	case membership.MemberUp, membership.MemberLeft, membership.MemberRemoved:
		b.apply(ctx, msg)
	case selfExiting:
		b.exiting = true
		b.apply(ctx, msg)
	case getNext:
		b.waiting = true
		b.deliver(ctx)
	}
}

func (b *oldestChangedBuffer) apply(ctx actor.Context, event any) {
	if b.tracker == nil {
		return // events before the first CurrentClusterState are in it
	}
	if b.tracker.apply(event) {
		ctx.Logger().Debug("oldest changed", slog.Any("oldest", b.tracker.oldest))
		b.changes = append(b.changes, &oldestChanged{oldest: b.tracker.oldest})
		b.deliver(ctx)
	}
}

func (b *oldestChangedBuffer) deliver(ctx actor.Context) {
	if !b.waiting || len(b.changes) == 0 {
		return
	}
	next := b.changes[0]
	b.changes = b.changes[1:]
	b.waiting = false
	ctx.Send(ctx.Parent(), next)
}
