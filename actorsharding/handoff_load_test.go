package actorsharding_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/coordinator"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/testkit"
	"google.golang.org/protobuf/types/known/anypb"
)

// loadSenderShift puts a sender's index in the high bits of a Ping's
// sequence number, so an entity's record tells each sender's messages
// apart: seq = sender<<loadSenderShift | n, n counting from 1.
const loadSenderShift = 32

// loadMode is how a loadSender hands its Pings to its region.
type loadMode int

const (
	// plainPings: each Ping as it is; the extractor finds the entity in it.
	plainPings loadMode = iota
	// envelopedPings: each Ping in a ShardingEnvelope.
	envelopedPings
	// mixedPings: one way and the other in turn, so that one sender's
	// messages take both paths one after the other.
	mixedPings
	// refPings: each Ping naming no entity, through the entity's EntityRef.
	refPings
	// mixedRefPings: through the EntityRef naming no entity, and as it is
	// through the region, in turn.
	mixedRefPings
)

// byRef reports whether the n-th message goes through the EntityRef.
func (m loadMode) byRef(n int64) bool {
	return m == refPings || (m == mixedRefPings && n%2 == 0)
}

// message is the n-th message of the load for entity id.
func (m loadMode) message(id string, seq, n int64) any {
	if m == envelopedPings || (m == mixedPings && n%2 == 0) {
		payload, err := anypb.New(pingMsg(id, seq))
		if err != nil {
			panic(err) // a Ping always encodes
		}
		return &messages.ShardingEnvelope{EntityId: id, Message: payload}
	}
	return pingMsg(id, seq)
}

// loadSender sends Pings to every entity through its node's region, one
// round every interval, until stopped; per entity, its n counts up from 1.
type loadSender struct {
	index int64
	node  *testkit.Node
	sent  map[string]int64 // entity → last n sent
	stop  chan struct{}
	done  chan struct{}
	count atomic.Int64
}

func startLoad(w *world, index int64, n *testkit.Node, ids []string, interval time.Duration, mode loadMode) *loadSender {
	s := &loadSender{index: index, node: n, sent: map[string]int64{}, stop: make(chan struct{}), done: make(chan struct{})}
	region := w.region(n)
	refs := map[string]actorsharding.EntityRef{}
	if mode == refPings || mode == mixedRefPings {
		sharding, err := actorsharding.New(n.System, n.Membership)
		if err != nil {
			w.t.Fatal(err)
		}
		for _, id := range ids {
			if refs[id], err = sharding.EntityRefFor(typeName, id); err != nil {
				w.t.Fatal(err)
			}
		}
	}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			for _, id := range ids {
				s.sent[id]++
				seq := index<<loadSenderShift | s.sent[id]
				if mode.byRef(s.sent[id]) {
					if err := refs[id].Send(&testpb.Ping{Seq: seq}); err != nil {
						w.t.Errorf("EntityRef.Send: %v", err)
						return
					}
					continue
				}
				n.System.Root.Send(region, mode.message(id, seq, s.sent[id]))
			}
			s.count.Add(int64(len(ids)))
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *loadSender) halt() {
	close(s.stop)
	<-s.done
}

// loadVerdict compares what the entities received with what the senders
// sent: per entity and sender, the sequence must be 1, 2, ... n exactly.
type loadVerdict struct {
	sent, received, lost, reordered, duplicated int
	examples                                    []string
}

func (v loadVerdict) String() string {
	return fmt.Sprintf("sent %d, received %d, lost %d, reordered %d, duplicated %d; %s",
		v.sent, v.received, v.lost, v.reordered, v.duplicated, strings.Join(v.examples, "; "))
}

func judgeLoad(r *received, senders []*loadSender, ids []string) loadVerdict {
	var v loadVerdict
	note := func(format string, args ...any) {
		if len(v.examples) < 8 {
			v.examples = append(v.examples, fmt.Sprintf(format, args...))
		}
	}
	for _, id := range ids {
		got := r.get(id)
		for _, s := range senders {
			want := s.sent[id]
			v.sent += int(want)
			seen := map[int64]bool{}
			var last int64
			for _, seq := range got {
				if seq>>loadSenderShift != s.index {
					continue
				}
				n := seq & (1<<loadSenderShift - 1)
				v.received++
				if seen[n] {
					v.duplicated++
					note("%s from sender %d: %d twice", id, s.index, n)
					continue
				}
				seen[n] = true
				if n < last {
					v.reordered++
					if v.reordered == 1 {
						idx := s.index
						note("%s from sender %d: %d after %d; trail %s", id, s.index, n, last,
							r.trail(id, func(seq int64) bool { return seq>>loadSenderShift == idx }))
					}
				}
				last = max(last, n)
			}
			for n := int64(1); n <= want; n++ {
				if !seen[n] {
					v.lost++
					note("%s from sender %d: %d lost", id, s.index, n)
				}
			}
		}
	}
	return v
}

// TestPlannedHandOffUnderLoadLosesNothing: while two nodes send to every
// entity through their own regions (or a proxy), as they are or in
// ShardingEnvelopes, a graceful leave of the oldest node (the
// coordinator's), of another node, and a rebalance to a new node lose no
// message, reorder none and deliver none twice.
func TestPlannedHandOffUnderLoadLosesNothing(t *testing.T) {
	cases := []struct {
		name string
		// move starts the hand-offs on the cluster of three nodes, whose
		// first two send; it returns when they are done.
		move func(t *testing.T, w *world, nodes []*testkit.Node)
		// senders are the indexes of the sending nodes.
		senders []int
		// proxy: a fourth node, index 3, runs only a proxy.
		proxy bool
		// modes: how each sender sends (plainPings if not given).
		modes []loadMode
	}{
		{name: "graceful leave of the oldest", senders: []int{1, 2}, move: leaveOldest},
		{name: "graceful leave of the oldest, envelopes", senders: []int{1, 2}, modes: []loadMode{envelopedPings, mixedPings}, move: leaveOldest},
		{name: "graceful leave of another node", senders: []int{0, 2}, move: func(t *testing.T, w *world, nodes []*testkit.Node) {
			leaveNode(t, nodes[1])
		}},
		{name: "rebalance to a new node", senders: []int{1, 2}, move: rebalanceToNewNode},
		{name: "rebalance to a new node, envelopes", senders: []int{1, 2}, modes: []loadMode{mixedPings, envelopedPings}, move: rebalanceToNewNode},
		// A proxy sends to other nodes' regions directly, as a region does.
		{name: "rebalance to a new node, a proxy sending", senders: []int{1, 3}, proxy: true, move: rebalanceToNewNode},
		{name: "graceful leave of the oldest, a proxy sending envelopes", senders: []int{1, 3}, proxy: true, modes: []loadMode{mixedPings, envelopedPings}, move: leaveOldest},
		// EntityRefs of messages that name no entity, alone and mixed with
		// messages that do, from a region and from a proxy.
		{name: "graceful leave of the oldest, entity refs", senders: []int{1, 2}, modes: []loadMode{refPings, mixedRefPings}, move: leaveOldest},
		{name: "rebalance to a new node, entity refs", senders: []int{1, 2}, modes: []loadMode{mixedRefPings, refPings}, move: rebalanceToNewNode},
		{name: "rebalance to a new node, a proxy sending by entity refs", senders: []int{1, 3}, proxy: true, modes: []loadMode{refPings, mixedRefPings}, move: rebalanceToNewNode},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newLocalWorld(t)
			nodes := []*testkit.Node{w.startNode(false), w.startNode(false), w.startNode(false)}
			if tc.proxy {
				nodes = append(nodes, w.startNode(true))
			}
			w.cluster.WaitConverged(t, 30*time.Second)
			w.waitRegistered(3)
			ids := entityIDs(200)
			for _, id := range ids {
				askEventually(t, nodes[tc.senders[0]], w.region(nodes[tc.senders[0]]), id, 0)
			}
			before := len(w.dropped())
			var senders []*loadSender
			for i, n := range tc.senders {
				mode := plainPings
				if i < len(tc.modes) {
					mode = tc.modes[i]
				}
				senders = append(senders, startLoad(w, int64(i+1), nodes[n], ids, 5*time.Millisecond, mode))
			}
			time.Sleep(time.Second)
			tc.move(t, w, nodes)
			time.Sleep(time.Second)
			for _, s := range senders {
				s.halt()
			}
			var total int
			for _, s := range senders {
				total += int(s.count.Load())
			}
			// Every message is either received (the Pings of the warm-up
			// are seq 0 and not counted) or, if lost, the verdict says so.
			var v loadVerdict
			deadline := time.Now().Add(30 * time.Second)
			for {
				v = judgeLoad(w.received, senders, ids)
				if v.received >= total || time.Now().After(deadline) {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			time.Sleep(500 * time.Millisecond) // duplicates arriving late
			v = judgeLoad(w.received, senders, ids)
			drops := w.dropped()[before:]
			if v.lost+v.reordered+v.duplicated > 0 {
				t.Errorf("%s\n%d dead-letter events, by reason: %s", v, len(drops), firstReasons(drops, 40))
			} else {
				t.Logf("%s", v)
			}
		})
	}
}

// leaveOldest: the oldest node, the coordinator's, leaves gracefully.
func leaveOldest(t *testing.T, _ *world, nodes []*testkit.Node) { leaveNode(t, nodes[0]) }

// rebalanceToNewNode starts a node and waits until the least-shard
// strategy has moved its share of the shards there (less one).
func rebalanceToNewNode(t *testing.T, w *world, _ []*testkit.Node) {
	d := w.startNode(false)
	w.cluster.WaitConverged(t, 30*time.Second)
	key := coordinator.RegionKey(w.region(d))
	testkit.WaitFor(t, 60*time.Second, func() bool {
		st := w.coordinatorState()
		return st != nil && len(st.State.Regions[key].Shards) >= len(st.State.Shards)/4-1
	}, "the new node never got its share of the shards")
}

func firstReasons(drops []*deadletter.Event, n int) string {
	counts := map[string]int{}
	for _, d := range drops {
		counts[d.Reason]++
	}
	var out []string
	for r, c := range counts {
		out = append(out, fmt.Sprintf("%dx %s", c, r))
	}
	sort.Strings(out)
	if len(out) > n {
		out = out[:n]
	}
	return strings.Join(out, " | ")
}

func leaveNode(t *testing.T, n *testkit.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := n.Leave(ctx); err != nil {
		t.Fatalf("leave %s: %v", n.Name, err)
	}
}

// TestHandOffForwardsWhatTheShardHeld: a message that waits in the shard
// for an entity still passivating when the shard is handed off (a node
// leaves) reaches the entity's next incarnation at the new home.
func TestHandOffForwardsWhatTheShardHeld(t *testing.T) {
	w := newLocalWorld(t, actorsharding.WithRebalanceInterval(time.Hour))
	a, b := w.startNode(false), w.startNode(false)
	w.cluster.WaitConverged(t, 30*time.Second)
	w.waitRegistered(2)
	// An entity that lives on b, which leaves; a is the oldest and stays.
	var id string
	for _, candidate := range entityIDs(200) {
		if askEventually(t, a, w.region(a), candidate, 1).Node == b.Address() {
			id = candidate
			break
		}
	}
	if id == "" {
		t.Fatal("no entity on b")
	}
	a.System.Root.Send(w.region(a), pingMsg(id, slowPassivateSeq))
	select {
	case <-w.stopping: // it runs its stop message, and holds there
	case <-time.After(30 * time.Second):
		t.Fatal("the entity never began to passivate")
	}
	a.System.Root.Send(w.region(a), pingMsg(id, 2)) // held in b's shard
	left := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		left <- b.Leave(ctx)
	}()
	time.Sleep(500 * time.Millisecond) // b's shard gets HandOff while the entity still stops
	close(w.release)
	if err := <-left; err != nil {
		t.Fatalf("leave: %v", err)
	}
	testkit.WaitFor(t, 30*time.Second, func() bool {
		return slices.Contains(w.received.get(id), 2)
	}, "the held message never reached the entity at its new home; drops: %s", firstReasons(w.dropped(), 5))
	if trail := w.received.trail(id, func(seq int64) bool { return seq == 2 }); !strings.HasPrefix(trail, a.Name+":") {
		t.Fatalf("the held message was received at %s, want %s", trail, a.Name)
	}
}
