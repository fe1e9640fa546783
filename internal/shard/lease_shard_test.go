package shard_test

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/internal/shard"
	"github.com/protoshard/protoshard/internal/shardproto"
	"github.com/protoshard/protoshard/lease"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/shardactor"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func leaseSettings(leases *lease.MemoryLeases) shardactor.Settings {
	return shardactor.Settings{UseLease: leases, LeaseRetryInterval: 100 * time.Millisecond}
}

var shardLease = shardactor.LeaseName("Counter", shardID)

// canAcquire reports whether another owner can take the shard's lease now
// (and gives it back at once).
func canAcquire(t *testing.T, leases *lease.MemoryLeases) bool {
	t.Helper()
	other, err := leases.NewLease(shardLease, "other")
	require.NoError(t, err)
	_, ok, err := other.Acquire(context.Background(), nil)
	require.NoError(t, err)
	if ok {
		_, err = other.Release(context.Background())
		require.NoError(t, err)
	}
	return ok
}

// A shard with a lease starts no entity before it holds the lease: the
// messages wait (queries are answered), and are delivered, in order, once
// the other holder has let go and the shard's retry acquired it.
func TestLeaseEntitiesStartOnlyOnceAcquired(t *testing.T) {
	leases := lease.NewMemoryLeases()
	other, err := leases.NewLease(shardLease, "other")
	require.NoError(t, err)
	_, ok, err := other.Acquire(context.Background(), nil)
	require.NoError(t, err)
	require.True(t, ok)

	f := newFixture(t, leaseSettings(leases))
	f.deliver("a", wrapperspb.String("m1"), nil)
	ack := f.system.Root.RequestFuture(f.shard, &messages.StartEntity{EntityId: "b"}, deadline)
	f.deliver("a", wrapperspb.String("m2"), nil)
	// Answered after the messages above were handled: they wait.
	require.Equal(t, 0, f.stats().EntityCount)
	time.Sleep(300 * time.Millisecond) // a few retries of the acquisition
	require.Equal(t, 0, f.stats().EntityCount)
	require.Zero(t, f.rec.count("started", ""), "no entity before the lease is held")

	released, err := other.Release(context.Background())
	require.NoError(t, err)
	require.True(t, released)
	f.waitEvents("received", "a", 2)
	res, err := ack.Result()
	require.NoError(t, err)
	require.Equal(t, "b", res.(*messages.StartEntityAck).GetEntityId())
	require.Equal(t, []string{"m1", "m2"}, onlyIncarnation(t, f.rec.received("a")))
	owner, _, held := leases.Holder(shardLease)
	require.True(t, held)
	require.NotEqual(t, "other", owner)
	require.Empty(t, f.deadLetterReasons())
}

// Losing the lease stops every entity at once and the shard itself; what
// the shard held is dropped with the reason, and the lease is released
// once the entities have stopped.
func TestLeaseLostStopsEntitiesAndTheShard(t *testing.T) {
	leases := lease.NewMemoryLeases()
	settings := leaseSettings(leases)
	settings.HandOffStopMessage = wrapperspb.String("handoff-stop") // never sent: entities are stopped, not asked
	f := newFixture(t, settings)
	for _, id := range []string{"a", "b", "p"} {
		f.deliver(id, wrapperspb.String("hello"), nil)
	}
	f.waitEvents("received", "", 3)
	// p passivates and is held in its stop: what comes for it is held.
	f.deliver("p", wrapperspb.String("passivate"), nil)
	f.waitEvents("stopping", "p", 1)
	f.deliver("p", wrapperspb.String("for the next incarnation"), nil)
	require.Equal(t, 3, f.stats().EntityCount)
	stopped := f.watchStopped(f.shard)

	_, revoked := leases.Revoke(shardLease)
	require.True(t, revoked)
	f.waitEvents("stopped", "a", 1)
	f.waitEvents("stopped", "b", 1)
	f.waitDeadLetter("lease was lost")
	require.False(t, canAcquire(t, leases), "the lease is kept until every entity has stopped")
	f.releaseFn() // p finishes its stop
	waitClosed(t, stopped, "the shard to stop")
	waitFor(t, "the lease released", func() bool { return canAcquire(t, leases) }, func() any { return nil })
	require.Zero(t, f.rec.count("stopping", "a"), "stopped at once, not sent the hand-off stop message")
	require.Equal(t, 3, f.rec.count("started", ""), "nothing started again")
}

// After a hand-off the shard releases its lease, so that the shard's new
// home can take it at once; a HandOff while the shard still waits for its
// lease is answered at once.
func TestLeaseReleasedAfterHandOff(t *testing.T) {
	leases := lease.NewMemoryLeases()
	f := newFixture(t, leaseSettings(leases))
	f.deliver("a", wrapperspb.String("hello"), nil)
	f.waitEvents("received", "a", 1)
	require.False(t, canAcquire(t, leases))
	res := f.ask(&messages.HandOff{Shard: shardID})
	require.Equal(t, &messages.ShardStopped{Shard: shardID}, res)
	waitFor(t, "the lease released", func() bool { return canAcquire(t, leases) }, func() any { return nil })

	// Another shard of the same ID waits for a lease held elsewhere.
	other, err := leases.NewLease(shardLease, "other")
	require.NoError(t, err)
	_, ok, err := other.Acquire(context.Background(), nil)
	require.NoError(t, err)
	require.True(t, ok)
	waiting := f.spawnShard(shardID, leaseSettings(leases))
	f.system.Root.Send(waiting, &shardproto.Deliver{EntityID: "w", Message: wrapperspb.String("hello")})
	res, err = f.system.Root.RequestFuture(waiting, &messages.HandOff{Shard: shardID}, deadline).Result()
	require.NoError(t, err)
	require.Equal(t, &messages.ShardStopped{Shard: shardID}, res)
	// Spawned by the root, it has no region to give the message back to.
	f.waitDeadLetter("has no region to return the message")
	require.Zero(t, f.rec.count("started", "w"))
}

// A shard that hands off before it was ready gives what waited back to its
// region (its parent), which forwards it to the shard's new home.
func TestHandOffReturnsWaitingMessagesToTheRegion(t *testing.T) {
	leases := lease.NewMemoryLeases()
	f := newBareFixture(t) // no shard of its own competing for the lease
	other, err := leases.NewLease(shardLease, "other")
	require.NoError(t, err)
	_, ok, err := other.Acquire(context.Background(), nil)
	require.NoError(t, err)
	require.True(t, ok)

	returned := make(chan *shardproto.HandOffReturned, 1)
	stopped := make(chan any, 1)
	entity := actor.PropsFromProducer(func() actor.Actor { return &testEntity{rec: f.rec, release: f.release} })
	region := f.system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			shard := ctx.Spawn(shard.Props("Counter", shardID, entity, leaseSettings(leases), nil))
			ctx.Send(shard, &shardproto.Deliver{EntityID: "w", Message: wrapperspb.String("first")})
			ctx.Request(shard, &messages.StartEntity{EntityId: "v"})
			ctx.Request(shard, &messages.HandOff{Shard: shardID})
		case *shardproto.HandOffReturned:
			returned <- m
		case *messages.ShardStopped:
			stopped <- m
		}
	}))
	defer f.system.Root.Stop(region)
	select {
	case m := <-returned:
		require.Equal(t, shardID, m.Shard)
		require.Len(t, m.Messages, 2)
		require.Equal(t, "w", m.Messages[0].EntityID)
		require.Equal(t, "first", m.Messages[0].Message.(*wrapperspb.StringValue).GetValue())
		require.Equal(t, "v", m.Messages[1].EntityID)
		require.IsType(t, &messages.StartEntity{}, m.Messages[1].Message)
		require.NotNil(t, m.Messages[1].Sender, "the StartEntity's sender is kept for its ack")
	case <-time.After(deadline):
		t.Fatal("the shard returned nothing to its region")
	}
	select {
	case <-stopped:
	case <-time.After(deadline):
		t.Fatal("no ShardStopped")
	}
	require.Zero(t, f.rec.count("started", ""))
}
