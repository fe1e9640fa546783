package actorsharding_test

import (
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/testkit"
)

// TestOneHopKeepsEachSendersOrder: messages to entities that are not
// running yet go through the region and the shard, later ones straight to
// the entity; messages after a passivation go through the shard again to
// the next incarnation. Whatever way each took, every entity receives each
// sender's messages once and in order, an EntityRef's too (it caches the
// entity's route).
func TestOneHopKeepsEachSendersOrder(t *testing.T) {
	w := newLocalWorld(t)
	a, b := w.startNode(false), w.startNode(false)
	w.cluster.WaitConverged(t, 30*time.Second)
	w.waitRegistered(2)
	ids := entityIDs(50)
	const perEntity = 400
	senders := []*loadSender{
		{index: 1, node: a, sent: map[string]int64{}},
		{index: 2, node: b, sent: map[string]int64{}},
		{index: 3, node: a, sent: map[string]int64{}}, // through EntityRefs
	}
	sharding, err := actorsharding.New(a.System, a.Membership)
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string]actorsharding.EntityRef{}
	for _, id := range ids {
		if refs[id], err = sharding.EntityRefFor(typeName, id); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	for _, s := range senders {
		go func(s *loadSender) {
			defer func() { done <- struct{}{} }()
			region := w.region(s.node)
			send := func(id string, seq int64) {
				if s.index != 3 {
					s.node.System.Root.Send(region, pingMsg(id, seq))
				} else if err := refs[id].Send(pingMsg(id, seq)); err != nil {
					t.Error(err)
				}
			}
			for n := int64(1); n <= perEntity; n++ {
				for _, id := range ids {
					s.sent[id] = n
					send(id, s.index<<loadSenderShift|n)
				}
				if n%100 == 0 {
					// Passivate every entity: what follows goes to the next
					// incarnation, through the shard again.
					for _, id := range ids {
						send(id, passivateSeq)
					}
				}
			}
		}(s)
	}
	for range senders {
		<-done
	}
	want := len(senders) * perEntity * len(ids)
	var v loadVerdict
	testkit.WaitFor(t, 60*time.Second, func() bool {
		v = judgeLoad(w.received, senders, ids)
		return v.received >= want
	}, "entities received %d of %d messages", v.received, want)
	time.Sleep(300 * time.Millisecond)
	v = judgeLoad(w.received, senders, ids)
	if v.lost+v.reordered+v.duplicated > 0 {
		t.Fatalf("%s", v)
	}
	// Each sender's way to the other node's entities changed on the way
	// too: from envelopes to Pings by themselves, once the other region
	// confirmed it knows the type.
	for _, pair := range [][2]*testkit.Node{{a, b}, {b, a}} {
		if !actorsharding.RegionKnowsType(pair[0].System, typeName, pair[1].MemberID(), pingType) {
			t.Errorf("%s's region never heard that %s knows %s", pair[0].Name, pair[1].Name, pingType)
		}
	}
}

const pingType = "protoshard.testpb.Ping"

// TestRegionEntry: another node's region may send an entity's message by
// itself to a region's entry, named after the member; sent to the entry
// of an earlier incarnation of the node, it becomes a dead-letter event
// that says so.
func TestRegionEntry(t *testing.T) {
	w := newLocalWorld(t)
	a, b := w.twoNodes()
	id := w.entityOn(a, b)
	entry := actor.NewPID(b.Address(), actorsharding.RegionEntryName(typeName, b.MemberID()))
	res, err := a.System.Root.RequestFuture(entry, pingMsg(id, 7), 10*time.Second).Result()
	if pong, ok := res.(*testpb.Pong); err != nil || !ok || pong.Node != b.Address() {
		t.Fatalf("request through %s's entry: %v %v, want a Pong from %s", b.Name, res, err, b.Address())
	}
	before := len(w.dropped())
	stale := actor.NewPID(b.Address(), actorsharding.RegionEntryName(typeName, "an-earlier-incarnation"))
	a.System.Root.Send(stale, pingMsg(id, 8))
	w.waitDrop(before, "an earlier incarnation of this node")
	if got := w.received.get(id); slices.Contains(got, 8) {
		t.Fatalf("%s received the message sent to an earlier incarnation: %v", id, got)
	}
}
