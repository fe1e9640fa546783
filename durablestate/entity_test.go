package durablestate_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/durablestate"
	"github.com/protoshard/protoshard/internal/testsupport"
)

// incarnation is an actor that recovers entity "acc-1" from its store
// (a sharded one: the entity of its context), reports its recovery, and
// persists what it is asked to. A sharded one keeps a balance in decimal,
// which an Int64Value changes (answered with the balance, or with the
// error that stopped it).
type incarnation struct {
	store     durablestate.Store
	sharded   bool
	node      string
	state     *durablestate.Entity
	balance   int64
	recovered chan recovered
	stopped   chan struct{}
}

type recovered struct {
	node    string
	pid     *actor.PID
	payload []byte
	token   uint64
	err     error
}

type persist struct {
	payload []byte
	done    chan error
}

func (a *incarnation) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.recover(ctx)
	case *persist:
		m.done <- a.state.Persist(ctx, m.payload)
	case *wrapperspb.Int64Value:
		next := a.balance + m.GetValue()
		if err := a.state.Persist(ctx, []byte(strconv.FormatInt(next, 10))); err != nil {
			ctx.Respond(wrapperspb.String(err.Error()))
			return
		}
		a.balance = next
		ctx.Respond(wrapperspb.Int64(a.balance))
	case *actor.Stopped:
		if a.stopped != nil {
			close(a.stopped)
		}
	}
}

func (a *incarnation) recover(ctx actor.Context) {
	r := recovered{node: a.node, pid: ctx.Self()}
	id := "acc-1"
	if a.sharded {
		id, r.err = actorsharding.EntityID(ctx)
	}
	if r.err == nil {
		a.state, r.payload, r.err = durablestate.Recover(ctx, a.store, id)
	}
	if r.err == nil && a.sharded && len(r.payload) > 0 {
		a.balance, r.err = strconv.ParseInt(string(r.payload), 10, 64)
	}
	if r.err == nil {
		r.token = a.state.Token()
	}
	a.recovered <- r
}

type node struct {
	t      *testing.T
	system *actor.ActorSystem
	logs   *testsupport.Logs
}

func newNode(t *testing.T) *node {
	logs := &testsupport.Logs{}
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logs.Logger() }))
	t.Cleanup(system.Shutdown)
	return &node{t: t, system: system, logs: logs}
}

// start starts an incarnation and waits for its recovery.
func (n *node) start(store durablestate.Store) (*actor.PID, *incarnation, recovered) {
	n.t.Helper()
	a := &incarnation{store: store, recovered: make(chan recovered, 1), stopped: make(chan struct{})}
	pid := n.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return a }))
	select {
	case r := <-a.recovered:
		return pid, a, r
	case <-time.After(10 * time.Second):
		n.t.Fatal("no recovery within 10s")
		return nil, nil, recovered{}
	}
}

func (n *node) persist(pid *actor.PID, payload string) error {
	n.t.Helper()
	done := make(chan error, 1)
	n.system.Root.Send(pid, &persist{payload: []byte(payload), done: done})
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		n.t.Fatalf("no answer to persist %q within 10s", payload)
		return nil
	}
}

func waitStopped(t *testing.T, a *incarnation) {
	t.Helper()
	select {
	case <-a.stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the incarnation did not stop within 10s")
	}
}

func assertStored(t *testing.T, store durablestate.Store, payload string, token uint64) {
	t.Helper()
	r, err := store.Load(context.Background(), "acc-1")
	if err != nil || string(r.Payload) != payload || r.Token != token {
		t.Fatalf("stored %+v, %v; want payload %q, token %d", r, err, payload, token)
	}
}

// The older of two incarnations is refused at its next save once the
// newer one has started, whether or not the newer one has saved since,
// and it stops.
func TestStaleIncarnationIsFenced(t *testing.T) {
	for _, newerSaves := range []bool{false, true} {
		n := newNode(t)
		store := durablestate.NewMemoryStore()
		old, oldActor, r1 := n.start(store)
		if r1.err != nil || r1.payload != nil || r1.token != 1 {
			t.Fatalf("first recovery = %+v, want no payload, token 1", r1)
		}
		if err := n.persist(old, "balance 10"); err != nil {
			t.Fatal(err)
		}
		// The old incarnation's node is cut off; the entity starts elsewhere.
		newer, _, r2 := n.start(store)
		if r2.err != nil || string(r2.payload) != "balance 10" || r2.token != 2 {
			t.Fatalf("second recovery = %+v, want balance 10, token 2", r2)
		}
		want := "balance 10"
		if newerSaves {
			want = "balance 15"
			if err := n.persist(newer, want); err != nil {
				t.Fatal(err)
			}
		}
		err := n.persist(old, "balance 0")
		if !errors.Is(err, durablestate.ErrFenced) {
			t.Fatalf("newer saves %v: stale incarnation's Persist = %v, want ErrFenced", newerSaves, err)
		}
		waitStopped(t, oldActor)
		assertStored(t, store, want, 2)
		if err := n.persist(newer, "balance 20"); err != nil {
			t.Fatalf("newer incarnation's Persist after the fence: %v", err)
		}
		var warned bool
		for _, l := range n.logs.Lines() {
			if l.Level == slog.LevelWarn && strings.Contains(l.Message, "stale") && l.Attrs["entity"] == "acc-1" {
				warned = true
			}
			if l.Level >= slog.LevelError {
				t.Errorf("logged at error: %s", l)
			}
		}
		if !warned {
			t.Errorf("the fenced stop was not logged at warn: %v", n.logs.Lines())
		}
	}
}

// An incarnation that reads the newer state again and retries its save
// (as on a revision conflict) is still refused: its token is old.
func TestStaleIncarnationRetryingOnANewRevisionIsFenced(t *testing.T) {
	store := durablestate.NewMemoryStore()
	ctx := context.Background()
	n := newNode(t)
	_, _, r1 := n.start(store)
	newer, _, _ := n.start(store)
	if err := n.persist(newer, "by newer"); err != nil {
		t.Fatal(err)
	}
	cur, err := store.Load(ctx, "acc-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Save(ctx, "acc-1", []byte("by stale"), cur.Revision, r1.token); !errors.Is(err, durablestate.ErrFenced) {
		t.Fatalf("stale token %d at the current revision = %v, want ErrFenced", r1.token, err)
	}
}

// An incarnation that starts after the previous one stopped recovers what
// it saved, with a higher token.
func TestNextIncarnationRecoversTheState(t *testing.T) {
	store := durablestate.NewMemoryStore()
	n := newNode(t)
	pid, a, _ := n.start(store)
	for _, p := range []string{"1", "2", "3"} {
		if err := n.persist(pid, p); err != nil {
			t.Fatal(err)
		}
	}
	n.system.Root.Stop(pid)
	waitStopped(t, a)
	_, _, r := n.start(store)
	if r.err != nil || string(r.payload) != "3" || r.token != 2 {
		t.Fatalf("recovery = %+v, want payload 3, token 2", r)
	}
}

// failingStore fails every call.
type failingStore struct{}

var errUnavailable = errors.New("store unavailable")

func (failingStore) Load(context.Context, string) (durablestate.Record, error) {
	return durablestate.Record{}, errUnavailable
}

func (failingStore) Save(context.Context, string, []byte, uint64, uint64) (uint64, error) {
	return 0, errUnavailable
}

// An entity whose state cannot be loaded stops instead of running on an
// empty state, and says so at error.
func TestRecoverFailureStopsTheEntity(t *testing.T) {
	n := newNode(t)
	_, a, r := n.start(failingStore{})
	if !errors.Is(r.err, errUnavailable) {
		t.Fatalf("Recover = %v, want the store's error", r.err)
	}
	waitStopped(t, a)
	var logged bool
	for _, l := range n.logs.Lines() {
		logged = logged || (l.Level == slog.LevelError && l.Attrs["entity"] == "acc-1")
	}
	if !logged {
		t.Errorf("the failed recovery was not logged at error: %v", n.logs.Lines())
	}
}
