package shard_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/shard"
	"github.com/protoshard/protoshard/internal/shardproto"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/shardactor"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// idleTimeout is short so that the tests run fast; they wait for events,
// never for an amount of time.
const idleTimeout = 300 * time.Millisecond

func passivationStateOf(t *testing.T, f *fixture, shard *actor.PID) *shardproto.PassivationState {
	t.Helper()
	res, err := f.system.Root.RequestFuture(shard, &shardproto.GetPassivationState{}, deadline).Result()
	require.NoError(t, err)
	require.IsType(t, &shardproto.PassivationState{}, res)
	return res.(*shardproto.PassivationState)
}

func (f *fixture) passivation() *shardproto.PassivationState {
	f.t.Helper()
	return passivationStateOf(f.t, f, f.shard)
}

// spawnShard starts another shard of the fixture's entity type, its
// entities recorded by the same recorder (use distinct entity IDs).
func (f *fixture) spawnShard(id string, settings shardactor.Settings) *actor.PID {
	props := actor.PropsFromProducer(func() actor.Actor { return &testEntity{rec: f.rec, release: f.release} })
	return f.system.Root.Spawn(shard.Props("Counter", id, props, settings, nil))
}

// stoppingValues lists the stop messages entity id recorded, in order.
func (f *fixture) stoppingValues(id string) []string {
	var out []string
	for _, e := range f.rec.all() {
		if e.kind == "stopping" && e.id == id {
			out = append(out, e.value)
		}
	}
	return out
}

func TestDefaultPassivationSettings(t *testing.T) {
	d := shard.DefaultSettings()
	require.Equal(t, 120*time.Second, d.PassivationIdleTimeout, "Akka's default idle timeout")
	require.Equal(t, 0, d.ActiveEntityLimit, "no limit by default")
	require.Equal(t, shardactor.LeastRecentlyUsedPolicy, d.ReplacementPolicy)
	require.False(t, d.RememberEntities)

	// Zero fields of a literal take the defaults.
	f := newFixture(t, shardactor.Settings{})
	require.Equal(t, &shardproto.PassivationState{ShardID: shardID, IdleTimeout: 120 * time.Second, Active: []string{}}, f.passivation())
}

func TestIdlePassivationRepeatsForEachIncarnation(t *testing.T) {
	f := newFixture(t, shardactor.Settings{
		PassivationIdleTimeout: idleTimeout,
		HandOffStopMessage:     wrapperspb.String("handoff-stop"),
	})
	require.Equal(t, idleTimeout, f.passivation().IdleTimeout)

	f.deliver("a", wrapperspb.String("m1"), nil)
	f.waitEvents("received", "a", 1)
	f.waitEvents("stopped", "a", 1)
	require.Equal(t, []string{"handoff-stop"}, f.stoppingValues("a"), "passivated with the hand-off stop message")
	waitFor(t, "a forgotten", func() bool { return f.stats().EntityCount == 0 }, func() any { return f.state() })
	require.Empty(t, f.passivation().Active)

	// The next message starts a new incarnation, which goes idle in turn.
	f.deliver("a", wrapperspb.String("m2"), nil)
	f.waitEvents("started", "a", 2)
	f.waitEvents("stopped", "a", 2)
	require.Equal(t, []string{"handoff-stop", "handoff-stop"}, f.stoppingValues("a"))
	require.Len(t, f.rec.received("a"), 2, "two incarnations, one message each")

	// An entity started by StartEntity alone goes idle too.
	res := f.ask(&messages.StartEntity{EntityId: "s"})
	require.Equal(t, "s", res.(*messages.StartEntityAck).GetEntityId())
	f.waitEvents("stopped", "s", 1)
	require.Empty(t, f.deadLetterReasons())
}

func TestIdlePassivationIgnoresProtocolMessagesAndQueries(t *testing.T) {
	f := newFixture(t, shardactor.Settings{PassivationIdleTimeout: idleTimeout})
	f.deliver("a", wrapperspb.String("hello"), nil)
	f.waitEvents("received", "a", 1)

	// Keep the shard and the entity busy with everything but user
	// messages; the entity goes idle all the same.
	end := time.Now().Add(deadline)
	for f.rec.count("stopped", "a") == 0 {
		if time.Now().After(end) {
			t.Fatalf("entity a kept alive by protocol messages and queries; events: %+v", f.rec.all())
		}
		f.deliver("a", &messages.GracefulShutdown{}, nil) // a protocol message delivered to the entity
		_ = f.system.Root.RequestFuture(f.shard, &shardproto.GetShardStats{}, deadline)
		_ = f.system.Root.RequestFuture(f.shard, &shardproto.GetCurrentShardState{}, deadline)
		_ = f.system.Root.RequestFuture(f.shard, &shardproto.GetPassivationState{}, deadline)
		f.system.Root.Send(f.shard, &shardproto.SetActiveEntityLimit{Limit: 0})
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(t, 1, f.rec.count("received", "a"), "the entity got no user message but the first")
	require.Empty(t, f.deadLetterReasons())
}

func TestIdlePassivationOff(t *testing.T) {
	tests := []struct {
		name     string
		settings shardactor.Settings
	}{
		{"negative timeout", shardactor.Settings{PassivationIdleTimeout: -1}},
		// Akka's rule: no automatic passivation with remember-entities,
		// the limit included.
		{"remember-entities", shardactor.Settings{PassivationIdleTimeout: idleTimeout, ActiveEntityLimit: 1, RememberEntities: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.settings)
			// A control shard with idle passivation on, on the same
			// machine: once it has passivated its entity twice, the
			// shard under test has had more than two idle timeouts.
			control := f.spawnShard("8", shardactor.Settings{PassivationIdleTimeout: idleTimeout})

			f.deliver("off-1", wrapperspb.String("hello"), nil)
			f.deliver("off-2", wrapperspb.String("hello"), nil)
			f.waitEvents("received", "off-1", 1)
			f.waitEvents("received", "off-2", 1)
			if tt.settings.RememberEntities {
				f.system.Root.Send(f.shard, &shardproto.SetActiveEntityLimit{Limit: 1}) // ignored
			}
			for i := 1; i <= 2; i++ {
				f.system.Root.Send(control, &shardproto.Deliver{EntityID: "on", Message: wrapperspb.String("hello")})
				f.waitEvents("stopped", "on", i)
			}

			require.Equal(t, 0, f.rec.count("stopped", "off-1"), "not passivated")
			require.Equal(t, 0, f.rec.count("stopped", "off-2"), "not passivated")
			require.Equal(t, []string{"off-1", "off-2"}, f.state().EntityIDs)
			st := f.passivation()
			require.Equal(t, time.Duration(0), st.IdleTimeout, "idle passivation off")
			if tt.settings.RememberEntities {
				require.Equal(t, 0, st.Limit, "limit off with remember-entities")
				require.Empty(t, st.Active, "nothing tracked with remember-entities")
			}
			require.Empty(t, f.deadLetterReasons())
		})
	}
}

func TestActiveEntityLimitPassivatesLeastRecentlyUsed(t *testing.T) {
	f := newFixture(t, shardactor.Settings{
		PassivationIdleTimeout: -1,
		ActiveEntityLimit:      3,
		HandOffStopMessage:     wrapperspb.String("handoff-stop"),
	})
	for _, id := range []string{"a", "b", "c"} {
		f.deliver(id, wrapperspb.String("hello"), nil)
	}
	// Neither a protocol message for a nor queries count as a use of a.
	f.deliver("a", &messages.GracefulShutdown{}, nil)
	f.stats()
	require.Equal(t, &shardproto.PassivationState{ShardID: shardID, Limit: 3, Active: []string{"a", "b", "c"}}, f.passivation())

	// A user message does: a is now the most recently used, b the least.
	f.deliver("a", wrapperspb.String("again"), nil)
	require.Equal(t, []string{"b", "c", "a"}, f.passivation().Active)
	f.deliver("d", wrapperspb.String("hello"), nil)
	require.Equal(t, []string{"c", "a", "d"}, f.passivation().Active)
	f.waitEvents("stopped", "b", 1)
	require.Equal(t, []string{"handoff-stop"}, f.stoppingValues("b"), "passivated with the hand-off stop message")
	for _, id := range []string{"a", "c", "d"} {
		require.Equal(t, 0, f.rec.count("stopped", id), "%s still runs", id)
	}

	// StartEntity is a use too.
	res := f.ask(&messages.StartEntity{EntityId: "c"})
	require.Equal(t, "c", res.(*messages.StartEntityAck).GetEntityId())
	require.Equal(t, []string{"a", "d", "c"}, f.passivation().Active)

	// A limit lowered at run time passivates at once.
	f.system.Root.Send(f.shard, &shardproto.SetActiveEntityLimit{Limit: 1})
	require.Equal(t, &shardproto.PassivationState{ShardID: shardID, Limit: 1, Active: []string{"c"}}, f.passivation())
	f.waitEvents("stopped", "a", 1)
	f.waitEvents("stopped", "d", 1)
	waitFor(t, "only c left", func() bool { return slices.Equal(f.state().EntityIDs, []string{"c"}) }, func() any { return f.state() })
	require.Equal(t, 0, f.rec.count("stopped", "c"))

	// Raised (value-typed message): nothing passivated, room for more.
	f.system.Root.Send(f.shard, shardproto.SetActiveEntityLimit{Limit: 2})
	f.deliver("e", wrapperspb.String("hello"), nil)
	require.Equal(t, &shardproto.PassivationState{ShardID: shardID, Limit: 2, Active: []string{"c", "e"}}, f.passivation())
	require.Equal(t, 1, f.rec.count("started", "a"), "a passivated entity is not started again without a message")
	require.Empty(t, f.deadLetterReasons())
}

func TestLimitPassivationBuffersForTheNextIncarnation(t *testing.T) {
	f := newFixture(t, shardactor.Settings{
		PassivationIdleTimeout: -1,
		ActiveEntityLimit:      1,
		// The entity records "stopping" and holds in its stop until the
		// test releases it, so messages surely arrive meanwhile.
		HandOffStopMessage: wrapperspb.String("graceful-stop"),
	})
	f.deliver("a", wrapperspb.String("m0"), nil)
	f.waitEvents("received", "a", 1)
	f.deliver("b", wrapperspb.String("hello"), nil) // over the limit: a goes
	f.waitEvents("stopping", "a", 1)

	const n = 50
	for i := 1; i <= n; i++ {
		f.deliver("a", wrapperspb.String(fmt.Sprint("m", i)), nil)
	}
	ack := f.system.Root.RequestFuture(f.shard, &messages.StartEntity{EntityId: "a"}, deadline)
	reply := f.system.Root.RequestFuture(f.shard, &shardproto.Deliver{EntityID: "a", Message: wrapperspb.String("last")}, deadline)
	require.Equal(t, []string{"b"}, f.passivation().Active, "a is no longer tracked while it passivates")
	require.Equal(t, []string{"a", "b"}, f.state().EntityIDs, "the passivating entity still counts")
	require.Equal(t, 1, f.rec.count("started", "a"), "nothing started while the old incarnation stops")

	f.releaseFn()
	f.waitEvents("received", "a", n+2)
	res, err := ack.Result()
	require.NoError(t, err)
	require.Equal(t, "a", res.(*messages.StartEntityAck).GetEntityId())
	res, err = reply.Result()
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(res.(*wrapperspb.StringValue).GetValue(), ":last"))

	got := f.rec.received("a")
	require.Len(t, got, 2)
	incs := slices.Sorted(maps.Keys(got))
	var want []string
	for i := 1; i <= n; i++ {
		want = append(want, fmt.Sprint("m", i))
	}
	want = append(want, "last")
	require.Equal(t, []string{"m0"}, got[incs[0]], "first incarnation")
	require.Equal(t, want, got[incs[1]], "second incarnation got every message, in order")

	// a's new incarnation is a use: b, now the least recently used, goes.
	f.waitEvents("stopped", "b", 1)
	require.Equal(t, []string{"a"}, f.passivation().Active)
	require.Empty(t, f.deadLetterReasons())
}

func TestSegmentedLeastRecentlyUsedPolicyKeepsReusedEntities(t *testing.T) {
	f := newFixture(t, shardactor.Settings{
		PassivationIdleTimeout: -1,
		ActiveEntityLimit:      2,
		ReplacementPolicy:      shardactor.SegmentedLeastRecentlyUsedPolicy,
	})
	f.deliver("a", wrapperspb.String("1"), nil)
	f.deliver("a", wrapperspb.String("2"), nil) // used twice: protected
	f.deliver("b", wrapperspb.String("1"), nil)
	f.deliver("c", wrapperspb.String("1"), nil) // least recently used would pass a
	f.waitEvents("stopped", "b", 1)
	require.Equal(t, []string{"c", "a"}, f.passivation().Active)
	require.Equal(t, 0, f.rec.count("stopped", "a"))
	require.Empty(t, f.deadLetterReasons())
}

func TestPassivationBadInput(t *testing.T) {
	// An unknown policy is logged and the default used; Props cannot fail.
	f := newFixture(t, shardactor.Settings{PassivationIdleTimeout: -1, ActiveEntityLimit: 1, ReplacementPolicy: "nope"})
	f.deliver("a", wrapperspb.String("1"), nil)
	f.deliver("b", wrapperspb.String("1"), nil)
	f.waitEvents("stopped", "a", 1)

	f.system.Root.Send(f.shard, &shardproto.SetActiveEntityLimit{Limit: -1})
	f.waitDeadLetter("negative active-entity limit -1")
	f.system.Root.Send(f.shard, (*shardproto.SetActiveEntityLimit)(nil))
	f.waitDeadLetter("nil SetActiveEntityLimit")
	f.system.Root.Send(f.shard, &shardproto.GetPassivationState{})
	f.waitDeadLetter("has no sender")
	require.Equal(t, 1, f.passivation().Limit, "the limit is unchanged")
}

func TestHandOffStopsAutomaticPassivation(t *testing.T) {
	f := newFixture(t, shardactor.Settings{
		PassivationIdleTimeout: idleTimeout,
		ActiveEntityLimit:      5,
		// The entity holds in its stop until released, so the shard is
		// surely still handing off when the limit arrives.
		HandOffStopMessage: wrapperspb.String("graceful-stop"),
	})
	f.deliver("a", wrapperspb.String("hello"), nil)
	f.waitEvents("received", "a", 1)
	stopped := f.watchStopped(f.shard)

	answer := f.system.Root.RequestFuture(f.shard, &messages.HandOff{Shard: shardID}, deadline)
	f.waitEvents("stopping", "a", 1)
	// Handled during the hand-off: a new limit is ignored, not dropped;
	// the state is answered.
	f.system.Root.Send(f.shard, &shardproto.SetActiveEntityLimit{Limit: 1})
	require.Equal(t, 5, f.passivation().Limit, "the limit is unchanged during the hand-off")
	f.releaseFn()
	res, err := answer.Result()
	require.NoError(t, err)
	require.Equal(t, &messages.ShardStopped{Shard: shardID}, res)
	waitClosed(t, stopped, "the shard to stop itself")
	require.Equal(t, 1, f.rec.count("stopped", "a"))
	require.Empty(t, f.deadLetterReasons())
}
