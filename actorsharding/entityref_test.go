package actorsharding_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/shardingadmin"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/testkit"
	"google.golang.org/protobuf/proto"
)

// TestEntityRef: a reference addresses its entity whatever ID the message
// carries, and a request whose message was dropped fails with the reason.
func TestEntityRef(t *testing.T) {
	w, a, b, sharding, ref := refToAnotherNode(t)
	id := ref.EntityID()
	if ref.EntityID() != id || ref.TypeName() != typeName {
		t.Fatalf("ref of %s %q, want %s %q", ref.TypeName(), ref.EntityID(), typeName, id)
	}
	for _, msg := range []*testpb.Ping{
		{EntityId: id, Seq: 1}, // its own ID: as it is
		{Seq: 2},               // none: in an envelope
		{EntityId: "other", Seq: 3},
	} {
		res, err := ref.Request(t.Context(), msg)
		pong, ok := res.(*testpb.Pong)
		if err != nil || !ok || pong.Node != b.Address() || pong.Seq != msg.Seq {
			t.Fatalf("request %v: %v %v, want a Pong of seq %d from %s", msg, res, err, msg.Seq, b.Address())
		}
	}
	if err := ref.Send(&testpb.Ping{Seq: 4}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, func() bool { return slices.Contains(w.received.get(id), 4) }, "the sent Ping to arrive")

	// An entity on this node: once it runs and has a route (from its
	// second message on), the ref sends straight to its mailbox.
	local, err := sharding.EntityRefFor(typeName, w.entityOn(a, a))
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, func() bool {
		_, err := local.Request(t.Context(), &testpb.Ping{EntityId: local.EntityID(), Seq: 5})
		return err == nil && actorsharding.EntityRefCached(local)
	}, "the ref to cache the route of %s", local.EntityID())
	res, err := local.Request(t.Context(), &testpb.Ping{EntityId: local.EntityID(), Seq: 6})
	if pong, ok := res.(*testpb.Pong); err != nil || !ok || pong.Seq != 6 || pong.Node != a.Address() {
		t.Fatalf("request through the cached route: %v %v", res, err)
	}

	// Dropped on this node, with a typed reason.
	_, err = ref.Request(t.Context(), &testpb.Ping{EntityId: id, From: strings.Repeat("x", 128<<10)})
	for _, want := range []error{actorsharding.ErrDropped, actorsharding.ErrMessageTooLarge, actor.ErrDeadLetter} {
		if !errors.Is(err, want) {
			t.Errorf("oversize request: %v, want it to wrap %v", err, want)
		}
	}
	if err == nil || !strings.Contains(err.Error(), id) {
		t.Fatalf("oversize request: %v, want the entity named", err)
	}

	// Not a protobuf message, and no ID the extractor finds: refused.
	if err := ref.Send(struct{}{}); !errors.Is(err, deadletter.ErrNotSerializable) {
		t.Fatalf("Send of a plain struct: %v, want ErrNotSerializable", err)
	}
	if err := ref.Send(nil); !errors.Is(err, deadletter.ErrNilMessage) {
		t.Fatalf("Send of nil: %v, want ErrNilMessage", err)
	}
	if _, err := sharding.EntityRefFor("NotStarted", id); !errors.Is(err, actorsharding.ErrNotStarted) {
		t.Fatalf("ref of a type not started: %v, want ErrNotStarted", err)
	}
	if _, err := sharding.EntityRefFor(typeName, ""); err == nil {
		t.Fatal("ref with an empty ID: no error")
	}
	if err := (actorsharding.EntityRef{}).Send(&testpb.Ping{}); !errors.Is(err, actorsharding.ErrNotStarted) {
		t.Fatalf("Send through the zero EntityRef: %v, want ErrNotStarted", err)
	}
}

// TestStartRegionRefusesMismatches: a second start of a type with other
// props fails, the same start returns the running region, a type name
// must be a non-empty actor name segment, and a region cannot start before
// its cluster joined.
func TestStartRegionRefusesMismatches(t *testing.T) {
	w := newLocalWorld(t)
	n := w.startNode(false)
	sharding, err := actorsharding.New(n.System, n.Membership)
	if err != nil {
		t.Fatal(err)
	}
	ex := actorsharding.NewHashCodeMessageExtractor(w.shards)
	props := actor.PropsFromFunc(func(actor.Context) {})
	if _, err := sharding.StartRegion(typeName, props, ex); !errors.Is(err, actorsharding.ErrAlreadyStarted) {
		t.Fatalf("second start with other props: %v, want ErrAlreadyStarted", err)
	}
	first, err := sharding.StartRegion("Twice", props, ex, actorsharding.WithBufferSize(10))
	if err != nil {
		t.Fatal(err)
	}
	again, err := sharding.StartRegion("Twice", props, ex, actorsharding.WithBufferSize(10))
	if err != nil || !again.Equal(first) {
		t.Fatalf("the same start again: %v %v, want %v", again, err, first)
	}
	if _, err := sharding.StartRegion("Twice", props, ex, actorsharding.WithBufferSize(11)); !errors.Is(err, actorsharding.ErrAlreadyStarted) {
		t.Fatalf("start with another buffer size: %v, want ErrAlreadyStarted", err)
	}
	if _, err := sharding.StartProxy("Twice", ex); !errors.Is(err, actorsharding.ErrAlreadyStarted) {
		t.Fatalf("a proxy of a type whose region runs: %v, want ErrAlreadyStarted", err)
	}
	// "Twice/x" would be the actor name of the shard "x" of "Twice".
	for _, name := range []string{"", "Twice/x", "/"} {
		if _, err := sharding.StartRegion(name, props, ex); err == nil {
			t.Fatalf("StartRegion(%q): no error", name)
		}
	}

	system := actor.NewActorSystem()
	quarantine := membership.NewQuarantine()
	remote.NewRemote(system, remote.Configure("127.0.0.1", 0, quarantine.RemoteOption())) // not started: no address to join with
	cluster := membership.NewCluster(system, local.NewRegistry().Provider(), membership.Config{Quarantine: quarantine})
	defer cluster.Close()
	unjoined, err := actorsharding.New(system, cluster)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unjoined.StartRegion(typeName, props, ex); !errors.Is(err, actorsharding.ErrNotJoined) {
		t.Fatalf("start before the cluster joined: %v, want ErrNotJoined", err)
	}
}

// TestEntityRefWithoutTheIDOnThisNode: a message that names no entity
// reaches the ref's entity on this node as the very value sent (nothing
// packs it), in the order sent, mixed with messages that name the entity
// sent through the region; once the entity runs, the ref sends straight
// to its mailbox; and a request of such a message is answered.
func TestEntityRefWithoutTheIDOnThisNode(t *testing.T) {
	w := newLocalWorld(t)
	n := w.startNode(false)
	sharding, err := actorsharding.New(n.System, n.Membership)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *testpb.Ping, 1024)
	region, err := sharding.StartRegion("Anonymous", actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*testpb.Ping); ok {
			got <- m
			if ctx.Sender() != nil {
				ctx.Respond(&testpb.Pong{Seq: m.Seq})
			}
		}
	}), actorsharding.NewHashCodeMessageExtractor(w.shards))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := sharding.EntityRefFor("Anonymous", "e-1")
	if err != nil {
		t.Fatal(err)
	}
	// From the first message on: the shard and the entity start meanwhile,
	// and the messages change from the slow way to the direct one.
	const count = 400
	sent := make([]*testpb.Ping, 0, count)
	for i := range int64(count) {
		if i%3 == 1 {
			m := &testpb.Ping{EntityId: "e-1", Seq: i}
			sent = append(sent, m)
			n.System.Root.Send(region, m)
			continue
		}
		m := &testpb.Ping{Seq: i}
		sent = append(sent, m)
		if err := ref.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range sent {
		select {
		case m := <-got:
			if m != want {
				t.Fatalf("message %d: the entity got %v, want %v itself", i, m, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("message %d of %d never arrived", i, count)
		}
	}
	testkit.WaitFor(t, 10*time.Second, func() bool {
		res, err := ref.Request(t.Context(), &testpb.Ping{Seq: -1})
		if pong, ok := res.(*testpb.Pong); err != nil || !ok || pong.Seq != -1 {
			t.Fatalf("request without the ID: %v %v", res, err)
		}
		<-got
		return actorsharding.EntityRefCached(ref)
	}, "the ref to cache the route of its running entity")
	// Through the cached route.
	for i := range int64(10) {
		m := &testpb.Ping{Seq: count + i}
		if err := ref.Send(m); err != nil {
			t.Fatal(err)
		}
		select {
		case g := <-got:
			if g != m {
				t.Fatalf("through the cached route the entity got %v, want %v itself", g, m)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a message through the cached route never arrived")
		}
	}
}

// TestEntityRefWithoutTheIDToAnotherNode: a message that names no entity
// reaches the ref's entity on another node, in the order sent, mixed with
// messages that name it, before and after that node confirmed it takes
// the entity ID with the message (an EntityMessage); a drop is reported,
// and a header or EntityMessage that names no valid entity or type is
// dropped with the reason.
func TestEntityRefWithoutTheIDToAnotherNode(t *testing.T) {
	// The ID-less Ping never reached b yet: the first ones go in
	// envelopes (see entry.go).
	w, a, b, _, ref := refToAnotherNode(t)
	id := ref.EntityID()
	const count = 300
	send := func(from, to int64) {
		for i := from; i < to; i++ {
			if i%2 == 0 {
				a.System.Root.Send(w.region(a), pingMsg(id, i))
			} else if err := ref.Send(&testpb.Ping{Seq: i}); err != nil {
				t.Fatal(err)
			}
		}
	}
	inOrder := func(to int64) {
		t.Helper()
		testkit.WaitFor(t, 30*time.Second, func() bool { return slices.Contains(w.received.get(id), to-1) },
			"the last Ping to arrive; drops: %s", firstReasons(w.dropped(), 5))
		var seqs []int64
		for _, s := range w.received.get(id) {
			if s > 0 {
				seqs = append(seqs, s)
			}
		}
		if len(seqs) != int(to-1) {
			t.Fatalf("the entity received %d Pings, want %d: %v", len(seqs), to-1, seqs)
		}
		for i, s := range seqs {
			if s != int64(i+1) {
				t.Fatalf("Ping %d received as number %d: %v", s, i+1, seqs)
			}
		}
	}
	send(1, count)
	inOrder(count)
	pingType := string((&testpb.Ping{}).ProtoReflect().Descriptor().FullName())
	var typeID uint32
	testkit.WaitFor(t, 10*time.Second, func() bool {
		typeID = actorsharding.RegionTypeID(a.System, typeName, b.MemberID(), pingType)
		return typeID != 0 && actorsharding.RegionKnowsType(a.System, typeName, b.MemberID(), actorsharding.TakesEntityIDHeader) &&
			actorsharding.RegionKnowsType(a.System, typeName, b.MemberID(), actorsharding.TakesEntityRefMessage) &&
			actorsharding.RegionKnowsType(a.System, typeName, b.MemberID(), actorsharding.TakesSequencedMessages)
	}, "a to hear that b takes Pings in an EntityRefMessage, and batches of reliable-delivery messages")
	send(count, 2*count)
	inOrder(2 * count)

	res, err := ref.Request(t.Context(), &testpb.Ping{Seq: 2 * count})
	if pong, ok := res.(*testpb.Pong); err != nil || !ok || pong.Node != b.Address() || pong.Seq != 2*count {
		t.Fatalf("request without the ID: %v %v, want a Pong from %s", res, err, b.Address())
	}

	// Too large for b: dropped on this node, with the reason.
	_, err = ref.Request(t.Context(), &testpb.Ping{From: strings.Repeat("x", 128<<10)})
	for _, want := range []error{actorsharding.ErrDropped, actorsharding.ErrMessageTooLarge, actor.ErrDeadLetter} {
		if !errors.Is(err, want) {
			t.Errorf("oversize request without the ID: %v, want it to wrap %v", err, want)
		}
	}

	// A header with no valid entity ID reaching b's entry.
	before := len(w.dropped())
	entry := actor.NewPID(b.Address(), actorsharding.RegionEntryName(typeName, b.MemberID()))
	a.System.Root.Send(entry, &actor.MessageEnvelope{Header: map[string]string{actorsharding.EntityIDHeader: ""}, Message: &testpb.Ping{Seq: -2}})
	testkit.WaitFor(t, 10*time.Second, func() bool {
		return slices.ContainsFunc(w.dropped()[before:], func(d *deadletter.Event) bool {
			p, ok := d.Message.(*testpb.Ping)
			return ok && p.Seq == -2 && errors.Is(d.Err, messages.ErrInvalidID)
		})
	}, "b to drop the Ping whose header names no entity")

	// EntityMessages and EntityRefMessages that name no valid entity, or
	// a type b did not give, or whose message does not decode. And ones
	// at b's region rather than its entry, which takes what other nodes'
	// regions send.
	encoded, err := proto.Marshal(&testpb.Ping{Seq: -3})
	if err != nil {
		t.Fatal(err)
	}
	region := actor.NewPID(b.Address(), shardingadmin.RegionName(typeName))
	for _, bad := range []struct {
		to   *actor.PID
		m    proto.Message
		want error
	}{
		{entry, &messages.EntityMessage{EntityId: "", TypeId: typeID, Message: encoded}, messages.ErrInvalidID},
		{entry, &messages.EntityMessage{EntityId: id, TypeId: typeID + 1000, Message: encoded}, deadletter.ErrNotSerializable},
		{entry, &messages.EntityMessage{EntityId: id, TypeId: typeID, Message: []byte{0xff}}, deadletter.ErrNotSerializable},
		{region, &messages.EntityMessage{EntityId: id + "-at-region", TypeId: typeID, Message: encoded}, deadletter.ErrNotSerializable},
		{entry, actorsharding.NewEntityRefMessage("", typeID, encoded), messages.ErrInvalidID},
		{entry, actorsharding.NewEntityRefMessage(id, typeID+1000, encoded), deadletter.ErrNotSerializable},
		{entry, actorsharding.NewEntityRefMessage(id, typeID, []byte{0xff}), deadletter.ErrNotSerializable},
		{region, actorsharding.NewEntityRefMessage(id+"-at-region", typeID, encoded), deadletter.ErrNotSerializable},
	} {
		a.System.Root.Send(bad.to, bad.m)
		testkit.WaitFor(t, 10*time.Second, func() bool {
			return slices.ContainsFunc(w.dropped()[before:], func(d *deadletter.Event) bool {
				m, ok := d.Message.(proto.Message)
				return ok && proto.Equal(m, bad.m) && errors.Is(d.Err, bad.want)
			})
		}, "b to drop %v with %v", bad.m, bad.want)
	}
}

// refToAnotherNode starts two nodes a and b (messages up to 64 KiB) and
// returns the ref, through a's Sharding, to an entity that runs on b.
func refToAnotherNode(t *testing.T) (w *world, a, b *testkit.Node, sharding *actorsharding.Sharding, ref actorsharding.EntityRef) {
	t.Helper()
	w = newLocalWorld(t, actorsharding.WithMaxMessageSize(64<<10))
	a, b = w.twoNodes()
	sharding, err := actorsharding.New(a.System, a.Membership)
	if err != nil {
		t.Fatal(err)
	}
	if ref, err = sharding.EntityRefFor(typeName, w.entityOn(a, b)); err != nil {
		t.Fatal(err)
	}
	return w, a, b, sharding, ref
}
