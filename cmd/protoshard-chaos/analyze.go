package main

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// lostWindow is how long before a kill -9 a message may have been sent and
// still be in flight to (or sitting in) the killed node: in a socket, a
// mailbox, or a region buffer waiting for the shard to start there.
const lostWindow = 5 * time.Second

// handOffWindow is how soon after a send its shard's home may stop (a
// hand-off under way) for the message to count as passed on to the
// shard's next home.
const handOffWindow = time.Second

// crashNoticeWindow is how long after a kill -9 a region may still send to
// the dead node: until membership removes it (the TTL) and a little more.
// At least lostWindow.
func crashNoticeWindow(ttl time.Duration) time.Duration {
	return max(lostWindow, ttl+2*time.Second)
}

// Evidence listed per kind of finding: at most maxExamples, and at most
// examplesPerFault from one fault's window, so that every fault with
// findings shows some.
const (
	maxExamples      = 30
	examplesPerFault = 3
)

// sampler decides which findings of one kind are listed as examples.
type sampler struct {
	n        int
	perFault map[int]int
}

// take reports whether a finding in fault's window is listed.
func (s *sampler) take(fault int) bool {
	if s.perFault == nil {
		s.perFault = map[int]int{}
	}
	if s.n >= maxExamples || s.perFault[fault] >= examplesPerFault {
		return false
	}
	s.n++
	s.perFault[fault]++
	return true
}

// Counts are the findings of one window of the run (or of the whole run).
type Counts struct {
	OverlappingActivations int `json:"overlapping_activations"`
	OverlappingSingletons  int `json:"overlapping_singletons"`
	Sent                   int `json:"sent"`
	Delivered              int `json:"delivered"`
	Duplicated             int `json:"duplicated"`
	Dropped                int `json:"dropped"`
	LostToCrash            int `json:"lost_in_flight_to_crashed_or_isolated_node"`
	Unaccounted            int `json:"unaccounted"`
	OrderViolations        int `json:"order_violations"`
}

// Findings is what the merged ledgers show.
type Findings struct {
	Counts
	// EntitiesWithOverlap is how many entities had at least one overlap.
	EntitiesWithOverlap int `json:"entities_with_overlap"`
	// DroppedByReason counts the dropped messages by reason (numbers and
	// quoted ids replaced, so that one reason is one line).
	DroppedByReason map[string]int `json:"dropped_by_reason,omitempty"`
	// DroppedProtoOnly counts dropped messages that only proto.actor's
	// *actor.DeadLetterEvent reported, with no *deadletter.Event (and so no
	// reason from protoshard).
	DroppedProtoOnly int `json:"dropped_proto_only"`
	// DeliveredAndDropped counts messages that arrived although a drop
	// was reported for them.
	DeliveredAndDropped int `json:"delivered_and_dropped"`
	// ReceivedNotSent counts receipts of messages the load generator's
	// ledger has no send of (a gap in a ledger).
	ReceivedNotSent int `json:"received_not_sent"`
	// Incarnations and SingletonIncarnations count the activations seen.
	Incarnations          int `json:"incarnations"`
	SingletonIncarnations int `json:"singleton_incarnations"`
	// BadLines counts ledger lines that did not parse.
	BadLines int `json:"bad_lines"`

	Overlaps          []OverlapEvidence `json:"overlaps,omitempty"`
	SingletonOverlaps []OverlapEvidence `json:"singleton_overlaps,omitempty"`
	UnaccountedList   []MessageEvidence `json:"unaccounted_examples,omitempty"`
	LostList          []MessageEvidence `json:"lost_examples,omitempty"`
	DuplicateList     []MessageEvidence `json:"duplicate_examples,omitempty"`
	OrderList         []OrderEvidence   `json:"order_violation_examples,omitempty"`

	// PerFault holds the counts of each fault's window, from its start
	// to the next fault's start (the last one's to the end), in fault
	// order. BeforeFaults is the window before the first fault.
	PerFault     []Counts `json:"per_fault"`
	BeforeFaults Counts   `json:"before_faults"`
}

// OverlapEvidence is one pair of incarnations of one key alive at once.
type OverlapEvidence struct {
	Key         string  `json:"key"`
	First       string  `json:"first"`
	FirstNode   string  `json:"first_node"`
	FirstStart  string  `json:"first_start"`
	FirstEnd    string  `json:"first_end"`
	FirstEndBy  string  `json:"first_end_by"`
	Second      string  `json:"second"`
	SecondNode  string  `json:"second_node"`
	SecondStart string  `json:"second_start"`
	OverlapMS   float64 `json:"overlap_ms"`
	// Fault is the number of the fault in whose window the second
	// incarnation started (0: before the first fault).
	Fault int `json:"fault"`
}

// MessageEvidence is one numbered message.
type MessageEvidence struct {
	Sender   string `json:"sender"`
	Entity   string `json:"entity"`
	Seq      int64  `json:"seq"`
	Sent     string `json:"sent"`
	Fault    int    `json:"fault"`
	Detail   string `json:"detail,omitempty"`
	Receipts int    `json:"receipts,omitempty"`
}

// OrderEvidence is one receipt of a lower sequence number after a higher
// one from the same sender.
type OrderEvidence struct {
	Sender      string `json:"sender"`
	Entity      string `json:"entity"`
	Seq         int64  `json:"seq"`
	After       int64  `json:"after"`
	At          string `json:"at"`
	Incarnation string `json:"incarnation"`
	Sent        string `json:"sent,omitempty"`
	Fault       int    `json:"fault"`
}

// incarnation is one activation of an entity or of the singleton.
type incarnation struct {
	key       string // "entity <id>" or "singleton"
	singleton bool
	id        string
	node      string
	start     int64
	stop      int64   // 0: no stop record
	acts      []int64 // receipts, probe answers, singleton ticks
	rawEnd    int64   // stop record, else the node's death, else the end
	rawEndBy  string
	end       int64 // rawEnd after the frozen-node rule
	endBy     string
}

type interval struct{ from, to int64 }

type msgKey struct {
	snd, ent string
	seq      int64
}

type receipt struct {
	t   int64
	inc string
}

type msgState struct {
	sent     int64
	from     string // the process that sent it
	receipts []receipt
	reasons  []string // protoshard's reasons
	proto    bool     // proto.actor's dead-letter event seen
}

var (
	quotedRE = regexp.MustCompile(`"[^"]*"`)
	digitsRE = regexp.MustCompile(`[0-9]+`)
)

// normalizeReason turns a drop reason into its kind: ids and numbers
// replaced.
func normalizeReason(s string) string {
	s = quotedRE.ReplaceAllString(s, `"…"`)
	return digitsRE.ReplaceAllString(s, "N")
}

// analyze computes the findings from the merged records (in time order)
// and the start times of the faults (in order).
//
// The rules, also in the command's documentation:
//   - An incarnation is alive from its start record to its stop record. One
//     without a stop record ends when its node was killed (the kill
//     record), else when its process exited, else at the end of the run.
//   - A node frozen by SIGSTOP holds its incarnations. An incarnation alive
//     when its node froze that records no activity (receipt, probe answer,
//     singleton tick) from the freeze on ends when the freeze began; one
//     that does ends at its last such activity. So a frozen incarnation
//     overlaps another only if it did something after the freeze began and
//     after the other one started.
//   - Two incarnations of one key overlap when one starts before the other
//     ended. Each such pair counts once.
//   - A message is delivered when received at least once; duplicated when
//     received more than once; dropped when not received and a
//     dead-letter event names it; lost in flight to a crashed node when
//     not received, not dropped, and an incarnation of the entity that
//     started before the send (or within lostWindow after it) was ended by
//     a kill -9 of its node within lostWindow after the send or noticeAfter
//     before it (a sender routes to a dead node until membership removes
//     it), or its node was frozen or cut off while the message was on its
//     way there (sent during the isolation or within lostWindow before it:
//     to the others such a node crashed); an incarnation of another entity
//     of the same shard counts as well (they live where the shard lives);
//     so does a kill -9 within lostWindow after (or noticeAfter before) a
//     send made while no (or only a home that stopped within a second:
//     a hand-off under way)
//     incarnation of the entity or its shard was alive anywhere (between a
//     hand-off and the next start), if the shard started again only after
//     the kill (it had been allocated to the killed node); or such a send
//     during a cut of a node other than the oldest (or within lostWindow
//     before it), when the sender recorded that node's removal during the
//     cut, after the send, and the shard started again only after that
//     removal (it had been allocated to the cut-off node); unaccounted
//     otherwise.
//   - An order violation is a receipt, by any incarnation, of a lower
//     sequence number from a sender after a higher one for that entity. It
//     counts in the window of the late message's send, where its delay
//     began.
func analyze(recs []Record, faultStarts []time.Time, noticeAfter time.Duration) Findings {
	f := Findings{DroppedByReason: map[string]int{}, PerFault: make([]Counts, len(faultStarts))}
	var orderEx, singletonEx, overlapEx, dupEx, lostEx, unaccEx sampler
	starts := make([]int64, len(faultStarts))
	for i, s := range faultStarts {
		starts[i] = s.UnixNano()
	}
	// faultAt returns the 1-based number of the fault whose window holds t.
	faultAt := func(t int64) int {
		return sort.Search(len(starts), func(i int) bool { return starts[i] > t })
	}
	window := func(t int64) *Counts {
		if n := faultAt(t); n > 0 {
			return &f.PerFault[n-1]
		}
		return &f.BeforeFaults
	}

	// The end of the observation: later records do not count.
	end := int64(0)
	for _, r := range recs {
		if r.Ev == evEnd {
			end = r.T
			break
		}
	}
	if end == 0 && len(recs) > 0 {
		end = recs[len(recs)-1].T
	}

	// Node process timelines.
	killed := map[string]int64{}
	exited := map[string]int64{}
	freezes := map[string][]interval{}
	cuts := map[string][]interval{}
	// addrOf is each node's address; removedSeen[observer][addr] the times
	// observer saw the member at addr removed without leaving.
	addrOf := map[string]string{}
	removedSeen := map[string]map[string][]int64{}
	// oldestCut[node][t]: the cut of node at t cut off the oldest node,
	// with the coordinator (a partition-oldest fault, which starts with
	// its cut).
	oldestCut := map[string]map[int64]bool{}
	for _, r := range recs {
		if r.T > end {
			break
		}
		switch r.Ev {
		case evKill:
			if _, ok := killed[r.Node]; !ok {
				killed[r.Node] = r.T
			}
		case evExit:
			if _, ok := exited[r.Node]; !ok {
				exited[r.Node] = r.T
			}
		case evFreeze:
			freezes[r.Node] = append(freezes[r.Node], interval{from: r.T, to: end})
		case evThaw:
			if fs := freezes[r.Node]; len(fs) > 0 {
				fs[len(fs)-1].to = r.T
			}
		case evCut:
			cuts[r.Node] = append(cuts[r.Node], interval{from: r.T, to: end})
		case evHeal:
			if cs := cuts[r.Node]; len(cs) > 0 {
				cs[len(cs)-1].to = r.T
			}
		case evFault:
			if r.Reason == faultPartitionOldest {
				if oldestCut[r.Node] == nil {
					oldestCut[r.Node] = map[int64]bool{}
				}
				oldestCut[r.Node][r.T] = true
			}
		case evReady:
			if _, ok := addrOf[r.Node]; !ok {
				addrOf[r.Node] = r.Addr
			}
		case evMember:
			if r.Reason == memberRemoved {
				if removedSeen[r.Node] == nil {
					removedSeen[r.Node] = map[string][]int64{}
				}
				removedSeen[r.Node][r.Addr] = append(removedSeen[r.Node][r.Addr], r.T)
			}
		}
	}
	death := func(node string) (int64, string) {
		if t, ok := killed[node]; ok {
			return t, "kill -9 of " + node
		}
		if t, ok := exited[node]; ok {
			return t, "exit of " + node
		}
		return end, "still alive at the end"
	}

	// Incarnations and messages.
	incs := map[string]*incarnation{}
	var incOrder []*incarnation
	getInc := func(r Record, singleton bool) *incarnation {
		in, ok := incs[r.Inc]
		if !ok {
			key := "entity " + r.Ent
			if singleton {
				key = "singleton"
			}
			in = &incarnation{key: key, singleton: singleton, id: r.Inc, node: r.Node, start: r.T}
			incs[r.Inc] = in
			incOrder = append(incOrder, in)
		}
		return in
	}
	msgs := map[msgKey]*msgState{}
	var msgOrder []msgKey
	getMsg := func(k msgKey) *msgState {
		m, ok := msgs[k]
		if !ok {
			m = &msgState{}
			msgs[k] = m
			msgOrder = append(msgOrder, k)
		}
		return m
	}
	type orderKey struct{ snd, ent string }
	maxSeq := map[orderKey]int64{}
	for _, r := range recs {
		if r.T > end {
			break
		}
		switch r.Ev {
		case evStart, evSStart:
			in := getInc(r, r.Ev == evSStart)
			if in.start > r.T {
				in.start = r.T
			}
		case evStop, evSStop:
			in := getInc(r, r.Ev == evSStop)
			in.stop = r.T
		case evRecv:
			in := getInc(r, false)
			in.acts = append(in.acts, r.T)
			k := msgKey{r.Snd, r.Ent, r.Seq}
			m := getMsg(k)
			m.receipts = append(m.receipts, receipt{t: r.T, inc: r.Inc})
			ok := orderKey{r.Snd, r.Ent}
			if hi, seen := maxSeq[ok]; seen && r.Seq < hi {
				at := r.T
				if m.sent != 0 {
					at = m.sent
				}
				f.OrderViolations++
				window(at).OrderViolations++
				if orderEx.take(faultAt(at)) {
					ev := OrderEvidence{Sender: r.Snd, Entity: r.Ent, Seq: r.Seq, After: hi, At: stamp(r.T), Incarnation: r.Inc, Fault: faultAt(at)}
					if m.sent != 0 {
						ev.Sent = stamp(m.sent)
					}
					f.OrderList = append(f.OrderList, ev)
				}
			} else if !seen || r.Seq > hi {
				maxSeq[ok] = r.Seq
			}
		case evProbe, evSTick:
			in := getInc(r, r.Ev == evSTick)
			in.acts = append(in.acts, r.T)
		case evSent:
			m := getMsg(msgKey{r.Snd, r.Ent, r.Seq})
			if m.sent == 0 {
				m.sent, m.from = r.T, r.Node
			}
		case evDrop:
			if r.Snd == "" || r.Src == srcConsumer {
				// A probe, or a copy a reliable entity discarded: the
				// message itself is not lost.
				continue
			}
			m := getMsg(msgKey{r.Snd, r.Ent, r.Seq})
			if r.Src == srcDeadletter {
				m.reasons = append(m.reasons, r.Reason)
			} else {
				m.proto = true
			}
		}
	}

	// Ends of the incarnations.
	for _, in := range incOrder {
		dt, dwhy := death(in.node)
		in.rawEnd, in.endBy = dt, dwhy
		if in.stop != 0 && in.stop <= dt {
			in.rawEnd, in.endBy = in.stop, "stop record"
		}
		in.end, in.rawEndBy = in.rawEnd, in.endBy
		for _, fr := range freezes[in.node] {
			if fr.from <= in.start || fr.from >= in.rawEnd {
				continue
			}
			last := int64(0)
			for _, a := range in.acts {
				if a >= fr.from && a <= in.rawEnd && a > last {
					last = a
				}
			}
			if last == 0 {
				in.end, in.endBy = fr.from, "freeze of "+in.node+" (no activity after it)"
			} else {
				in.end, in.endBy = last, "last activity after the freeze of "+in.node
			}
			break
		}
		if in.singleton {
			f.SingletonIncarnations++
		} else {
			f.Incarnations++
		}
	}

	// Overlaps per key.
	byKey := map[string][]*incarnation{}
	var keys []string
	for _, in := range incOrder {
		if _, ok := byKey[in.key]; !ok {
			keys = append(keys, in.key)
		}
		byKey[in.key] = append(byKey[in.key], in)
	}
	for _, key := range keys {
		list := byKey[key]
		sort.SliceStable(list, func(i, j int) bool { return list[i].start < list[j].start })
		overlapped := false
		for i, a := range list {
			for _, b := range list[i+1:] {
				if b.start >= a.end {
					continue
				}
				overlapped = true
				ev := OverlapEvidence{
					Key: key, First: a.id, FirstNode: a.node, FirstStart: stamp(a.start), FirstEnd: stamp(a.end), FirstEndBy: a.endBy,
					Second: b.id, SecondNode: b.node, SecondStart: stamp(b.start),
					OverlapMS: float64(min(a.end, b.end)-b.start) / 1e6, Fault: faultAt(b.start),
				}
				if a.singleton {
					f.OverlappingSingletons++
					window(b.start).OverlappingSingletons++
					if singletonEx.take(ev.Fault) {
						f.SingletonOverlaps = append(f.SingletonOverlaps, ev)
					}
				} else {
					f.OverlappingActivations++
					window(b.start).OverlappingActivations++
					if overlapEx.take(ev.Fault) {
						f.Overlaps = append(f.Overlaps, ev)
					}
				}
			}
		}
		if overlapped && key != "singleton" {
			f.EntitiesWithOverlap++
		}
	}

	// The entity incarnations in start order, for the home of a message.
	entityIncs := map[string][]*incarnation{}
	for _, in := range incOrder {
		if !in.singleton {
			ent := in.key[len("entity "):]
			entityIncs[ent] = append(entityIncs[ent], in)
		}
	}
	for _, list := range entityIncs {
		sort.SliceStable(list, func(i, j int) bool { return list[i].start < list[j].start })
	}
	// The incarnations of every entity of a shard, in start order: all
	// entities of a shard live where the shard lives, so they tell where a
	// message went whose own entity had not started there yet.
	shardIncs := map[string][]*incarnation{}
	shardOfEntity := map[string]string{}
	for _, in := range incOrder {
		if shard, ok := shardOf(in.id); ok && !in.singleton {
			shardIncs[shard] = append(shardIncs[shard], in)
			shardOfEntity[in.key[len("entity "):]] = shard
		}
	}
	for _, list := range shardIncs {
		sort.SliceStable(list, func(i, j int) bool { return list[i].start < list[j].start })
	}
	// candidates are the incarnations that can tell where a message for
	// ent went: its own, then those of its shard.
	candidates := func(ent string) [][]*incarnation {
		return [][]*incarnation{entityIncs[ent], shardIncs[shardOfEntity[ent]]}
	}
	home := func(ent string, t int64) *incarnation {
		list := entityIncs[ent]
		var live, before *incarnation
		for _, in := range list {
			if in.start <= t {
				before = in // the latest one that started before t
				if in.rawEnd >= t {
					live = in
				}
			}
		}
		if live != nil {
			return live
		}
		if before != nil {
			return before
		}
		for _, in := range list {
			if in.start > t && in.start <= t+int64(lostWindow) {
				return in
			}
		}
		return nil
	}
	// crashed returns an incarnation of ent that a kill -9 of its node
	// ended within the window of a message sent at t: one that started
	// before the send or within lostWindow after it. The detail says when.
	crashed := func(ent string, t int64) (*incarnation, string) {
		for _, list := range candidates(ent) {
			for _, in := range list {
				if in.start > t+int64(lostWindow) {
					break
				}
				k, ok := killed[in.node]
				if ok && in.rawEnd == k && k >= t-int64(noticeAfter) && k <= t+int64(lostWindow) {
					return in, "node killed at " + stamp(k)
				}
			}
		}
		return nil, ""
	}
	// betweenHomes explains a message sent while its shard had no home
	// anywhere the ledgers show (no incarnation of the entity or of its
	// shard alive: between a hand-off and the next start), when a node
	// was killed within lostWindow after the send, or noticeAfter before
	// it (senders route to a dead node until membership removes it), and
	// the shard started again only after that kill: the shard had just
	// been allocated to the killed node, where none of its entities had
	// started yet. The same holds for a node cut off the network while
	// the message was on its way (sent during the cut or within lostWindow
	// before it) that the sender saw removed after the send, when the
	// shard started again only after that removal: the coordinator moves
	// a shard off a live region only by a hand-off, which starts it
	// elsewhere at once, so a shard whose home returned only once the
	// cut-off node's removal margin had passed was allocated to that
	// node, and the sender routed the message there (until the removal
	// the cut-off node was a member like any other). Freezes do not
	// count here: a frozen node reads its sockets after SIGCONT, and what
	// reaches its region then is delivered or dropped with a reason. Nor
	// does a cut of the oldest node: the coordinator is cut off with it,
	// the others hold their messages for shards without a home until a
	// new coordinator answers, and what is lost meanwhile is no message
	// in flight.
	betweenHomes := func(ent string, t int64, from string) (string, bool) {
		var next int64 = -1
		for _, list := range candidates(ent) {
			for _, in := range list {
				if in.start <= t && in.rawEnd >= t {
					if in.rawEndBy == "stop record" && in.rawEnd <= t+int64(handOffWindow) {
						// Stopped right after the send: the shard was being
						// handed off, and its old home passed the message
						// on to the next one.
						continue
					}
					return "", false // it had a home, which says what happened
				}
				if in.start > t && (next < 0 || in.start < next) {
					next = in.start
				}
			}
		}
		for node, k := range killed {
			if k >= t-int64(noticeAfter) && k <= t+int64(lostWindow) && (next < 0 || next > k) {
				return fmt.Sprintf("no home of its shard alive when sent (between hand-offs); node %s killed at %s, the shard started again after it", node, stamp(k)), true
			}
		}
		for _, node := range slices.Sorted(maps.Keys(cuts)) {
			for _, iv := range cuts[node] {
				if oldestCut[node][iv.from] || t < iv.from-int64(lostWindow) || t > iv.to {
					continue
				}
				for _, rm := range removedSeen[from][addrOf[node]] {
					if rm < iv.from || rm > iv.to {
						continue
					}
					if t < rm && (next < 0 || next > rm) {
						return fmt.Sprintf("no home of its shard alive when sent (between hand-offs); node %s cut off from %s to %s, seen removed by %s at %s, the shard started again after it", node, stamp(iv.from), stamp(iv.to), from, stamp(rm)), true
					}
					break
				}
			}
		}
		return "", false
	}
	// isolated returns an incarnation of ent whose node was frozen or cut
	// off while a message sent at t was on its way there (sent during the
	// isolation, or within lostWindow before it), and which ended after
	// the isolation began: the cluster removed that node as if it had
	// crashed, and what was in flight to it is lost the same way.
	isolated := func(ent string, t int64) (*incarnation, string) {
		for _, list := range candidates(ent) {
			for _, in := range list {
				if in.start > t+int64(lostWindow) {
					break
				}
				for what, ivs := range map[string][]interval{"frozen": freezes[in.node], "cut off": cuts[in.node]} {
					for _, iv := range ivs {
						if t >= iv.from-int64(lostWindow) && t <= iv.to && in.start <= iv.from && in.rawEnd >= iv.from {
							return in, fmt.Sprintf("node %s from %s to %s", what, stamp(iv.from), stamp(iv.to))
						}
					}
				}
			}
		}
		return nil, ""
	}

	// Messages.
	for _, k := range msgOrder {
		m := msgs[k]
		if m.sent == 0 {
			if len(m.receipts) > 0 {
				f.ReceivedNotSent++
			}
			continue
		}
		w := window(m.sent)
		f.Sent++
		w.Sent++
		ev := MessageEvidence{Sender: k.snd, Entity: k.ent, Seq: k.seq, Sent: stamp(m.sent), Fault: faultAt(m.sent), Receipts: len(m.receipts)}
		dropped := len(m.reasons) > 0 || m.proto
		switch {
		case len(m.receipts) > 0:
			f.Delivered++
			w.Delivered++
			if len(m.receipts) > 1 {
				f.Duplicated++
				w.Duplicated++
				if dupEx.take(ev.Fault) {
					ev.Detail = fmt.Sprintf("received by %s at %s and by %s at %s", m.receipts[0].inc, stamp(m.receipts[0].t), m.receipts[1].inc, stamp(m.receipts[1].t))
					f.DuplicateList = append(f.DuplicateList, ev)
				}
			}
			if dropped {
				f.DeliveredAndDropped++
			}
		case dropped:
			f.Dropped++
			w.Dropped++
			if len(m.reasons) > 0 {
				f.DroppedByReason[normalizeReason(m.reasons[0])]++
			} else {
				f.DroppedProtoOnly++
				f.DroppedByReason["proto.actor dead letter only (no deadletter.Event)"]++
			}
		default:
			in, how := crashed(k.ent, m.sent)
			if in == nil {
				in, how = isolated(k.ent, m.sent)
			}
			if in != nil {
				f.LostToCrash++
				w.LostToCrash++
				if lostEx.take(ev.Fault) {
					ev.Detail = fmt.Sprintf("home %s, %s", in.id, how)
					f.LostList = append(f.LostList, ev)
				}
				continue
			}
			if why, ok := betweenHomes(k.ent, m.sent, m.from); ok {
				f.LostToCrash++
				w.LostToCrash++
				if lostEx.take(ev.Fault) {
					ev.Detail = why
					f.LostList = append(f.LostList, ev)
				}
				continue
			}
			in = home(k.ent, m.sent)
			f.Unaccounted++
			w.Unaccounted++
			if unaccEx.take(ev.Fault) {
				switch {
				case in == nil:
					ev.Detail = "no incarnation of the entity was live when it was sent"
				default:
					ev.Detail = fmt.Sprintf("home when sent: %s on %s (ended %s by %s)", in.id, in.node, stamp(in.rawEnd), in.rawEndBy)
				}
				f.UnaccountedList = append(f.UnaccountedList, ev)
			}
		}
	}
	return f
}

// shardOf returns the shard in an entity incarnation's id, which is
// "<node>|<actor id>|<counter>" with the actor id ".../<shard>/<entity>"
// (a region names a shard child by the shard's id, the shard an entity
// child by the entity's).
func shardOf(inc string) (string, bool) {
	parts := strings.Split(inc, "|")
	if len(parts) != 3 {
		return "", false
	}
	path := strings.Split(parts[1], "/")
	if len(path) < 2 {
		return "", false
	}
	return path[len(path)-2], true
}

// stamp formats a ledger time for the report.
func stamp(t int64) string {
	return time.Unix(0, t).Format("15:04:05.000000")
}

// singletonNodes returns the nodes whose singleton incarnation was alive
// at t (started before it and not stopped by then), by the records: the
// node that a kill of the coordinator's node should have hit.
func singletonNodes(recs []Record, t int64) []string {
	alive := map[string]string{} // incarnation -> node
	for _, r := range recs {
		if r.T > t {
			break
		}
		switch r.Ev {
		case evSStart:
			alive[r.Inc] = r.Node
		case evSStop:
			delete(alive, r.Inc)
		case evKill, evExit:
			for inc, node := range alive {
				if node == r.Node {
					delete(alive, inc)
				}
			}
		}
	}
	var nodes []string
	for _, node := range alive {
		nodes = append(nodes, node)
	}
	sort.Strings(nodes)
	return nodes
}

// SingletonMove is how the singleton left the node a fault hit (the oldest
// node, with the coordinator): when its last incarnation there ended and
// when another node started one, in seconds from the fault's start.
// With a lease the first must come before the second.
type SingletonMove struct {
	// From is the node that ran the singleton when the fault began.
	From string `json:"from"`
	// StoppedS: its stop record, or the kill -9 or exit of its node;
	// -1 when it ran on until the next fault.
	StoppedS float64 `json:"stopped_s"`
	// To is the node of the first incarnation started elsewhere, and
	// StartedS when; "" and -1 when none started before the next fault.
	To       string  `json:"to,omitempty"`
	StartedS float64 `json:"started_s"`
}

// singletonMove measures how the singleton left node after a fault that
// began at start, up to until (the next fault's start or the end): the
// end of the last incarnation on node that was alive at start or started
// after it (before the other node's), and the first start elsewhere.
func singletonMove(recs []Record, node string, start, until int64) SingletonMove {
	mv := SingletonMove{From: node, StoppedS: -1, StartedS: -1}
	alive := map[string]bool{} // incarnations on node
	for _, r := range recs {
		if r.T > until {
			break
		}
		switch {
		case r.Ev == evSStart && r.Node == node:
			if mv.To == "" {
				alive[r.Inc] = true
			}
		case r.Ev == evSStart && r.T >= start && mv.To == "":
			mv.To, mv.StartedS = r.Node, secondsSince(start, r.T)
		case r.Ev == evSStop && alive[r.Inc]:
			delete(alive, r.Inc)
			if r.T >= start && len(alive) == 0 {
				mv.StoppedS = secondsSince(start, r.T)
			}
		case (r.Ev == evKill || r.Ev == evExit) && r.Node == node && len(alive) > 0:
			clear(alive)
			if r.T >= start {
				mv.StoppedS = secondsSince(start, r.T)
			}
		}
	}
	if len(alive) > 0 {
		mv.StoppedS = -1
	}
	return mv
}

func secondsSince(from, t int64) float64 {
	return float64(t-from) / 1e9
}
