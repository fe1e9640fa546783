package rebalance_test

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/rebalance"
	"github.com/protoshard/protoshard/messages"
	"github.com/stretchr/testify/require"
)

// deadline is generous: the machine is slow and shared. Tests wait for
// events, so a fast run stays fast.
const deadline = 10 * time.Second

const shard = "42"

// testEpoch is the coordinator's epoch the workers are given; every command
// they send must carry it (the fake regions record one that does not).
const testEpoch = 77

type fixture struct {
	t      *testing.T
	system *actor.ActorSystem

	mu          sync.Mutex
	log         []string // "<region> <message type>" as the fake regions got them
	deadLetters []string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	f := &fixture{t: t, system: system}
	sub := system.EventStream.Subscribe(func(evt any) {
		if d, ok := evt.(*deadletter.Event); ok {
			f.mu.Lock()
			f.deadLetters = append(f.deadLetters, d.Reason)
			f.mu.Unlock()
		}
	})
	t.Cleanup(func() {
		system.EventStream.Unsubscribe(sub)
		system.Shutdown()
	})
	return f
}

func (f *fixture) record(s string) {
	f.mu.Lock()
	f.log = append(f.log, s)
	f.mu.Unlock()
}

func (f *fixture) seen(s string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.log, s)
}

func (f *fixture) snapshot() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log)
}

// region spawns a fake region named name. It records what it gets, acks
// BeginHandOff if ack, and calls onHandOff (if any) on HandOff.
func (f *fixture) region(name string, ack bool, onHandOff func(ctx actor.Context, h *messages.HandOff)) *actor.PID {
	pid, err := f.system.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		switch msg := ctx.Message().(type) {
		case *messages.BeginHandOff:
			if msg.GetEpoch() != testEpoch {
				f.record(fmt.Sprintf("%s BeginHandOff at epoch %d", name, msg.GetEpoch()))
			}
			f.record(name + " BeginHandOff")
			if ack {
				// With the region as sender (not ctx.Respond): the worker
				// needs it to know which region acknowledges.
				ctx.Request(ctx.Sender(), &messages.BeginHandOffAck{Shard: msg.GetShard()})
			}
		case *messages.HandOff:
			if msg.GetEpoch() != testEpoch {
				f.record(fmt.Sprintf("%s HandOff at epoch %d", name, msg.GetEpoch()))
			}
			f.record(name + " HandOff")
			if onHandOff != nil {
				onHandOff(ctx, msg)
			}
		}
	}), name)
	require.NoError(f.t, err)
	return pid
}

// answerShardStopped is the owner's normal answer to HandOff.
func answerShardStopped(ctx actor.Context, h *messages.HandOff) {
	ctx.Respond(&messages.ShardStopped{Shard: h.GetShard()})
}

// toWorker asks the test parent to send msg to its worker child.
type toWorker struct{ msg any }

// coordinator is the test parent: it spawns the worker as its child and
// passes on everything it gets.
type coordinator struct {
	pid    *actor.PID
	worker *actor.PID
	got    chan any
}

func (f *fixture) startWorker(props *actor.Props) *coordinator {
	c := &coordinator{got: make(chan any, 100)}
	ready := make(chan struct{})
	c.pid = f.system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch msg := ctx.Message().(type) {
		case *actor.Started:
			c.worker = ctx.Spawn(props)
			close(ready)
		case toWorker:
			ctx.Send(c.worker, msg.msg)
		case *actor.Terminated:
			c.got <- fmt.Sprintf("terminated %s", msg.Who.Id)
		case *actor.Stopping, *actor.Stopped, *actor.Restarting:
		default:
			c.got <- msg
		}
	}))
	<-ready
	return c
}

// done waits for the RebalanceDone and for the worker to stop. The two come
// in either order: proto.actor delivers the Terminated (a system message)
// ahead of user messages still in the parent's mailbox.
func (c *coordinator) done(t *testing.T) *messages.RebalanceDone {
	t.Helper()
	var result *messages.RebalanceDone
	stopped := false
	end := time.After(deadline)
	for result == nil || !stopped {
		select {
		case m := <-c.got:
			switch m := m.(type) {
			case *messages.RebalanceDone:
				require.Nil(t, result, "one RebalanceDone only")
				result = m
			case string:
				if m == "terminated "+c.worker.Id {
					stopped = true
				}
			default:
				t.Fatalf("unexpected message to the coordinator: %T %v", m, m)
			}
		case <-end:
			t.Fatalf("timed out waiting for RebalanceDone (got %v) and the worker to stop (%v)", result, stopped)
		}
	}
	return result
}

func copyPID(pid *actor.PID) *actor.PID { return actor.NewPID(pid.Address, pid.Id) }

func waitFor(t *testing.T, what string, cond func() bool, state func() any) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s; state: %v", what, state())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestHappyPath(t *testing.T) {
	f := newFixture(t)
	from := f.region("from", true, answerShardStopped)
	r2 := f.region("r2", true, nil)
	proxy := f.region("proxy", true, nil)

	// Copies: the worker must compare PIDs by address and id, never by
	// pointer. Duplicates are asked once.
	regions := []*actor.PID{copyPID(from), copyPID(r2), copyPID(proxy), copyPID(r2)}
	c := f.startWorker(rebalance.Props(shard, copyPID(from), deadline, regions, true, testEpoch))

	require.Equal(t, &messages.RebalanceDone{Shard: shard, Ok: true}, c.done(t))
	log := f.snapshot()
	require.ElementsMatch(t, []string{"from BeginHandOff", "r2 BeginHandOff", "proxy BeginHandOff", "from HandOff"}, log)
	require.Equal(t, "from HandOff", log[len(log)-1], "HandOff only after every BeginHandOff")
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Empty(t, f.deadLetters)
}

func TestStoppedRegionCountsAsAcknowledged(t *testing.T) {
	f := newFixture(t)
	from := f.region("from", true, answerShardStopped)
	mute := f.region("mute", false, nil)
	gone := actor.NewPID(f.system.Address(), "never-existed")

	c := f.startWorker(rebalance.Props(shard, from, deadline, []*actor.PID{from, mute, gone}, true, testEpoch))
	waitFor(t, "mute asked", func() bool { return f.seen("mute BeginHandOff") }, func() any { return f.snapshot() })
	require.False(t, f.seen("from HandOff"), "still waiting for mute")
	f.system.Root.Stop(mute)

	require.Equal(t, &messages.RebalanceDone{Shard: shard, Ok: true}, c.done(t))
	require.True(t, f.seen("from HandOff"))
}

func TestRegionThatNeverAcksTimesOut(t *testing.T) {
	f := newFixture(t)
	from := f.region("from", true, answerShardStopped)
	mute := f.region("mute", false, nil)

	c := f.startWorker(rebalance.Props(shard, from, 300*time.Millisecond, []*actor.PID{from, mute}, false, testEpoch))
	require.Equal(t, &messages.RebalanceDone{Shard: shard, Ok: false}, c.done(t))
	require.False(t, f.seen("from HandOff"), "no HandOff without every ack")
}

func TestRegionTerminatedCountsAsAcknowledged(t *testing.T) {
	f := newFixture(t)
	from := f.region("from", true, answerShardStopped)
	mute := f.region("mute", false, nil)

	c := f.startWorker(rebalance.Props(shard, from, deadline, []*actor.PID{from, mute}, true, testEpoch))
	waitFor(t, "mute asked", func() bool { return f.seen("mute BeginHandOff") }, func() any { return f.snapshot() })
	f.system.Root.Send(c.pid, toWorker{&rebalance.RegionTerminated{Region: copyPID(mute)}})

	require.Equal(t, &messages.RebalanceDone{Shard: shard, Ok: true}, c.done(t))
	require.True(t, f.seen("from HandOff"))
}

func TestOwnerStoppedWhileStoppingShard(t *testing.T) {
	f := newFixture(t)
	// The owner never answers HandOff; it stops, and its entities with it.
	from := f.region("from", true, func(ctx actor.Context, _ *messages.HandOff) { ctx.Stop(ctx.Self()) })

	c := f.startWorker(rebalance.Props(shard, from, deadline, []*actor.PID{from}, true, testEpoch))
	require.Equal(t, &messages.RebalanceDone{Shard: shard, Ok: true}, c.done(t))
}

func TestOwnerRemovedWhileStoppingShard(t *testing.T) {
	f := newFixture(t)
	from := f.region("from", true, func(ctx actor.Context, _ *messages.HandOff) {
		// What the coordinator sends when the owner's member is removed
		// (sent from here, to the HandOff's sender, the worker, to make it
		// arrive in stoppingShard).
		ctx.Send(ctx.Sender(), &rebalance.RegionTerminated{Region: copyPID(ctx.Self())})
	})
	c := f.startWorker(rebalance.Props(shard, from, deadline, []*actor.PID{from}, true, testEpoch))
	require.Equal(t, &messages.RebalanceDone{Shard: shard, Ok: true}, c.done(t))
}

func TestOwnerUnreachableIsNotStopped(t *testing.T) {
	f := newFixture(t)
	// A lost connection (AddressTerminated) does not prove the owner's
	// entities stopped: the worker keeps waiting and times out.
	from := f.region("from", true, func(ctx actor.Context, _ *messages.HandOff) {
		ctx.Send(ctx.Sender(), &actor.Terminated{Who: copyPID(ctx.Self()), Why: actor.TerminatedReason_AddressTerminated})
	})
	c := f.startWorker(rebalance.Props(shard, from, time.Second, []*actor.PID{from}, true, testEpoch))
	require.Equal(t, &messages.RebalanceDone{Shard: shard, Ok: false}, c.done(t))
	require.True(t, f.seen("from HandOff"))
}

func TestOwnerThatNeverAnswersHandOffTimesOut(t *testing.T) {
	f := newFixture(t)
	from := f.region("from", true, nil)
	c := f.startWorker(rebalance.Props(shard, from, 300*time.Millisecond, []*actor.PID{from}, false, testEpoch))
	require.Equal(t, &messages.RebalanceDone{Shard: shard, Ok: false}, c.done(t))
	require.True(t, f.seen("from HandOff"))
}

func TestOwnerGoneBeforeAllAcks(t *testing.T) {
	f := newFixture(t)
	from := f.region("from", false, answerShardStopped)
	mute := f.region("mute", false, nil)
	c := f.startWorker(rebalance.Props(shard, from, deadline, []*actor.PID{from, mute}, true, testEpoch))
	waitFor(t, "both asked", func() bool { return f.seen("from BeginHandOff") && f.seen("mute BeginHandOff") },
		func() any { return f.snapshot() })
	f.system.Root.Stop(from)
	f.system.Root.Send(c.pid, toWorker{&rebalance.RegionTerminated{Region: mute}})
	// The owner's entities went with it: no HandOff needed.
	require.Equal(t, &messages.RebalanceDone{Shard: shard, Ok: true}, c.done(t))
	require.False(t, f.seen("from HandOff"))
}

func TestStrayMessagesAreDropped(t *testing.T) {
	f := newFixture(t)
	from := f.region("from", true, func(ctx actor.Context, h *messages.HandOff) {
		// A ShardStopped for another shard first: dropped, not taken as done.
		ctx.Respond(&messages.ShardStopped{Shard: "other"})
		ctx.Respond(&messages.ShardStopped{Shard: h.GetShard()})
	})
	mute := f.region("mute", false, nil)
	stranger := f.region("stranger", false, nil)
	c := f.startWorker(rebalance.Props(shard, from, deadline, []*actor.PID{from, mute}, true, testEpoch))
	waitFor(t, "mute asked", func() bool { return f.seen("mute BeginHandOff") }, func() any { return f.snapshot() })

	// An ack for another shard, an ack from a region that was not asked,
	// and an ack without a sender: none of them counts.
	f.system.Root.RequestWithCustomSender(c.worker, &messages.BeginHandOffAck{Shard: "other"}, mute)
	f.system.Root.RequestWithCustomSender(c.worker, &messages.BeginHandOffAck{Shard: shard}, stranger)
	f.system.Root.Send(c.worker, &messages.BeginHandOffAck{Shard: shard})
	f.system.Root.Send(c.worker, "junk")
	waitFor(t, "four drops", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.deadLetters) >= 4
	}, func() any { return f.deadLetters })
	require.False(t, f.seen("from HandOff"), "still waiting for mute's ack")

	f.system.Root.RequestWithCustomSender(c.worker, &messages.BeginHandOffAck{Shard: shard}, copyPID(mute))
	require.Equal(t, &messages.RebalanceDone{Shard: shard, Ok: true}, c.done(t))
	f.mu.Lock()
	defer f.mu.Unlock()
	require.True(t, slices.ContainsFunc(f.deadLetters, func(r string) bool { return strings.Contains(r, `ShardStopped for shard "other"`) }),
		"%v", f.deadLetters)
	require.True(t, slices.ContainsFunc(f.deadLetters, func(r string) bool { return strings.Contains(r, "which was not asked") }))
	require.True(t, slices.ContainsFunc(f.deadLetters, func(r string) bool { return strings.Contains(r, "without a sender") }))
}

// A region that ignores the first BeginHandOff (it has not registered with
// the worker's coordinator yet, right after the coordinator moved) gets it
// again and acknowledges; the hand-off completes well before the time-out.
func TestBeginHandOffIsResentUntilAcknowledged(t *testing.T) {
	f := newFixture(t)
	from := f.region("from", true, answerShardStopped)
	var asked int
	late, err := f.system.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		if msg, ok := ctx.Message().(*messages.BeginHandOff); ok {
			asked++
			f.record(fmt.Sprintf("late BeginHandOff %d", asked))
			if asked >= 2 {
				ctx.Request(ctx.Sender(), &messages.BeginHandOffAck{Shard: msg.GetShard()})
			}
		}
	}), "late")
	require.NoError(t, err)
	c := f.startWorker(rebalance.Props(shard, from, deadline, []*actor.PID{from, late}, true, testEpoch))
	start := time.Now()
	require.Equal(t, &messages.RebalanceDone{Shard: shard, Ok: true}, c.done(t))
	require.Less(t, time.Since(start), deadline/2, "done by the resend, not at the time-out")
	require.Contains(t, f.snapshot(), "late BeginHandOff 2")
}

// A nil message to a worker is a dead-letter event with the reason
// (proto.actor's own mailbox would spin on it for ever); the worker goes on
// with the hand-off.
func TestNilMessageIsDropped(t *testing.T) {
	f := newFixture(t)
	from := f.region("from", true, answerShardStopped)
	slow := f.region("slow", false, nil)
	c := f.startWorker(rebalance.Props(shard, from, deadline, []*actor.PID{from, slow}, true, testEpoch))
	waitFor(t, "BeginHandOff to both regions", func() bool { return f.seen("from BeginHandOff") && f.seen("slow BeginHandOff") }, func() any { return f.snapshot() })
	f.system.Root.Send(c.worker, nil)
	waitFor(t, "a nil-message event", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, r := range f.deadLetters {
			if strings.Contains(r, "nil message") && strings.Contains(r, c.worker.Id) {
				return true
			}
		}
		return false
	}, func() any { f.mu.Lock(); defer f.mu.Unlock(); return slices.Clone(f.deadLetters) })
	// The slow region's ack, with it as the sender, completes the hand-off.
	f.system.Root.RequestWithCustomSender(c.worker, &messages.BeginHandOffAck{Shard: shard}, slow)
	require.Equal(t, &messages.RebalanceDone{Shard: shard, Ok: true}, c.done(t))
}
