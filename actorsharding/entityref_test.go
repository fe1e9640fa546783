package actorsharding_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
	"github.com/protoshard/protoshard/testkit"
)

// TestEntityRef: a reference addresses its entity whatever ID the message
// carries, and a request whose message was dropped fails with the reason.
func TestEntityRef(t *testing.T) {
	w := newLocalWorld(t, actorsharding.WithMaxMessageSize(64<<10))
	a, b := w.twoNodes()
	sharding, err := actorsharding.New(a.System, a.Membership)
	if err != nil {
		t.Fatal(err)
	}
	id := w.entityOn(a, b)
	ref, err := sharding.EntityRefFor(typeName, id)
	if err != nil {
		t.Fatal(err)
	}
	if ref.EntityID() != id || ref.TypeName() != typeName {
		t.Fatalf("ref of %s %q, want %s %q", ref.TypeName(), ref.EntityID(), typeName, id)
	}
	for _, msg := range []*testpb.Ping{
		{EntityId: id, Seq: 1}, // its own ID: as it is
		{Seq: 2},               // none: in an envelope
		{EntityId: "other", Seq: 3},
	} {
		res, err := ref.Request(msg, 10*time.Second)
		pong, ok := res.(*testpb.Pong)
		if err != nil || !ok || pong.Node != b.Address() || pong.Seq != msg.Seq {
			t.Fatalf("request %v: %v %v, want a Pong of seq %d from %s", msg, res, err, msg.Seq, b.Address())
		}
	}
	if err := ref.Send(&testpb.Ping{Seq: 4}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, func() bool { return len(w.received.get("")) == 2 }, "the sent Ping to arrive")

	// An entity on this node: once it runs and has a route (from its
	// second message on), the ref sends straight to its mailbox.
	local, err := sharding.EntityRefFor(typeName, w.entityOn(a, a))
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, func() bool {
		_, err := local.Request(&testpb.Ping{EntityId: local.EntityID(), Seq: 5}, 10*time.Second)
		return err == nil && actorsharding.EntityRefCached(local)
	}, "the ref to cache the route of %s", local.EntityID())
	res, err := local.Request(&testpb.Ping{EntityId: local.EntityID(), Seq: 6}, 10*time.Second)
	if pong, ok := res.(*testpb.Pong); err != nil || !ok || pong.Seq != 6 || pong.Node != a.Address() {
		t.Fatalf("request through the cached route: %v %v", res, err)
	}

	// Dropped on this node, with a typed reason.
	_, err = ref.Request(&testpb.Ping{EntityId: id, From: strings.Repeat("x", 128<<10)}, 10*time.Second)
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
