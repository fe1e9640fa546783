package actorsharding_test

import (
	"testing"
	"time"

	"github.com/protoshard/protoshard/testkit"
)

// TestOneHopKeepsEachSendersOrder: messages to entities that are not
// running yet go through the region and the shard, later ones straight to
// the entity; messages after a passivation go through the shard again to
// the next incarnation. Whatever way each took, every entity receives each
// sender's messages once and in order.
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
	}
	done := make(chan struct{})
	for _, s := range senders {
		go func(s *loadSender) {
			defer func() { done <- struct{}{} }()
			region := w.region(s.node)
			for n := int64(1); n <= perEntity; n++ {
				for _, id := range ids {
					s.sent[id] = n
					s.node.System.Root.Send(region, pingMsg(id, s.index<<loadSenderShift|n))
				}
				if n%100 == 0 {
					// Passivate every entity: what follows goes to the next
					// incarnation, through the shard again.
					for _, id := range ids {
						s.node.System.Root.Send(region, pingMsg(id, passivateSeq))
					}
				}
			}
		}(s)
	}
	<-done
	<-done
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
}
