package shard

import (
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/deadletter"
)

// proto.actor keeps a Props' mailbox unexported; entityMailboxes reads it
// to keep the user's mailbox inside its own. If this fails, proto.actor's
// Props changed shape: mailboxProducerOf must follow, or entities lose
// what reaches them after they stop without an event again (the shard
// warns so at its start).
func TestMailboxProducerOfReadsPropsMailbox(t *testing.T) {
	if p, ok := mailboxProducerOf(actor.PropsFromFunc(func(actor.Context) {})); !ok || p != nil {
		t.Fatalf("props without a mailbox: producer %v, ok %v; want nil, true", p != nil, ok)
	}
	own := actor.Unbounded()()
	props := actor.PropsFromFunc(func(actor.Context) {}, actor.WithMailbox(func() actor.Mailbox { return own }))
	p, ok := mailboxProducerOf(props)
	if !ok || p == nil {
		t.Fatalf("proto.actor's Props has no mailboxProducer field of type actor.MailboxProducer any more (ok %v, found %v)", ok, p != nil)
	}
	if p() != own {
		t.Fatal("mailboxProducerOf found another producer than the one WithMailbox set")
	}
	wrapped, ok := entityMailboxes(props, &entityShard{typeName: "T", shardID: "1"})
	if !ok || wrapped == props {
		t.Fatalf("entityMailboxes: ok %v, props unchanged %v", ok, wrapped == props)
	}
	if m, _ := mailboxProducerOf(wrapped); m == nil {
		t.Fatal("entityMailboxes set no mailbox")
	} else if em, isEntity := m().(*entityMailbox); !isEntity || em.Mailbox != own {
		t.Fatalf("entityMailboxes made %T, not an entityMailbox around the props' own mailbox", m())
	}
}

// quietSystem is an actor system that logs nothing, shut down at the
// test's end.
func quietSystem(t *testing.T) *actor.ActorSystem {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	t.Cleanup(system.Shutdown)
	return system
}

// mailboxProbe runs actors spawned with entityMailboxes' props and collects
// what they receive and what is reported dropped.
type mailboxProbe struct {
	system  *actor.ActorSystem
	props   *actor.Props
	waiting chan struct{} // the actor holds its mailbox
	release chan struct{}

	mu       sync.Mutex
	received []int
	dropped  []*deadletter.Event
}

func newMailboxProbe(t *testing.T) *mailboxProbe {
	p := &mailboxProbe{system: quietSystem(t), waiting: make(chan struct{}, 1), release: make(chan struct{})}
	p.system.EventStream.Subscribe(func(e any) {
		if d, ok := e.(*deadletter.Event); ok {
			p.mu.Lock()
			p.dropped = append(p.dropped, d)
			p.mu.Unlock()
		}
	})
	props, ok := entityMailboxes(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case string: // "wait": hold the mailbox until released
			p.waiting <- struct{}{}
			<-p.release
		case int:
			p.mu.Lock()
			p.received = append(p.received, m)
			p.mu.Unlock()
			if ctx.Sender() != nil {
				ctx.Respond(m)
			}
		}
	}), &entityShard{typeName: "T", shardID: "1"})
	if !ok {
		t.Fatal("entityMailboxes cannot wrap the props")
	}
	p.props = props
	return p
}

// counts returns what was received, and the ints dropped with
// ErrEntityStopped; other drops fail the test.
func (p *mailboxProbe) counts(t *testing.T) (received, dropped []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range p.dropped {
		n, ok := d.Message.(int)
		if !ok || !errors.Is(d.Err, deadletter.ErrEntityStopped) {
			t.Fatalf("unexpected drop %v", d)
		}
		dropped = append(dropped, n)
	}
	return slices.Clone(p.received), dropped
}

func (p *mailboxProbe) waitFor(t *testing.T, what string, cond func(received, dropped []int) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, d := p.counts(t)
		if cond(r, d) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: received %v, dropped %v", what, r, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func sendRange(system *actor.ActorSystem, pid *actor.PID, from, to int) {
	for i := from; i < to; i++ {
		system.Root.Send(pid, i)
	}
}

// What is queued behind an entity's stop, and what is sent to it later
// through a PID that reached it before, becomes a dead-letter event with
// ErrEntityStopped; proto.actor would discard it silently. A request among
// them fails at once. Once the entity runs again, the same PID reaches the
// new incarnation.
func TestEntityMailboxReportsWhatReachesAStoppedEntity(t *testing.T) {
	p := newMailboxProbe(t)
	pid, err := p.system.Root.SpawnNamed(p.props, "e")
	if err != nil {
		t.Fatal(err)
	}
	p.system.Root.Send(pid, "wait")
	<-p.waiting
	sendRange(p.system, pid, 0, 100)
	stopped := p.system.Root.StopFuture(pid) // overtakes the 100 queued
	close(p.release)
	if err := stopped.Wait(); err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, "the 100 queued behind the stop", func(r, d []int) bool { return len(r)+len(d) == 100 })
	if r, _ := p.counts(t); len(r) > 0 {
		t.Fatalf("the stopped entity received %v", r)
	}

	sendRange(p.system, pid, 100, 150) // pid holds the entity's process
	p.waitFor(t, "the 50 sent after the stop", func(r, d []int) bool { return len(d) == 150 })
	start := time.Now()
	if _, err := p.system.Root.RequestFuture(pid, 150, 10*time.Second).Result(); !errors.Is(err, actor.ErrDeadLetter) {
		t.Fatalf("request to the stopped entity: %v, want ErrDeadLetter", err)
	} else if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("request to the stopped entity failed after %v, not at once", took)
	}

	if _, err := p.system.Root.SpawnNamed(p.props, "e"); err != nil {
		t.Fatal(err)
	}
	sendRange(p.system, pid, 200, 210)
	p.waitFor(t, "the next incarnation", func(r, d []int) bool { return len(r) == 10 })
	if r, d := p.counts(t); !slices.Equal(r, []int{200, 201, 202, 203, 204, 205, 206, 207, 208, 209}) || len(d) != 151 {
		t.Fatalf("the next incarnation received %v (dropped %d), want 200..209 in order", r, len(d))
	}
}

// An entity's own mailbox, from its props, still takes its messages.
func TestEntityMailboxKeepsThePropsMailbox(t *testing.T) {
	system := quietSystem(t)
	var made atomic.Int32
	got := make(chan int, 1)
	props, ok := entityMailboxes(actor.PropsFromFunc(func(ctx actor.Context) {
		if n, isInt := ctx.Message().(int); isInt {
			got <- n
		}
	}, actor.WithMailbox(func() actor.Mailbox { made.Add(1); return actor.Unbounded()() })), &entityShard{typeName: "T", shardID: "1"})
	if !ok {
		t.Fatal("entityMailboxes cannot wrap the props")
	}
	system.Root.Send(system.Root.Spawn(props), 7)
	select {
	case n := <-got:
		if n != 7 || made.Load() != 1 {
			t.Fatalf("received %d; the props' mailbox producer made %d mailboxes, want 1", n, made.Load())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the entity received nothing")
	}
}
