package shard_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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

// scriptedStore is a memory store whose calls fail as a test says: each
// call takes the next error of its queue (nil: the call goes through), and
// passes once the queue is empty, unless always is set.
type scriptedStore struct {
	*shardactor.MemoryRememberEntitiesStore
	mu           sync.Mutex
	updateErrs   []error
	getErrs      []error
	alwaysUpdate error         // when set, every Update fails with it
	getGate      chan struct{} // when set, GetEntities waits for it to close
	updateGate   chan struct{} // when set, Update waits for it to close
	updates      atomic.Int64
}

func newScriptedStore() *scriptedStore {
	return &scriptedStore{MemoryRememberEntitiesStore: shardactor.NewMemoryRememberEntitiesStore()}
}

func (s *scriptedStore) GetEntities(ctx context.Context, shardID string) ([]string, error) {
	s.mu.Lock()
	gate := s.getGate
	var err error
	if len(s.getErrs) > 0 {
		err, s.getErrs = s.getErrs[0], s.getErrs[1:]
	}
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if err != nil {
		return nil, fmt.Errorf("scripted store: get entities: %w", err)
	}
	return s.MemoryRememberEntitiesStore.GetEntities(ctx, shardID)
}

func (s *scriptedStore) Update(ctx context.Context, shardID string, started, stopped []string) error {
	s.updates.Add(1)
	s.mu.Lock()
	gate, err := s.updateGate, s.alwaysUpdate
	if err == nil && len(s.updateErrs) > 0 {
		err, s.updateErrs = s.updateErrs[0], s.updateErrs[1:]
	}
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if err != nil {
		return fmt.Errorf("scripted store: update: %w", err)
	}
	return s.MemoryRememberEntitiesStore.Update(ctx, shardID, started, stopped)
}

func (s *scriptedStore) setAlwaysUpdate(err error) {
	s.mu.Lock()
	s.alwaysUpdate = err
	s.mu.Unlock()
}

// errUnreachable stands for a transient store failure.
var errUnreachable = errors.New("store unreachable")

// fakeRegion is the part of a ShardRegion a remembering shard needs: it is
// the shard's parent, routes the shard's StartEntity back to it (as the
// region routes it to the shard the extractor names), and, as the region
// does with remember-entities, starts the shard again ShardFailureBackoff
// after it stopped unexpectedly.
type fakeRegion struct {
	props    *actor.Props
	backoff  time.Duration
	shard    *actor.PID
	spawned  chan *actor.PID // each shard incarnation
	stopped  chan struct{}   // each unexpected stop
	lastStop atomic.Int64    // unix nanos of the last stop
}

type restartShard struct{}

func (r *fakeRegion) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started, restartShard:
		pid, err := ctx.SpawnNamed(r.props, shardID)
		if err != nil {
			panic(err)
		}
		r.shard = pid
		r.spawned <- pid
	case *messages.StartEntity:
		ctx.RequestWithCustomSender(r.shard, &shardproto.Deliver{EntityID: msg.GetEntityId(), Message: msg}, ctx.Sender())
	case *actor.Terminated:
		r.lastStop.Store(time.Now().UnixNano())
		r.stopped <- struct{}{}
		ctx.ReenterAfter(actor.NewFuture(ctx.ActorSystem(), r.backoff), func(any, error) { ctx.Send(ctx.Self(), restartShard{}) })
	}
}

// regionFixture is a fixture whose shard is the child of a fakeRegion.
type regionFixture struct {
	*fixture
	region *fakeRegion
}

func newRegionFixture(t *testing.T, settings shardactor.Settings) *regionFixture {
	t.Helper()
	f := newBareFixture(t)
	system, entityProps := f.system, f.entityProps()
	r := &fakeRegion{
		props:   shard.Props("Counter", shardID, entityProps, settings, nil),
		backoff: shard.WithDefaults(settings).ShardFailureBackoff,
		spawned: make(chan *actor.PID, 10),
		stopped: make(chan struct{}, 10),
	}
	system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return r }))
	f.shard = receiveWithin(t, r.spawned, "the shard to start")
	return &regionFixture{fixture: f, region: r}
}

func receiveWithin[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(deadline):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

func rememberSettings(store shardactor.RememberEntitiesStore) shardactor.Settings {
	return shardactor.Settings{
		RememberEntities:      true,
		RememberEntitiesStore: store,
		ShardFailureBackoff:   300 * time.Millisecond,
		RetryInterval:         200 * time.Millisecond,
	}
}

// A write the store refuses for good: the messages that waited for it are
// dropped with the store's error as reason, the shard stops (its other
// entities with it), and once its region starts it again after the
// shard-failure back-off, it starts its remembered entities and takes
// messages again.
func TestRememberPermanentWriteErrorStopsTheShard(t *testing.T) {
	store := newScriptedStore()
	require.NoError(t, store.Update(context.Background(), shardID, []string{"good"}, nil))
	store.updateErrs = []error{fmt.Errorf("bucket 3 over its limit: %w", shardactor.ErrTooManyRememberedEntities)}
	f := newRegionFixture(t, rememberSettings(store))
	f.waitEvents("started", "good", 1)

	// The write waits until both messages are held for it.
	gate := make(chan struct{})
	store.mu.Lock()
	store.updateGate = gate
	store.mu.Unlock()
	f.deliver("bad", wrapperspb.String("hello"), nil)
	f.deliver("bad", wrapperspb.String("again"), nil)
	require.Equal(t, 1, f.stats().EntityCount, "bad waits for its write")
	close(gate)
	receiveWithin(t, f.region.stopped, "the shard to stop")
	waitFor(t, "both messages dropped with the store's reason", func() bool {
		return f.deadLetterCount(`cannot remember entity "bad"`) == 2 && f.deadLetterCount("too many remembered entities") >= 2
	}, func() any { return f.deadLetterReasons() })
	f.waitEvents("stopped", "good", 1)
	require.Zero(t, f.rec.count("started", "bad"))

	receiveWithin(t, f.region.spawned, "the region to start the shard again")
	require.GreaterOrEqual(t, time.Since(time.Unix(0, f.region.lastStop.Load())), 300*time.Millisecond,
		"started again after the shard-failure back-off")
	f.waitEvents("started", "good", 2)
	res, err := f.system.Root.RequestFuture(f.shard, &shardproto.Deliver{EntityID: "bad", Message: wrapperspb.String("third")}, deadline).Result()
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(res.(*wrapperspb.StringValue).GetValue(), ":third"))
	ids, err := store.GetEntities(context.Background(), shardID)
	require.NoError(t, err)
	require.Equal(t, []string{"bad", "good"}, ids)
}

// A read of the remembered entities the store refuses for good stops the
// shard too, dropping what waited for the read.
func TestRememberPermanentReadErrorStopsTheShard(t *testing.T) {
	store := newScriptedStore()
	store.getGate = make(chan struct{})
	store.getErrs = []error{fmt.Errorf("bucket 0: %w", shardactor.ErrCorruptRememberedEntities)}
	f := newRegionFixture(t, rememberSettings(store))
	f.deliver("a", wrapperspb.String("hello"), nil)
	require.Equal(t, 0, f.stats().EntityCount, "queries are answered while the entities are read")
	store.mu.Lock()
	close(store.getGate)
	store.getGate = nil
	store.mu.Unlock()

	receiveWithin(t, f.region.stopped, "the shard to stop")
	f.waitDeadLetter("cannot read the remembered entities")
	f.waitDeadLetter("corrupt remembered entities")
	receiveWithin(t, f.region.spawned, "the region to start the shard again")
	f.deliver("a", wrapperspb.String("later"), nil)
	f.waitEvents("received", "a", 1)
	require.Equal(t, []string{"later"}, onlyIncarnation(t, f.rec.received("a")))
}

// A transient store error that heals: the writes are retried and the
// entities start with every message, in order; nothing is dropped.
func TestRememberTransientErrorHeals(t *testing.T) {
	store := newScriptedStore()
	store.updateErrs = []error{errUnreachable, context.DeadlineExceeded}
	settings := rememberSettings(store)
	settings.UpdatingStateTimeout = 2 * time.Second // retries after 1s and 2s; messages may wait 6s
	f := newRegionFixture(t, settings)

	f.deliver("a", wrapperspb.String("m1"), nil)
	ack := f.system.Root.RequestFuture(f.shard, &messages.StartEntity{EntityId: "b"}, deadline)
	f.deliver("a", wrapperspb.String("m2"), nil)
	f.waitEvents("received", "a", 2)
	res, err := ack.Result()
	require.NoError(t, err)
	require.Equal(t, "b", res.(*messages.StartEntityAck).GetEntityId())
	require.Equal(t, []string{"m1", "m2"}, onlyIncarnation(t, f.rec.received("a")))
	require.EqualValues(t, 3, store.updates.Load(), "two failed writes, then one for both entities")
	require.Empty(t, f.deadLetterReasons())
	select {
	case <-f.region.stopped:
		t.Fatal("a transient error stopped the shard")
	default:
	}
}

// A transient store error that lasts: a message that waited longer than
// the bound is dropped with a dead-letter event instead of waiting for
// ever; the shard keeps trying, and once the store heals the entity runs.
func TestRememberTransientErrorDropsMessagesAfterTheBound(t *testing.T) {
	store := newScriptedStore()
	store.setAlwaysUpdate(errUnreachable)
	settings := rememberSettings(store)
	settings.UpdatingStateTimeout = 100 * time.Millisecond // bound 300ms
	f := newRegionFixture(t, settings)

	f.deliver("a", wrapperspb.String("m1"), nil)
	ack := f.system.Root.RequestFuture(f.shard, &messages.StartEntity{EntityId: "a"}, deadline)
	waitFor(t, "both dropped after the bound", func() bool {
		return f.deadLetterCount(`waited longer than 300ms for entity "a" to be remembered (scripted store: update: store unreachable)`) == 2
	}, func() any { return f.deadLetterReasons() })
	_, err := ack.Result()
	require.Error(t, err, "the StartEntity was dropped, not acknowledged")
	require.Zero(t, f.rec.count("started", "a"))

	store.setAlwaysUpdate(nil)
	f.waitEvents("started", "a", 1)
	f.deliver("a", wrapperspb.String("m2"), nil)
	f.waitEvents("received", "a", 1)
	require.Equal(t, []string{"m2"}, onlyIncarnation(t, f.rec.received("a")))
	select {
	case <-f.region.stopped:
		t.Fatal("a transient error stopped the shard")
	default:
	}
}

// A message for an entity whose passivation is being written to the store:
// the entity runs again once the stop is written, and stays remembered.
func TestRememberMessageWhileTheStopIsWritten(t *testing.T) {
	store := newScriptedStore()
	f := newRegionFixture(t, rememberSettings(store))
	f.deliver("p", wrapperspb.String("m0"), nil)
	f.waitEvents("received", "p", 1)
	gate := make(chan struct{})
	store.mu.Lock()
	store.updateGate = gate
	store.mu.Unlock()
	writes := store.updates.Load()

	f.deliver("p", wrapperspb.String("passivate-poison"), nil)
	f.waitEvents("stopped", "p", 1)
	waitFor(t, "the stop being written", func() bool { return store.updates.Load() > writes }, func() any { return store.updates.Load() })
	f.deliver("p", wrapperspb.String("m1"), nil)
	require.Equal(t, 0, f.stats().EntityCount, "p waits for its stop to be written")
	close(gate)

	f.waitEvents("received", "p", 2)
	waitFor(t, "p remembered", func() bool {
		ids, err := store.GetEntities(context.Background(), shardID)
		return err == nil && len(ids) == 1 && ids[0] == "p"
	}, func() any { ids, _ := store.GetEntities(context.Background(), shardID); return ids })
	require.Equal(t, 2, f.rec.count("started", "p"))
	require.Empty(t, f.deadLetterReasons())
}

// Messages that waited while the remembered entities were read are
// handled before any that came after, in the order sent.
func TestRememberMessagesWaitingForTheReadKeepTheirOrder(t *testing.T) {
	store := newScriptedStore()
	store.getGate = make(chan struct{})
	f := newRegionFixture(t, rememberSettings(store))
	// Enough messages that some queue up behind the read's answer while
	// the shard works through the earlier ones.
	const n = 20000
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := 1; i <= n; i++ {
			f.deliver("a", wrapperspb.String(fmt.Sprint(i)), nil)
			if i == n/4 {
				// The read answers while messages keep coming.
				store.mu.Lock()
				close(store.getGate)
				store.getGate = nil
				store.mu.Unlock()
			}
		}
	}()
	<-sent
	f.waitEvents("received", "a", n)
	var want []string
	for i := 1; i <= n; i++ {
		want = append(want, fmt.Sprint(i))
	}
	require.Equal(t, want, onlyIncarnation(t, f.rec.received("a")))
	require.Empty(t, f.deadLetterReasons())
}

// onlyIncarnation returns what the one incarnation of an entity received.
func onlyIncarnation(t *testing.T, byIncarnation map[int64][]string) []string {
	t.Helper()
	require.Len(t, byIncarnation, 1, "one incarnation")
	for _, values := range byIncarnation {
		return values
	}
	return nil
}
