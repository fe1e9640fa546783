package shard_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/shard"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/shardactor"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// staleCheck makes settings.MemberStale a check the test sets.
func staleCheck(settings *shardactor.Settings) *atomic.Bool {
	stale := new(atomic.Bool)
	settings.MemberStale = stale.Load
	return stale
}

// waitMemberRemovedDrops waits for n dead letters whose reason contains
// contains and whose typed reason is deadletter.ErrMemberRemoved.
func (f *fixture) waitMemberRemovedDrops(contains string, n int) {
	f.t.Helper()
	count := func() int {
		f.mu.Lock()
		defer f.mu.Unlock()
		c := 0
		for _, d := range f.deadLetters {
			if strings.Contains(d.Reason, contains) && errors.Is(d.Err, deadletter.ErrMemberRemoved) {
				c++
			}
		}
		return c
	}
	waitFor(f.t, "dead letters for a removed member", func() bool { return count() >= n }, func() any { return f.deadLetterReasons() })
}

// A remembered entity that stopped on its own starts again after the
// entity-restart back-off; while the node's membership is stale, it does
// not, and the restart is tried again after the back-off: once the node
// confirms its membership again, the entity runs.
func TestMemberStaleDelaysTheRestartOfARememberedEntity(t *testing.T) {
	settings := rememberSettings(shardactor.NewMemoryRememberEntitiesStore())
	stale := staleCheck(&settings)
	settings.EntityRestartBackoff = 200 * time.Millisecond
	f := newRegionFixture(t, settings)
	f.deliver("a", wrapperspb.String("m1"), nil)
	f.waitEvents("received", "a", 1)

	f.deliver("a", wrapperspb.String("stop-self"), nil)
	f.waitEvents("stopped", "a", 1)
	stale.Store(true) // before the back-off the shard arms on the termination
	// Several back-offs: each restart due meanwhile was refused. A slow
	// timer can only hide a start here, never make one.
	time.Sleep(time.Second)
	require.Equal(t, 1, f.rec.count("started", "a"), "no restart while the membership is stale")
	require.Equal(t, 0, f.stats().EntityCount)

	stale.Store(false)
	f.waitEvents("started", "a", 2)
	require.Empty(t, f.deadLetterReasons(), "nothing was waiting for the restart")
}

// A StartEntity whose entity must be remembered first: the write ends while
// the node's membership is stale, so the entity does not start and the
// StartEntity is a dead letter for a removed member. The entity stays
// remembered; a StartEntity after the node confirms its membership again
// starts it.
func TestMemberStaleStartsNoEntityAfterItsWrite(t *testing.T) {
	store := newScriptedStore()
	settings := rememberSettings(store)
	stale := staleCheck(&settings)
	f := newRegionFixture(t, settings)

	gate := make(chan struct{})
	store.mu.Lock()
	store.updateGate = gate
	store.mu.Unlock()
	ack := f.system.Root.RequestFuture(f.shard, &messages.StartEntity{EntityId: "b"}, deadline)
	waitFor(t, "the write of b", func() bool { return store.updates.Load() == 1 }, func() any { return store.updates.Load() })
	stale.Store(true)
	close(gate)
	f.waitMemberRemovedDrops(`cannot start entity "b"`, 1)
	_, err := ack.Result()
	require.Error(t, err, "the StartEntity was dropped, not acknowledged")
	require.Zero(t, f.rec.count("started", "b"))
	ids, err := store.GetEntities(context.Background(), shardID)
	require.NoError(t, err)
	require.Equal(t, []string{"b"}, ids, "b stays remembered")

	stale.Store(false)
	res, err := f.system.Root.RequestFuture(f.shard, &messages.StartEntity{EntityId: "b"}, deadline).Result()
	require.NoError(t, err)
	require.Equal(t, "b", res.(*messages.StartEntityAck).GetEntityId())
	f.waitEvents("started", "b", 1)
}

// Messages held while an entity passivates start its next incarnation
// when it has stopped; if the node's membership is stale by then, the
// entity does not start, and the messages are dead letters for a removed
// member.
func TestMemberStaleStartsNoEntityForMessagesHeldWhilePassivating(t *testing.T) {
	settings := shard.DefaultSettings()
	stale := staleCheck(&settings)
	f := newFixture(t, settings)
	f.deliver("p", wrapperspb.String("passivate"), nil)
	f.waitEvents("stopping", "p", 1) // held in its stop message until released
	f.deliver("p", wrapperspb.String("held"), nil)
	require.Equal(t, 1, f.stats().EntityCount, "the message is held for the next incarnation")

	stale.Store(true)
	f.releaseFn()
	f.waitMemberRemovedDrops(`cannot start entity "p"`, 1)
	require.Equal(t, 1, f.rec.count("started", "p"), "no next incarnation")
	require.Equal(t, 0, f.stats().EntityCount)
}
