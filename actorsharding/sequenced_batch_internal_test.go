package actorsharding

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/entityrefs"
	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/internal/shardingadmin"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/proto"
)

// batchFixture is a region's router (a proxy's: nothing runs here) whose
// shards all live on member m1, whose entry records what reaches it; the
// region actor records what the router hands it.
type batchFixture struct {
	system   *actor.ActorSystem
	router   *regionProcess
	region   *recordingProcess // the region actor's process
	entry    *recordingProcess // m1's entry
	producer *actor.PID
	// regionPID resolves to router.
	regionPID *actor.PID
}

func newBatchFixture(t *testing.T, takesBatches bool) *batchFixture {
	t.Helper()
	system := actor.NewActorSystem()
	cl := membership.NewCluster(system, local.NewRegistry().Provider(), membership.Config{})
	table := newRouteTable(system, "T")
	f := &batchFixture{system: system, region: &recordingProcess{}, entry: &recordingProcess{},
		producer: actor.NewPID(system.Address(), "delivery/T/p")}
	f.router = &regionProcess{table: table, extractor: NewHashCodeMessageExtractor(10), cluster: cl, stale: membershiphook.Of(cl).Stale,
		typeName: "T", region: f.region, maxMessageSize: 1 << 20}
	f.regionPID, _ = system.ProcessRegistry.Add(f.router, "region-T")
	homePID, _ := system.ProcessRegistry.Add(&recordingProcess{}, shardingadmin.RegionName("T"))
	system.ProcessRegistry.Add(f.entry, regionEntryName("T", "m1"))
	for i := range 10 {
		table.shard(strconv.Itoa(i)).setRemote(homePID, "m1")
	}
	table.types.learn("m1", sequencedMessageName, 0)
	if takesBatches {
		table.types.learn("m1", takesSequencedMessages, 0)
	}
	return f
}

// ref is an EntityRef of entity id through the fixture's router.
func (f *batchFixture) ref(id string) *EntityRef {
	return &EntityRef{sharding: &Sharding{system: f.system, tracing: newTracing(nil)}, typeName: "T", id: id,
		region: f.regionPID, extractor: f.router.extractor, router: f.router, cache: &refCache{}}
}

func seq(id string, nr int64, payload int) *messages.SequencedMessage {
	return &messages.SequencedMessage{EntityId: id, ProducerId: "p", ProducerIncarnation: 7, SeqNr: nr, TypeId: 1, Payload: make([]byte, payload)}
}

// arrived is what reached an entry, each message as it came: a
// SequencedMessage alone, or the messages of a batch; with its sender.
type arrived struct {
	batch  bool
	msgs   []*messages.SequencedMessage
	sender *actor.PID
}

func atEntry(t *testing.T, got []any) []arrived {
	t.Helper()
	var out []arrived
	for _, g := range got {
		var a arrived
		m := g
		if env, ok := g.(*actor.MessageEnvelope); ok {
			m, a.sender = env.Message, env.Sender
		}
		switch m := m.(type) {
		case *messages.SequencedMessage:
			a.msgs = []*messages.SequencedMessage{m}
		case *messages.SequencedMessages:
			a.batch, a.msgs = true, m.GetMessages()
		default:
			t.Fatalf("the entry got a %T", m)
		}
		out = append(out, a)
	}
	return out
}

func seqNrs(ms []*messages.SequencedMessage) []int64 {
	var out []int64
	for _, m := range ms {
		out = append(out, m.GetSeqNr())
	}
	return out
}

// TestSequencedBatchSendsAHomesMessagesTogether: what a turn sends to one
// node waits for Flush, then goes as one batch, in order, with its sender;
// a message alone goes by itself; a home that does not take batches gets
// each message at once.
func TestSequencedBatchSendsAHomesMessagesTogether(t *testing.T) {
	f := newBatchFixture(t, true)
	b := entityrefs.NewBatch()
	for i, id := range []string{"a", "b", "c", "a"} {
		if err := b.Send(f.ref(id), seq(id, int64(i+1), 10), f.producer); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.entry.take(); len(got) != 0 {
		t.Fatalf("the entry got %v before Flush", got)
	}
	b.Flush()
	got := atEntry(t, f.entry.take())
	if len(got) != 1 || !got[0].batch || !samePID(got[0].sender, f.producer) {
		t.Fatalf("the entry got %+v, want one batch from the producer", got)
	}
	if nrs := seqNrs(got[0].msgs); len(nrs) != 4 || nrs[0] != 1 || nrs[1] != 2 || nrs[2] != 3 || nrs[3] != 4 {
		t.Fatalf("the batch holds %v, want 1 2 3 4", nrs)
	}

	if err := b.Send(f.ref("a"), seq("a", 5, 10), f.producer); err != nil {
		t.Fatal(err)
	}
	b.Flush()
	b.Flush() // nothing more
	if got := atEntry(t, f.entry.take()); len(got) != 1 || got[0].batch || got[0].msgs[0].GetSeqNr() != 5 || !samePID(got[0].sender, f.producer) {
		t.Fatalf("the entry got %+v, want message 5 by itself, from the producer", got)
	}
	if got := f.region.take(); len(got) != 0 {
		t.Fatalf("the region actor got %v", got)
	}

	old := newBatchFixture(t, false)
	ob := entityrefs.NewBatch()
	for i := range 2 {
		if err := ob.Send(old.ref("a"), seq("a", int64(i+1), 10), old.producer); err != nil {
			t.Fatal(err)
		}
		if got := atEntry(t, old.entry.take()); len(got) != 1 || got[0].batch || !samePID(got[0].sender, old.producer) {
			t.Fatalf("an earlier version's entry got %+v at once, want message %d by itself", got, i+1)
		}
	}
	ob.Flush()
	if got := old.entry.take(); len(got) != 0 {
		t.Fatalf("Flush sent %v to an entry that takes no batches", got)
	}
}

// TestSequencedBatchKeepsTheOrder: a message that cannot join (no sender:
// the full form) and a change of sender send what is held first.
func TestSequencedBatchKeepsTheOrder(t *testing.T) {
	f := newBatchFixture(t, true)
	b := entityrefs.NewBatch()
	send := func(id string, nr int64, sender *actor.PID) {
		t.Helper()
		if err := b.Send(f.ref(id), seq(id, nr, 10), sender); err != nil {
			t.Fatal(err)
		}
	}
	other := actor.NewPID(f.system.Address(), "delivery/T/q")
	send("a", 1, f.producer)
	send("b", 2, f.producer)
	send("a", 3, nil)
	send("a", 4, f.producer)
	send("b", 5, other)
	b.Flush()
	got := atEntry(t, f.entry.take())
	want := []struct {
		batch  bool
		nrs    []int64
		sender *actor.PID
	}{{true, []int64{1, 2}, f.producer}, {false, []int64{3}, nil}, {false, []int64{4}, f.producer}, {false, []int64{5}, other}}
	if len(got) != len(want) {
		t.Fatalf("the entry got %+v, want %+v", got, want)
	}
	for i, w := range want {
		nrs := seqNrs(got[i].msgs)
		if got[i].batch != w.batch || len(nrs) != len(w.nrs) || nrs[0] != w.nrs[0] || !samePID(got[i].sender, w.sender) {
			t.Fatalf("arrival %d: %+v (seqNrs %v), want %+v", i, got[i], nrs, w)
		}
	}
}

// TestSequencedBatchStaysUnderItsLimit: a turn's messages over the limit
// go in several batches, each within it; a message over the limit is not
// held, and goes the way it would alone.
func TestSequencedBatchStaysUnderItsLimit(t *testing.T) {
	f := newBatchFixture(t, true)
	const limit = 400
	f.router.maxMessageSize = limit
	b := entityrefs.NewBatch()
	for i := range 20 {
		if err := b.Send(f.ref("a"), seq("a", int64(i+1), 60), f.producer); err != nil {
			t.Fatal(err)
		}
	}
	b.Flush()
	var nrs []int64
	raw := f.entry.take()
	if len(raw) < 4 {
		t.Fatalf("the entry got %d sends, want the 20 messages in several batches", len(raw))
	}
	for _, g := range raw {
		m := g.(*actor.MessageEnvelope).Message
		if n := proto.Size(m.(proto.Message)); n > limit {
			t.Fatalf("a batch of %d bytes, over the limit of %d", n, limit)
		}
		for _, a := range atEntry(t, []any{g}) {
			nrs = append(nrs, seqNrs(a.msgs)...)
		}
	}
	for i, nr := range nrs {
		if nr != int64(i+1) {
			t.Fatalf("seqNrs %v, want 1 to 20 in order", nrs)
		}
	}

	if err := b.Send(f.ref("a"), seq("a", 21, 500), f.producer); err != nil {
		t.Fatal(err)
	}
	if got := f.entry.take(); len(got) != 0 {
		t.Fatalf("the entry got an oversized message: %v", got)
	}
	if got := f.region.take(); len(got) != 1 {
		t.Fatalf("the region actor got %v, want the oversized message, which it drops with the reason", got)
	} else if r, ok := got[0].(*actor.MessageEnvelope).Message.(*routed); !ok || r.message.(*messages.SequencedMessage).GetSeqNr() != 21 {
		t.Fatalf("the region actor got %v, want message 21 routed", got[0])
	}
}

// TestSequencedBatchHoldsItsHomeOpen: the region cannot close a home while
// a batch holds a message for it; once it closed, the shard's next message
// takes the slow way.
func TestSequencedBatchHoldsItsHomeOpen(t *testing.T) {
	f := newBatchFixture(t, true)
	b := entityrefs.NewBatch()
	if err := b.Send(f.ref("a"), seq("a", 1, 10), f.producer); err != nil {
		t.Fatal(err)
	}
	sr, _ := f.router.table.existing(f.router.extractor.ShardID("a"))
	closed := make(chan struct{})
	go func() {
		sr.closeRemote()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("the home closed while the batch held a message for it")
	case <-time.After(100 * time.Millisecond):
	}
	b.Flush()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the home did not close after Flush")
	}
	if got := atEntry(t, f.entry.take()); len(got) != 1 || got[0].msgs[0].GetSeqNr() != 1 {
		t.Fatalf("the entry got %+v, want message 1", got)
	}
	if err := b.Send(f.ref("a"), seq("a", 2, 10), f.producer); err != nil {
		t.Fatal(err)
	}
	b.Flush()
	if got := f.entry.take(); len(got) != 0 {
		t.Fatalf("the closed home's entry got %v", got)
	}
	if got := f.region.take(); len(got) != 1 {
		t.Fatalf("the region actor got %v, want message 2 on the slow way", got)
	}
}

// TestRegionRoutesEachMessageOfABatch: each message of a batch reaches its
// entity as if it had come alone, with the batch's sender; a nil message
// is a dead letter, and the others still go.
func TestRegionRoutesEachMessageOfABatch(t *testing.T) {
	system := actor.NewActorSystem()
	cl := membership.NewCluster(system, local.NewRegistry().Provider(), membership.Config{})
	table := newRouteTable(system, "T")
	self := "m0"
	table.memberID.Store(&self)
	ext := NewHashCodeMessageExtractor(10)
	region := &recordingProcess{}
	p := &regionProcess{table: table, extractor: ext, cluster: cl, stale: membershiphook.Of(cl).Stale, hosting: true,
		typeName: "T", region: region, maxMessageSize: 1 << 20}
	targets := map[string]*recordingProcess{}
	for _, id := range []string{"a", "b"} {
		targets[id] = &recordingProcess{}
		sr := table.shard(ext.ShardID(id))
		sr.open.Store(true)
		pid, _ := system.ProcessRegistry.Add(targets[id], "entity/"+id)
		table.entities.swap(id, &entityRoute{shard: sr, pid: pid})
	}
	var mu sync.Mutex
	var drops []*deadletter.Event
	system.EventStream.Subscribe(func(e any) {
		if ev, ok := e.(*deadletter.Event); ok {
			mu.Lock()
			drops = append(drops, ev)
			mu.Unlock()
		}
	})
	producer := actor.NewPID("elsewhere:1", "delivery/T/p")
	a, b, c := seq("a", 1, 3), seq("b", 1, 3), seq("c", 1, 3)
	entry := actor.NewPID(system.Address(), regionEntryName("T", self))
	p.receive(entry, &actor.MessageEnvelope{Message: &messages.SequencedMessages{Messages: []*messages.SequencedMessage{a, nil, b, c}}, Sender: producer}, self)

	for id, want := range map[string]*messages.SequencedMessage{"a": a, "b": b} {
		got := targets[id].take()
		if len(got) != 1 {
			t.Fatalf("entity %s got %v, want its message", id, got)
		}
		env, ok := got[0].(*actor.MessageEnvelope)
		if !ok || env.Message != want || !env.Sender.Equal(producer) {
			t.Fatalf("entity %s got %v, want %v from the producer", id, got[0], want)
		}
	}
	// c does not run here: the region actor takes it, forwarded to this
	// incarnation, with the producer as its sender.
	got := region.take()
	if len(got) != 1 {
		t.Fatalf("the region actor got %v, want c's message", got)
	}
	env := got[0].(*actor.MessageEnvelope)
	if r, ok := env.Message.(*routed); !ok || r.message != c || r.to != self || !env.Sender.Equal(producer) {
		t.Fatalf("the region actor got %v, want c's message routed, forwarded to %s, from the producer", got[0], self)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(drops) != 1 || !errors.Is(drops[0].Err, deadletter.ErrNilMessage) {
		t.Fatalf("dead letters %v, want one for the nil message", drops)
	}
}
