package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/internal/shardproto"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/types/known/anypb"
)

// base is the time of the hand-made ledgers; at(s) is s seconds later.
var base = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(s float64) int64 { return base.Add(time.Duration(s * float64(time.Second))).UnixNano() }

// Builders of ledger records.
func start(s float64, node, ent, inc string) Record {
	return Record{T: at(s), Ev: evStart, Node: node, Ent: ent, Inc: inc}
}
func stop(s float64, node, ent, inc string) Record {
	return Record{T: at(s), Ev: evStop, Node: node, Ent: ent, Inc: inc}
}
func recv(s float64, node, ent, inc, snd string, seq int64) Record {
	return Record{T: at(s), Ev: evRecv, Node: node, Ent: ent, Inc: inc, Snd: snd, Seq: seq}
}
func sent(s float64, snd, ent string, seq int64) Record {
	return Record{T: at(s), Ev: evSent, Node: "loadgen", Ent: ent, Snd: snd, Seq: seq}
}
func orch(s float64, ev, node string) Record { return Record{T: at(s), Ev: ev, Node: node} }
func end(s float64) Record                   { return Record{T: at(s), Ev: evEnd, Node: "orchestrator"} }

func TestAnalyzeActivations(t *testing.T) {
	tests := []struct {
		name       string
		recs       []Record
		overlaps   int
		singletons int
		endBy      string // of the first overlap's first incarnation, if any
	}{
		{
			name: "hand-off: the old one stops before the new one starts",
			recs: []Record{
				start(0, "n1", "e", "a"), stop(5, "n1", "e", "a"),
				start(5.001, "n2", "e", "b"), end(30),
			},
		},
		{
			name: "overlap: the new one starts while the old one runs",
			recs: []Record{
				start(0, "n1", "e", "a"), start(5, "n2", "e", "b"),
				stop(10, "n1", "e", "a"), end(30),
			},
			overlaps: 1, endBy: "stop record",
		},
		{
			name: "no stop record and no kill: alive until the end",
			recs: []Record{
				start(0, "n1", "e", "a"), start(20, "n2", "e", "b"), end(30),
			},
			overlaps: 1, endBy: "still alive at the end",
		},
		{
			name: "kill -9 ends the incarnations of its node",
			recs: []Record{
				start(0, "n1", "e", "a"), orch(5, evKill, "n1"), orch(5.01, evExit, "n1"),
				start(11, "n2", "e", "b"), end(30),
			},
		},
		{
			name: "kill -9 after the new one started is an overlap",
			recs: []Record{
				start(0, "n1", "e", "a"), start(4, "n2", "e", "b"), orch(5, evKill, "n1"), end(30),
			},
			overlaps: 1, endBy: "kill -9 of n1",
		},
		{
			name: "frozen node: an incarnation that only stops after SIGCONT ended at the freeze",
			recs: []Record{
				start(0, "n1", "e", "a"), recv(1, "n1", "e", "a", "s1", 1),
				orch(5, evFreeze, "n1"), start(10, "n2", "e", "b"),
				orch(13, evThaw, "n1"), stop(13.1, "n1", "e", "a"), end(30),
			},
		},
		{
			name: "frozen node: an incarnation that processes after SIGCONT overlaps",
			recs: []Record{
				start(0, "n1", "e", "a"), orch(5, evFreeze, "n1"), start(10, "n2", "e", "b"),
				orch(13, evThaw, "n1"), recv(13.05, "n1", "e", "a", "s1", 1), stop(13.1, "n1", "e", "a"), end(30),
			},
			overlaps: 1, endBy: "last activity after the freeze of n1",
		},
		{
			name: "frozen node: a probe answered after SIGCONT is activity too",
			recs: []Record{
				start(0, "n1", "e", "a"), orch(5, evFreeze, "n1"), start(10, "n2", "e", "b"),
				orch(13, evThaw, "n1"), {T: at(13.02), Ev: evProbe, Node: "n1", Ent: "e", Inc: "a", Probe: 3}, end(30),
			},
			overlaps: 1, endBy: "last activity after the freeze of n1",
		},
		{
			name: "frozen node: activity after SIGCONT but before the other started is no overlap",
			recs: []Record{
				start(0, "n1", "e", "a"), orch(5, evFreeze, "n1"), orch(13, evThaw, "n1"),
				recv(13.05, "n1", "e", "a", "s1", 1), start(13.2, "n2", "e", "b"), stop(13.3, "n1", "e", "a"), end(30),
			},
		},
		{
			name: "an incarnation started after the freeze is judged by its records",
			recs: []Record{
				start(0, "n2", "e", "b"), orch(5, evFreeze, "n1"), orch(13, evThaw, "n1"),
				start(13.1, "n1", "e", "a"), stop(13.2, "n1", "e", "a"), end(30),
			},
			overlaps: 1, endBy: "still alive at the end",
		},
		{
			name: "singletons: a second one while the first runs",
			recs: []Record{
				{T: at(0), Ev: evSStart, Node: "n1", Inc: "s-a"}, {T: at(3), Ev: evSStart, Node: "n2", Inc: "s-b"}, end(30),
			},
			singletons: 1, endBy: "still alive at the end",
		},
		{
			name: "singletons: a frozen oldest that ticks after SIGCONT overlaps its successor",
			recs: []Record{
				{T: at(0), Ev: evSStart, Node: "n1", Inc: "s-a"}, orch(5, evFreeze, "n1"),
				{T: at(9), Ev: evSStart, Node: "n2", Inc: "s-b"}, orch(13, evThaw, "n1"),
				{T: at(13.01), Ev: evSTick, Node: "n1", Inc: "s-a"}, {T: at(13.02), Ev: evSStop, Node: "n1", Inc: "s-a"}, end(30),
			},
			singletons: 1, endBy: "last activity after the freeze of n1",
		},
		{
			name: "singletons: a frozen oldest that only stops after SIGCONT does not",
			recs: []Record{
				{T: at(0), Ev: evSStart, Node: "n1", Inc: "s-a"}, orch(5, evFreeze, "n1"),
				{T: at(9), Ev: evSStart, Node: "n2", Inc: "s-b"}, orch(13, evThaw, "n1"),
				{T: at(13.02), Ev: evSStop, Node: "n1", Inc: "s-a"}, end(30),
			},
		},
		{
			name: "singletons: a cut-off oldest runs until its stop record, so ticking on past its successor's start overlaps",
			recs: []Record{
				{T: at(0), Ev: evSStart, Node: "n1", Inc: "s-a"}, orch(5, evCut, "n1"),
				{T: at(11), Ev: evSStart, Node: "n2", Inc: "s-b"}, {T: at(11.5), Ev: evSTick, Node: "n1", Inc: "s-a"},
				{T: at(12), Ev: evSStop, Node: "n1", Inc: "s-a"}, orch(13, evHeal, "n1"), end(30),
			},
			singletons: 1, endBy: "stop record",
		},
		{
			name: "singletons: a cut-off oldest that stops (its lease lost) before its successor starts does not",
			recs: []Record{
				{T: at(0), Ev: evSStart, Node: "n1", Inc: "s-a"}, orch(5, evCut, "n1"),
				{T: at(8), Ev: evSStop, Node: "n1", Inc: "s-a"},
				{T: at(11), Ev: evSStart, Node: "n2", Inc: "s-b"}, orch(13, evHeal, "n1"), end(30),
			},
		},
		{
			name: "records after the end of the observation do not count",
			recs: []Record{
				start(0, "n1", "e", "a"), stop(5, "n1", "e", "a"), end(30), start(31, "n2", "e", "b"), start(32, "n3", "e", "c"),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs := append([]Record(nil), tt.recs...)
			sortRecords(recs)
			f := analyze(recs, nil, 5*time.Second)
			if f.OverlappingActivations != tt.overlaps || f.OverlappingSingletons != tt.singletons {
				t.Fatalf("overlapping activations %d, singletons %d; want %d, %d\n%+v\n%+v",
					f.OverlappingActivations, f.OverlappingSingletons, tt.overlaps, tt.singletons, f.Overlaps, f.SingletonOverlaps)
			}
			list := append(f.Overlaps, f.SingletonOverlaps...)
			if tt.endBy != "" && (len(list) == 0 || list[0].FirstEndBy != tt.endBy) {
				t.Errorf("evidence %+v, want the first incarnation ended by %q", list, tt.endBy)
			}
			if tt.overlaps > 0 && f.EntitiesWithOverlap != 1 {
				t.Errorf("entities with an overlap: %d, want 1", f.EntitiesWithOverlap)
			}
		})
	}
}

func TestAnalyzeMessages(t *testing.T) {
	recs := []Record{
		// e1 lives on n2 all the time.
		start(0, "n2", "e1", "e1@n2"),
		// Delivered once.
		sent(1, "s1", "e1", 1), recv(1.1, "n2", "e1", "e1@n2", "s1", 1),
		// Delivered twice: one duplicate.
		sent(2, "s1", "e1", 2), recv(2.1, "n2", "e1", "e1@n2", "s1", 2), recv(2.2, "n2", "e1", "e1@n2", "s1", 2),
		// s2's #2 overtakes its #1: one order violation (and #1 still
		// counts as delivered).
		sent(3, "s2", "e1", 1), sent(3.1, "s2", "e1", 2),
		recv(3.2, "n2", "e1", "e1@n2", "s2", 2), recv(3.3, "n2", "e1", "e1@n2", "s2", 1),
		// Dropped with protoshard's reason (and proto.actor's event).
		sent(4, "s1", "e1", 3),
		{T: at(4.1), Ev: evDrop, Node: "n2", Src: srcDeadletter, Reason: `shard region Chaos: shard 7, entity "e1": the cluster is shutting down`, Snd: "s1", Ent: "e1", Seq: 3},
		{T: at(4.1), Ev: evDrop, Node: "n2", Src: srcProto, Snd: "s1", Ent: "e1", Seq: 3},
		// Dropped with proto.actor's event only.
		sent(4.5, "s3", "e1", 1),
		{T: at(4.6), Ev: evDrop, Node: "loadgen", Src: srcProto, Reason: "dead letter to x", Snd: "s3", Ent: "e1", Seq: 1},
		// Never arrived, no event, e1's node alive: unaccounted.
		sent(5, "s1", "e1", 4),

		// e2 lives on n1, killed at 10.
		start(0, "n1", "e2", "e2@n1"),
		// Sent 2s before the kill and never arrived: lost to the crash.
		sent(8, "s1", "e2", 1),
		// Sent long before the kill and never arrived: unaccounted.
		sent(2, "s2", "e2", 1),
		orch(10, evKill, "n1"), orch(10.01, evExit, "n1"),
		// Sent after the kill, before membership noticed: lost too.
		sent(11, "s1", "e2", 2),
		// e2 starts again on n3 at 17; sent after that and lost: not
		// the kill's doing.
		start(17, "n3", "e2", "e2@n3"),
		sent(18, "s1", "e2", 3),
		sent(19, "s1", "e2", 4), recv(19.1, "n3", "e2", "e2@n3", "s1", 4),

		// A receipt with no send record.
		recv(20, "n3", "e2", "e2@n3", "s9", 1),
		end(40),
	}
	sortRecords(recs)
	faults := []time.Time{time.Unix(0, at(7)), time.Unix(0, at(15))}
	f := analyze(recs, faults, 5*time.Second)
	want := Counts{Sent: 12, Delivered: 5, Duplicated: 1, Dropped: 2, LostToCrash: 2, Unaccounted: 3, OrderViolations: 1}
	if f.Counts != want {
		t.Errorf("counts\n got %+v\nwant %+v", f.Counts, want)
	}
	if f.DroppedProtoOnly != 1 || f.ReceivedNotSent != 1 {
		t.Errorf("dropped by proto.actor only %d, received not sent %d; want 1, 1", f.DroppedProtoOnly, f.ReceivedNotSent)
	}
	if n := f.DroppedByReason[`shard region Chaos: shard N, entity "…": the cluster is shutting down`]; n != 1 {
		t.Errorf("drop reasons %v", f.DroppedByReason)
	}
	// Windows: before the faults (sends up to 7s), fault 1 (7s-15s),
	// fault 2 (from 15s).
	before := Counts{Sent: 8, Delivered: 4, Duplicated: 1, Dropped: 2, Unaccounted: 2, OrderViolations: 1}
	fault1 := Counts{Sent: 2, LostToCrash: 2}
	fault2 := Counts{Sent: 2, Delivered: 1, Unaccounted: 1}
	if f.BeforeFaults != before || f.PerFault[0] != fault1 || f.PerFault[1] != fault2 {
		t.Errorf("windows\n got %+v / %+v / %+v\nwant %+v / %+v / %+v", f.BeforeFaults, f.PerFault[0], f.PerFault[1], before, fault1, fault2)
	}
	if len(f.OrderList) != 1 || f.OrderList[0].Seq != 1 || f.OrderList[0].After != 2 {
		t.Errorf("order evidence %+v", f.OrderList)
	}
	if len(f.LostList) != 2 || len(f.UnaccountedList) != 3 || len(f.DuplicateList) != 1 {
		t.Errorf("evidence: %d lost, %d unaccounted, %d duplicates", len(f.LostList), len(f.UnaccountedList), len(f.DuplicateList))
	}
}

// TestAnalyzeOrderWindow: an order violation counts where the late
// message was sent, not where it arrived.
func TestAnalyzeOrderWindow(t *testing.T) {
	recs := []Record{
		start(0, "n1", "e", "a"),
		sent(1, "s1", "e", 1), sent(9, "s1", "e", 2),
		recv(9.1, "n1", "e", "a", "s1", 2), recv(12, "n1", "e", "a", "s1", 1),
		end(20),
	}
	f := analyze(recs, []time.Time{time.Unix(0, at(5)), time.Unix(0, at(10))}, 5*time.Second)
	if f.OrderViolations != 1 || f.BeforeFaults.OrderViolations != 1 || f.PerFault[1].OrderViolations != 0 {
		t.Errorf("order violations %d, before the faults %d, in fault 2 %d; want 1, 1, 0", f.OrderViolations, f.BeforeFaults.OrderViolations, f.PerFault[1].OrderViolations)
	}
}

func TestParseLedger(t *testing.T) {
	in := `{"t":1,"ev":"start","node":"n1","ent":"e","inc":"a"}

{"t":2,"ev":"recv","node":"n1","ent":"e","inc":"a","snd":"s1","seq":3}
not json
{"t":3,"ev":""}
{"t":4,"ev":"stop","node":"n1","ent":"e","in`
	recs, bad, err := parseLedger(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || bad != 3 {
		t.Fatalf("%d records, %d bad; want 2, 3: %+v", len(recs), bad, recs)
	}
	if r := recs[1]; r.Ev != evRecv || r.Snd != "s1" || r.Seq != 3 || r.Inc != "a" {
		t.Errorf("parsed %+v", r)
	}
}

func TestLedgerRoundTrip(t *testing.T) {
	dir := t.TempDir()
	l, err := openLedger(ledgerPath(dir, "n1"), "n1")
	if err != nil {
		t.Fatal(err)
	}
	l.write(Record{Ev: evStart, Ent: "e", Inc: "a"})
	l.write(Record{Ev: evStop, Ent: "e", Inc: "a", T: 5})
	_ = l.close()
	recs, bad, err := readLedgers(dir)
	if err != nil || bad != 0 || len(recs) != 2 {
		t.Fatalf("%d records, %d bad, %v", len(recs), bad, err)
	}
	// Sorted by time: the stop stamped 5 comes first.
	if recs[0].Ev != evStop || recs[1].Node != "n1" || recs[1].T == 0 {
		t.Errorf("records %+v", recs)
	}
}

// TestAllocationRecorder: the coordinator's allocation strategy on a node
// picks what the default strategy picks and writes the shard's new home
// into the ledger.
func TestAllocationRecorder(t *testing.T) {
	dir := t.TempDir()
	l, err := openLedger(ledgerPath(dir, "n1"), "n1")
	if err != nil {
		t.Fatal(err)
	}
	r1 := actor.NewPID("10.0.0.1:1", "sharding/Chaos")
	r2 := actor.NewPID("10.0.0.2:1", "sharding/Chaos")
	current := []coordinatoractor.RegionAllocation{
		{Region: r1, Member: membership.Member{ID: "m1", Address: r1.Address, Age: 1}, Shards: []string{"1", "2"}},
		{Region: r2, Member: membership.Member{ID: "m2", Address: r2.Address, Age: 2}},
	}
	rec := allocationRecorder{strategy: defaultAllocationStrategy(), ledger: l}
	want := defaultAllocationStrategy().AllocateShard(r1, "56", current)
	got := rec.AllocateShard(r1, "56", current)
	_ = l.close()
	if got == nil || got.Address != want.Address {
		t.Fatalf("allocated to %v, the default strategy to %v", got, want)
	}
	recs, _, err := readLedgers(dir)
	if err != nil || len(recs) != 1 || recs[0].Ev != evAlloc || recs[0].Shard != "56" || recs[0].Addr != got.Address || recs[0].Node != "n1" {
		t.Fatalf("ledger %+v, %v; want one allocation of shard 56 to %s", recs, err, got.Address)
	}
}

func TestNumbered(t *testing.T) {
	p := &testpb.Ping{EntityId: "e", Seq: 4, From: "s2"}
	env, err := actorsharding.NewEnvelope("e", p)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := anypb.New(p)
	if err != nil {
		t.Fatal(err)
	}
	seqMsg := &messages.SequencedMessage{EntityId: "e", ProducerId: "s2", ProducerIncarnation: 9, SeqNr: 1, Message: payload}
	for _, m := range []any{p, env, &shardproto.Deliver{EntityID: "e", Message: p}, &actor.MessageEnvelope{Message: env},
		seqMsg, &shardproto.Deliver{EntityID: "e", Message: seqMsg}} {
		got := numbered(m, 0)
		if got == nil || got.From != "s2" || got.Seq != 4 {
			t.Errorf("numbered(%T) = %v", m, got)
		}
	}
	if numbered(&testpb.Pong{}, 0) != nil || numbered(nil, 0) != nil {
		t.Error("found a numbered message where there is none")
	}
}

func TestJudge(t *testing.T) {
	tests := []struct {
		name  string
		f     Counts
		fault *Fault
		ci    bool
		fails int
	}{
		{name: "all held", f: Counts{Sent: 10, Delivered: 8, Dropped: 1, LostToCrash: 1, Duplicated: 2}},
		{name: "overlap", f: Counts{Sent: 1, OverlappingActivations: 1}, fails: 1},
		{name: "singleton", f: Counts{Sent: 1, OverlappingSingletons: 2}, fails: 1},
		{name: "unaccounted", f: Counts{Sent: 1, Unaccounted: 1}, fails: 1},
		{name: "order", f: Counts{Sent: 1, OrderViolations: 3}, fails: 1},
		{name: "nothing sent", fails: 1},
		{name: "a fault not injected", f: Counts{Sent: 1}, fault: &Fault{N: 1, Kind: faultPause, Error: "SIGSTOP: no such process"}, fails: 1},
		{name: "partition skipped without root", f: Counts{Sent: 1}, fault: &Fault{N: 1, Kind: faultPartition, Error: "skipped: not root"}},
		{name: "partition skipped in CI", f: Counts{Sent: 1}, fault: &Fault{N: 1, Kind: faultPartition, Error: "skipped: not root"}, ci: true, fails: 1},
		{name: "partition-oldest skipped without root", f: Counts{Sent: 1}, fault: &Fault{N: 1, Kind: faultPartitionOldest, Error: "skipped: not root"}},
		{name: "partition-oldest skipped in CI", f: Counts{Sent: 1}, fault: &Fault{N: 1, Kind: faultPartitionOldest, Error: "skipped: not root"}, ci: true, fails: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Report{Skipped: map[string]string{}}
			skipLabFaults(r.Skipped, "not root")
			r.Findings.Counts = tt.f
			if tt.fault != nil {
				r.Faults = []*Fault{tt.fault}
			}
			r.judge(tt.ci)
			if len(r.Failures) != tt.fails {
				t.Errorf("failures %q, want %d", r.Failures, tt.fails)
			}
			var out bytes.Buffer
			r.writeText(&out)
			if pass := strings.Contains(out.String(), "\nPASS"); pass != (tt.fails == 0) {
				t.Errorf("text report says pass=%v:\n%s", pass, out.String())
			}
		})
	}
}

func TestNormalizeReason(t *testing.T) {
	got := normalizeReason(`shard region Chaos: shard 42, entity "e-00012": dropped to 10.77.0.12:4000`)
	want := `shard region Chaos: shard N, entity "…": dropped to N.N.N.N:N`
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestSampler(t *testing.T) {
	// One fault's findings: a few examples, not all.
	var one sampler
	for range 100 {
		one.take(4)
	}
	if one.n != examplesPerFault {
		t.Errorf("one fault gave %d examples, want %d", one.n, examplesPerFault)
	}
	// Many faults: bounded in all, and each fault capped.
	var s sampler
	taken := map[int]int{}
	for i := range 1000 {
		if s.take(i % 50) {
			taken[i%50]++
		}
	}
	if s.n != maxExamples {
		t.Errorf("took %d examples, want %d", s.n, maxExamples)
	}
	for fault, n := range taken {
		if n > examplesPerFault {
			t.Errorf("fault %d: %d examples", fault, n)
		}
	}
}

func TestSingletonNodes(t *testing.T) {
	recs := []Record{
		{T: at(0), Ev: evSStart, Node: "n1", Inc: "a"},
		{T: at(5), Ev: evSStop, Node: "n1", Inc: "a"},
		{T: at(6), Ev: evSStart, Node: "n2", Inc: "b"},
		orch(9, evKill, "n2"),
		{T: at(12), Ev: evSStart, Node: "n3", Inc: "c"},
	}
	for _, tt := range []struct {
		at   float64
		want string
	}{{1, "n1"}, {5.5, ""}, {7, "n2"}, {10, ""}, {13, "n3"}} {
		if got := strings.Join(singletonNodes(recs, at(tt.at)), ","); got != tt.want {
			t.Errorf("at %vs: %q, want %q", tt.at, got, tt.want)
		}
	}
}

func TestSingletonMove(t *testing.T) {
	sst := func(s float64, node, inc string) Record { return Record{T: at(s), Ev: evSStart, Node: node, Inc: inc} }
	ssp := func(s float64, node, inc string) Record { return Record{T: at(s), Ev: evSStop, Node: node, Inc: inc} }
	tests := []struct {
		name string
		recs []Record
		want SingletonMove
	}{
		{
			name: "cut: stopped on its node, then started elsewhere",
			recs: []Record{sst(0, "n1", "a"), orch(10, evCut, "n1"), ssp(13, "n1", "a"), sst(17, "n2", "b")},
			want: SingletonMove{From: "n1", StoppedS: 3, To: "n2", StartedS: 7},
		},
		{
			name: "cut: restarted on its node during the cut, the last incarnation's stop counts",
			recs: []Record{sst(0, "n1", "a"), orch(10, evCut, "n1"), ssp(11, "n1", "a"), sst(12, "n1", "c"), ssp(13, "n1", "c"), sst(17, "n2", "b")},
			want: SingletonMove{From: "n1", StoppedS: 3, To: "n2", StartedS: 7},
		},
		{
			name: "kill -9 ends it",
			recs: []Record{sst(0, "n1", "a"), orch(10, evKill, "n1"), orch(10.1, evExit, "n1"), sst(16, "n2", "b")},
			want: SingletonMove{From: "n1", StoppedS: 0, To: "n2", StartedS: 6},
		},
		{
			name: "runs on and none elsewhere",
			recs: []Record{sst(0, "n1", "a"), orch(10, evCut, "n1"), orch(18, evHeal, "n1")},
			want: SingletonMove{From: "n1", StoppedS: -1, StartedS: -1},
		},
		{
			name: "still running on its node when another started",
			recs: []Record{sst(0, "n1", "a"), orch(10, evCut, "n1"), sst(15, "n2", "b"), ssp(16, "n1", "a")},
			want: SingletonMove{From: "n1", StoppedS: 6, To: "n2", StartedS: 5},
		},
		{
			name: "records after the next fault do not count",
			recs: []Record{sst(0, "n1", "a"), orch(10, evCut, "n1"), ssp(13, "n1", "a"), sst(31, "n2", "b")},
			want: SingletonMove{From: "n1", StoppedS: 3, StartedS: -1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := singletonMove(tt.recs, "n1", at(10), at(30)); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	r := &Report{Faults: []*Fault{
		{N: 1, Kind: faultKill, Counts: Counts{Dropped: 3, LostToCrash: 1}, Recovery: &Recovery{AllAnswered: true, SinceStartS: 4}},
		{N: 2, Kind: faultPause, Counts: Counts{OverlappingActivations: 2}, Recovery: &Recovery{AllAnswered: true, SinceStartS: 8}},
		{N: 3, Kind: faultKill, Counts: Counts{Dropped: 1, OrderViolations: 5}, Recovery: &Recovery{AllAnswered: true, SinceStartS: 6}},
		{N: 4, Kind: faultKill, Recovery: &Recovery{Answered: 3, Total: 4}},
		{N: 5, Kind: faultPartition, Error: "skipped: not root"},
	}}
	r.summarize()
	if len(r.ByKind) != 2 {
		t.Fatalf("by kind %+v, want kill and pause", r.ByKind)
	}
	k := r.ByKind[0]
	want := KindSummary{Kind: faultKill, Faults: 3, Counts: Counts{Dropped: 4, LostToCrash: 1, OrderViolations: 5},
		Recovered: 2, NotRecovered: 1, RecoveryMedianS: 5, RecoveryMaxS: 6}
	if k != want {
		t.Errorf("kill\n got %+v\nwant %+v", k, want)
	}
	if p := r.ByKind[1]; p.Kind != faultPause || p.Counts.OverlappingActivations != 2 || p.RecoveryMedianS != 8 {
		t.Errorf("pause %+v", p)
	}
}

// TestAnalyzeLossToAnIsolatedNode: a message on its way to a node that was
// frozen or cut off (the others removed it as crashed) is lost in flight,
// like one to a killed node; one sent long before the isolation, or to a
// node that was never isolated, stays unaccounted.
func TestAnalyzeLossToAnIsolatedNode(t *testing.T) {
	recs := []Record{
		start(0, "n1", "e1", "e1@n1"),
		start(0, "n2", "e2", "e2@n2"),
		start(0, "n3", "e3", "e3@n3"),
		// Sent long before n1 froze: unaccounted.
		sent(1, "s1", "e1", 1),
		// Sent 2s before and during the freeze of n1 (10s-18s): lost.
		sent(8, "s1", "e1", 2),
		sent(12, "s1", "e1", 3),
		orch(10, evFreeze, "n1"), orch(18, evThaw, "n1"),
		stop(18.1, "n1", "e1", "e1@n1"),
		// Sent while n2 was cut off (20s-28s): lost.
		orch(20, evCut, "n2"), sent(22, "s2", "e2", 1), orch(28, evHeal, "n2"),
		stop(28.1, "n2", "e2", "e2@n2"),
		// n3 was never isolated: unaccounted.
		sent(22, "s3", "e3", 1),
		end(40),
	}
	sortRecords(recs)
	f := analyze(recs, []time.Time{time.Unix(0, at(10)), time.Unix(0, at(20))}, 5*time.Second)
	if f.LostToCrash != 3 || f.Unaccounted != 2 {
		t.Fatalf("lost %d, unaccounted %d; want 3 lost (frozen, frozen, cut off), 2 unaccounted", f.LostToCrash, f.Unaccounted)
	}
	for _, ev := range f.LostList {
		if !strings.Contains(ev.Detail, "frozen") && !strings.Contains(ev.Detail, "cut off") {
			t.Errorf("lost evidence %q does not name the isolation", ev.Detail)
		}
	}
}

// TestAnalyzeLossByShard: a message for an entity that had not started on
// its shard's node is judged by the other entities of its shard, which
// live on the same node: lost in flight to a cut-off node there, and
// unaccounted when the shard's node was never isolated.
func TestAnalyzeLossByShard(t *testing.T) {
	recs := []Record{
		// Shard 7 lives on n1 (e2 runs there); e1 of shard 7 never starts.
		start(0, "n1", "e2", "n1|sharding/Chaos/7/e2|1"),
		// Shard 8 lives on n2, never isolated; e3 of shard 8 never starts.
		start(0, "n2", "e4", "n2|sharding/Chaos/8/e4|2"),
		// e1 and e3 are known to belong to their shards by an earlier
		// incarnation elsewhere.
		start(0, "n3", "e1", "n3|sharding/Chaos/7/e1|3"), stop(1, "n3", "e1", "n3|sharding/Chaos/7/e1|3"),
		start(0, "n3", "e3", "n3|sharding/Chaos/8/e3|4"), stop(1, "n3", "e3", "n3|sharding/Chaos/8/e3|4"),
		orch(10, evCut, "n1"),
		sent(12, "s1", "e1", 1),
		sent(12, "s1", "e3", 1),
		orch(18, evHeal, "n1"),
		stop(18.1, "n1", "e2", "n1|sharding/Chaos/7/e2|1"),
		end(40),
	}
	sortRecords(recs)
	f := analyze(recs, []time.Time{time.Unix(0, at(10))}, 5*time.Second)
	if f.LostToCrash != 1 || f.Unaccounted != 1 {
		t.Fatalf("lost %d, unaccounted %d; want e1's message lost (its shard's node was cut off), e3's unaccounted", f.LostToCrash, f.Unaccounted)
	}
	if len(f.LostList) != 1 || f.LostList[0].Entity != "e1" {
		t.Fatalf("lost evidence %+v, want e1's", f.LostList)
	}
}

func TestShardOf(t *testing.T) {
	if s, ok := shardOf("n1|sharding/Chaos/74/e-00365|39"); !ok || s != "74" {
		t.Fatalf("shardOf = %q, %v", s, ok)
	}
	if _, ok := shardOf("e1@n2"); ok {
		t.Fatal("an id without the node|path|counter form has no shard")
	}
}

// TestAnalyzeLossBetweenHomes: a message sent while its shard had no home
// (after a hand-off) is lost to a kill -9 right after it, when the shard
// starts again only after the kill (it had been allocated to the killed
// node); with the shard running again before the kill, or no kill, it is
// unaccounted.
func TestAnalyzeLossBetweenHomes(t *testing.T) {
	handedOff := func(ent string, restart float64) []Record {
		return []Record{
			start(0, "n2", ent, "n2|sharding/Chaos/9/"+ent+"|1"), stop(5, "n2", ent, "n2|sharding/Chaos/9/"+ent+"|1"),
			start(restart, "n1", ent, "n1|sharding/Chaos/9/"+ent+"|2"),
			sent(6, "s1", ent, 1),
		}
	}
	cases := []struct {
		name        string
		restart     float64
		kill        bool
		lost, unacc int
		killAt      float64
	}{
		{"killed right after, the shard back after the kill", 10, true, 1, 0, 6.2},
		{"killed just before (the sender had not heard yet), the shard back after", 10, true, 1, 0, 5.9},
		{"the shard back before the kill", 6.1, true, 0, 1, 6.2},
		{"no kill", 10, false, 0, 1, 0},
		{"sent as the old home stopped (a hand-off under way), killed after", 10, true, 1, 0, 6.2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			recs := handedOff("e1", tc.restart)
			if strings.HasPrefix(tc.name, "sent as the old home stopped") {
				// The old home stops 0.1s after the send instead of before it.
				recs = []Record{
					start(0, "n2", "e1", "n2|sharding/Chaos/9/e1|1"), stop(6.1, "n2", "e1", "n2|sharding/Chaos/9/e1|1"),
					start(tc.restart, "n1", "e1", "n1|sharding/Chaos/9/e1|2"),
					sent(6, "s1", "e1", 1),
				}
			}
			if tc.kill {
				recs = append(recs, orch(tc.killAt, evKill, "n3"))
			}
			recs = append(recs, end(40))
			sortRecords(recs)
			f := analyze(recs, []time.Time{time.Unix(0, at(1))}, 5*time.Second)
			if f.LostToCrash != tc.lost || f.Unaccounted != tc.unacc {
				t.Fatalf("lost %d, unaccounted %d; want %d, %d", f.LostToCrash, f.Unaccounted, tc.lost, tc.unacc)
			}
		})
	}
}

// TestReanalyze: judging a run's ledgers again (-analyze) finds its lease
// in the run record, its faults in the orchestrator's records, and the
// singleton's move after a cut of the oldest node.
func TestReanalyze(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, recs ...Record) {
		l, err := openLedger(ledgerPath(dir, name), name)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			l.write(r)
		}
		_ = l.close()
	}
	write("orchestrator",
		Record{T: at(0), Ev: evRun, Reason: modeAtMostOnce, Lease: leaseCAS},
		Record{T: at(10), Ev: evFault, Fault: 1, Reason: faultPartitionOldest, Node: "n1"},
		Record{T: at(10), Ev: evCut, Node: "n1"},
		Record{T: at(18), Ev: evHeal, Node: "n1"},
		Record{T: at(18), Ev: evFaultEnd, Fault: 1, Reason: "cut off the network for 8s"},
		Record{T: at(30), Ev: evEnd},
	)
	write("n1", Record{T: at(1), Ev: evSStart, Inc: "s-a"}, Record{T: at(12.5), Ev: evSStop, Inc: "s-a"})
	write("n2", Record{T: at(16.5), Ev: evSStart, Inc: "s-b"})
	write("loadgen", sent(5, "s1", "e", 1))
	write("n3", start(1, "n3", "e", "e@n3"), recv(5.1, "n3", "e", "e@n3", "s1", 1))

	rep, err := reanalyze(io.Discard, config{ttl: 3 * time.Second}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Settings.Lease != leaseCAS || rep.Settings.ShardLease {
		t.Errorf("settings %+v, want the lease %q and no shard lease", rep.Settings, leaseCAS)
	}
	if len(rep.Faults) != 1 || rep.Faults[0].Kind != faultPartitionOldest {
		t.Fatalf("faults %+v", rep.Faults)
	}
	want := SingletonMove{From: "n1", StoppedS: 2.5, To: "n2", StartedS: 6.5}
	if got := rep.Faults[0].Singleton; got == nil || *got != want {
		t.Errorf("singleton %+v, want %+v", got, want)
	}
	if f := rep.Findings; f.Delivered != 1 || f.OverlappingSingletons != 0 || len(rep.Failures) != 0 {
		t.Errorf("findings %+v, failures %q", f.Counts, rep.Failures)
	}
}

// TestAnalyzeLossBetweenHomesToACutOffNode: a message sent after its
// shard's hand-off, while the node the shard was allocated to was cut off
// the network, is lost in flight with that node when the shard started
// again only after the sender saw the node removed (it had been allocated
// there and the sender routed the message there). It stays unaccounted
// when the shard started again before that removal (the new home was a
// live node), when it was sent after the sender saw the removal, when the
// sender never saw one, when the node was frozen instead, when the cut
// node was the oldest (the coordinator's), and when it was sent long
// before the cut.
func TestAnalyzeLossBetweenHomesToACutOffNode(t *testing.T) {
	const inc1, inc2 = "n2|sharding/Chaos/9/e1|1", "n1|sharding/Chaos/9/e1|2"
	ready := func(node, addr string) Record { return Record{T: at(0), Ev: evReady, Node: node, Addr: addr} }
	removed := func(s float64, observer, addr string) Record {
		return Record{T: at(s), Ev: evMember, Node: observer, Reason: memberRemoved, Addr: addr}
	}
	cases := []struct {
		name string
		// restart: when the shard started again on n1; sentAt: the send;
		// seenBy: the process that recorded n3's removal at 8s ("": none).
		restart, sentAt float64
		seenBy          string
		isolate         string // evCut or evFreeze of n3 from 5.5s to 13.5s
		oldest          bool   // the cut is a partition-oldest fault
		lost, unacc     int
	}{
		{name: "allocated to the cut-off node: back after its removal", restart: 11, sentAt: 6, seenBy: "loadgen", isolate: evCut, lost: 1},
		{name: "sent just before the cut", restart: 11, sentAt: 5.4, seenBy: "loadgen", isolate: evCut, lost: 1},
		{name: "back on a live node before the removal", restart: 7, sentAt: 6, seenBy: "loadgen", isolate: evCut, unacc: 1},
		{name: "sent after the sender saw the removal", restart: 11, sentAt: 9, seenBy: "loadgen", isolate: evCut, unacc: 1},
		{name: "only another node saw the removal", restart: 11, sentAt: 6, seenBy: "n1", isolate: evCut, unacc: 1},
		{name: "frozen, not cut off", restart: 11, sentAt: 6, seenBy: "loadgen", isolate: evFreeze, unacc: 1},
		{name: "the oldest node cut off, with the coordinator", restart: 11, sentAt: 6, seenBy: "loadgen", isolate: evCut, oldest: true, unacc: 1},
		{name: "sent long before the cut", restart: 11, sentAt: 0.2, seenBy: "loadgen", isolate: evCut, unacc: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stopAt := 5.0
			if tc.sentAt < stopAt {
				stopAt = 0.1 // the hand-off before the send
			}
			recs := []Record{
				ready("n1", "10.0.0.1:1"), ready("n2", "10.0.0.2:1"), ready("n3", "10.0.0.3:1"),
				start(0, "n2", "e1", inc1), stop(stopAt, "n2", "e1", inc1),
				start(tc.restart, "n1", "e1", inc2),
				sent(tc.sentAt, "s1", "e1", 1),
				orch(5.5, tc.isolate, "n3"),
				end(40),
			}
			if tc.isolate == evCut {
				recs = append(recs, orch(13.5, evHeal, "n3"))
			} else {
				recs = append(recs, orch(13.5, evThaw, "n3"))
			}
			if tc.seenBy != "" {
				recs = append(recs, removed(8, tc.seenBy, "10.0.0.3:1"))
			}
			if tc.oldest {
				recs = append(recs, Record{T: at(5.5), Ev: evFault, Fault: 1, Reason: faultPartitionOldest, Node: "n3"})
			}
			sortRecords(recs)
			f := analyze(recs, []time.Time{time.Unix(0, at(5.5))}, 5*time.Second)
			if f.LostToCrash != tc.lost || f.Unaccounted != tc.unacc {
				t.Fatalf("lost %d, unaccounted %d; want %d, %d (%+v %+v)", f.LostToCrash, f.Unaccounted, tc.lost, tc.unacc, f.LostList, f.UnaccountedList)
			}
			if tc.lost > 0 && !strings.Contains(f.LostList[0].Detail, "n3 cut off") {
				t.Errorf("lost evidence %q does not name the cut", f.LostList[0].Detail)
			}
		})
	}
}
