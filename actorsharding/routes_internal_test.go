package actorsharding

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/shardproto"
)

type countingProcess struct{ n atomic.Int64 }

func (p *countingProcess) SendUserMessage(*actor.PID, any)   { p.n.Add(1) }
func (p *countingProcess) SendSystemMessage(*actor.PID, any) {}
func (p *countingProcess) Stop(*actor.PID)                   {}

// TestEntityRoutes drives a shard's routes as the shard and the router
// use them: open, send, use, close, reopen.
func TestEntityRoutes(t *testing.T) {
	system := actor.NewActorSystem()
	table := newRouteTable(system, "T")
	sr := table.shard("7")
	if sr != table.shard("7") {
		t.Fatal("a shard's route is made twice")
	}
	target := &countingProcess{}
	pid, _ := system.ProcessRegistry.Add(target, "entity-a")
	send := func() bool {
		e := table.entities.get("a")
		return e != nil && e.send(system.Root, nil, "m")
	}

	if send() {
		t.Fatal("sent to an entity never opened")
	}
	sr.Open("a", pid)
	first := table.entities.get("a")
	sr.Open("a", pid) // already open to pid: kept
	if table.entities.get("a") != first {
		t.Fatal("opening an open route again replaced it")
	}
	if sr.TakeUsed("a") {
		t.Fatal("used before any send")
	}
	sent1, sent2 := send(), send() // two sends, each counted
	if !sent1 || !sent2 || target.n.Load() != 2 {
		t.Fatalf("sends through an open route: %d arrived, want 2", target.n.Load())
	}
	if !sr.TakeUsed("a") || sr.TakeUsed("a") {
		t.Fatal("TakeUsed: want true once after sends, then false")
	}
	sr.Close("a")
	if send() || first.send(system.Root, nil, "late") {
		t.Fatal("sent through a closed route")
	}
	if target.n.Load() != 2 {
		t.Fatalf("%d arrived after the close, want 2", target.n.Load())
	}
	sr.Close("a") // closing a closed route does nothing

	// A new incarnation replaces the route; the old one is closed.
	other, _ := system.ProcessRegistry.Add(&countingProcess{}, "entity-a2")
	sr.Open("a", pid)
	old := table.entities.get("a")
	sr.Open("a", other)
	if old.send(system.Root, nil, "x") {
		t.Fatal("the replaced route still sends")
	}
	if table.entities.get("a").pid != other {
		t.Fatal("the route does not lead to the new incarnation")
	}
}

// TestPending: each mark counts once, however often it is released.
func TestPending(t *testing.T) {
	var count atomic.Int64
	p1, p2 := shardproto.NewPending(&count), shardproto.NewPending(&count)
	if count.Load() != 2 {
		t.Fatalf("pending %d, want 2", count.Load())
	}
	p1.Release()
	p1.Release()
	if count.Load() != 1 {
		t.Fatalf("pending %d after releasing one twice, want 1", count.Load())
	}
	p2.Release()
	var none *shardproto.Pending
	none.Release()
	if count.Load() != 0 {
		t.Fatalf("pending %d, want 0", count.Load())
	}
}

// TestRetireRoute: a route is retired only with no message pending on it
// and nothing going through it directly; a sender that looked it up
// before marks its message on the route that replaced it.
func TestRetireRoute(t *testing.T) {
	system := actor.NewActorSystem()
	table := newRouteTable(system, "T")
	sr := table.shard("7")

	_, mark := table.markPending("7", sr)
	if table.retire("7", sr) {
		t.Fatal("retired a route with a message pending on it")
	}
	if sr.retired.Load() {
		t.Fatal("a route kept is still marked retired")
	}
	mark.Release()
	sr.open.Store(true)
	if table.retire("7", sr) {
		t.Fatal("retired an open route")
	}
	sr.open.Store(false)
	home, _ := system.ProcessRegistry.Add(&countingProcess{}, "home")
	sr.setRemote(home, "m1")
	if table.retire("7", sr) {
		t.Fatal("retired a route with a remote home")
	}
	sr.closeRemote()
	if !table.retire("7", sr) {
		t.Fatal("an idle route was not retired")
	}
	if _, ok := table.existing("7"); ok {
		t.Fatal("the retired route is still in the table")
	}

	// A sender that looked sr up before it was retired.
	marked, mark := table.markPending("7", sr)
	if marked == sr || sr.pending.Load() != 0 {
		t.Fatalf("the mark stayed on the retired route (pending %d)", sr.pending.Load())
	}
	if cur, ok := table.existing("7"); !ok || cur != marked || cur.pending.Load() != 1 {
		t.Fatal("the mark is not on the table's route for the shard")
	}
	mark.Release()

	// sweep retires what nobody keeps.
	table.shard("8")
	table.shard("9")
	if left := table.sweep(func(shard string) bool { return shard == "9" }); left != 1 {
		t.Fatalf("%d routes left, want the one kept", left)
	}
	if _, ok := table.existing("9"); !ok {
		t.Fatal("the kept route was retired")
	}
}

// TestRetireRouteConcurrently: senders mark messages on a shard's route
// while the region retires it again and again. A mark must always be on
// the route the table has for the shard, for as long as it is held:
// otherwise a later message of the same sender would find no mark and
// could overtake it. Meaningful under -race too.
func TestRetireRouteConcurrently(t *testing.T) {
	system := actor.NewActorSystem()
	table := newRouteTable(system, "T")
	const senders, retirements = 3, 5000
	done := make(chan struct{})
	var retired, marks atomic.Int64
	var broken atomic.Bool
	var wg sync.WaitGroup
	loopUntil(&wg, done, func() { // the region
		if sr, ok := table.existing("7"); ok && table.retire("7", sr) {
			retired.Add(1)
		}
		runtime.Gosched()
	})
	for range senders {
		loopUntil(&wg, done, func() {
			sr, mark := table.markPending("7", table.shard("7"))
			runtime.Gosched() // hold the mark while the region tries
			if cur, ok := table.existing("7"); !ok || cur != sr {
				broken.Store(true)
			}
			mark.Release()
			marks.Add(1)
			runtime.Gosched()
		})
	}
	deadline := time.Now().Add(20 * time.Second)
	for retired.Load() < retirements && !broken.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(done)
	wg.Wait()
	t.Logf("%d marks by %d senders; the route was retired %d times meanwhile", marks.Load(), senders, retired.Load())
	if broken.Load() {
		t.Fatal("a held mark was on a route that had left the table")
	}
	if retired.Load() < retirements {
		t.Fatalf("the route was retired only %d times: the test proved little", retired.Load())
	}
}

// loopUntil runs step again and again on a goroutine of wg, until done is
// closed.
func loopUntil(wg *sync.WaitGroup, done <-chan struct{}, step func()) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			step()
		}
	}()
}
