package main

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/protoshard/protoshard/messages"
)

func TestEntityRecordApply(t *testing.T) {
	tests := []struct {
		name    string
		seqs    []int64 // delivered in this order, from sender s1
		want    senderRecord
		outcome applyOutcome // of the last delivery
	}{
		{name: "in order", seqs: []int64{1, 2, 3}, want: senderRecord{Last: 3, Applied: 3}, outcome: appliedInOrder},
		{name: "again", seqs: []int64{1, 2, 2}, want: senderRecord{Last: 2, Applied: 2, Twice: 1, TwiceSeqs: []int64{2}}, outcome: appliedTwice},
		{name: "an older one", seqs: []int64{1, 2, 3, 1}, want: senderRecord{Last: 3, Applied: 3, Twice: 1, TwiceSeqs: []int64{1}}, outcome: appliedTwice},
		{name: "a gap", seqs: []int64{1, 4}, want: senderRecord{Last: 4, Applied: 2, Gaps: 1, Skipped: []seqRange{{2, 3}}}, outcome: appliedWithGap},
		{name: "a gap then the skipped one", seqs: []int64{2, 1}, want: senderRecord{Last: 2, Applied: 1, Gaps: 1, Twice: 1, Skipped: []seqRange{{1, 1}}, TwiceSeqs: []int64{1}}, outcome: appliedTwice},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r entityRecord
			var outcome applyOutcome
			for _, seq := range tt.seqs {
				before := r
				beforeJSON, _ := before.encode()
				r, outcome = r.apply("s1", seq)
				// The record applied to is not changed: a failed write
				// keeps it.
				if afterJSON, _ := before.encode(); !bytes.Equal(beforeJSON, afterJSON) {
					t.Fatalf("apply(%d) changed the record it was called on: %s -> %s", seq, beforeJSON, afterJSON)
				}
			}
			if got := *r.Senders["s1"]; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("record %+v, want %+v", got, tt.want)
			}
			if outcome != tt.outcome {
				t.Errorf("last outcome %q, want %q", outcome, tt.outcome)
			}
		})
	}
	// Other senders are apart, and the lists stay bounded.
	var r entityRecord
	r, _ = r.apply("s2", 1)
	for range maxListed + 5 {
		r, _ = r.apply("s1", 0)
	}
	if s := r.Senders["s1"]; s.Twice != maxListed+5 || len(s.TwiceSeqs) != maxListed {
		t.Errorf("s1: twice %d, %d listed", s.Twice, len(s.TwiceSeqs))
	}
	if s := r.Senders["s2"]; s.Last != 1 || s.Applied != 1 || s.Twice != 0 {
		t.Errorf("s2 changed by s1's deliveries: %+v", s)
	}
}

func TestEntityRecordRoundTrip(t *testing.T) {
	r, _ := entityRecord{}.apply("s1", 1)
	r, _ = r.apply("s1", 3)
	r, err := r.withProgress(&messages.ConsumerProgress{Producers: []*messages.ProducerProgress{
		{ProducerId: "s1", ProducerIncarnation: 7, ConfirmedSeqNr: 2, ConfirmedAtUnixMs: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeEntityRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, r) {
		t.Fatalf("round trip %+v, want %+v", back, r)
	}
	p, err := back.progress()
	if err != nil || len(p.GetProducers()) != 1 || p.GetProducers()[0].GetConfirmedSeqNr() != 2 {
		t.Fatalf("progress %v, %v", p, err)
	}
	if p, err := (entityRecord{}).progress(); p != nil || err != nil {
		t.Fatalf("no progress stored gave %v, %v", p, err)
	}
	if _, err := decodeEntityRecord([]byte("{")); err == nil {
		t.Fatal("a bad record decoded")
	}
}

// records builds entity records by applying deliveries: entity -> sender
// -> seqs in the order delivered.
func records(deliveries map[string]map[string][]int64) map[string]entityRecord {
	out := map[string]entityRecord{}
	for ent, bySender := range deliveries {
		var r entityRecord
		for snd, seqs := range bySender {
			for _, seq := range seqs {
				r, _ = r.apply(snd, seq)
			}
		}
		out[ent] = r
	}
	return out
}

func drained(s float64, unconfirmed, resent int64) Record {
	return Record{T: at(s), Ev: evDrained, Node: "loadgen", Unconfirmed: unconfirmed, Resent: resent}
}

func consumerDrop(s float64, ent, snd string, seq int64, reason string) Record {
	return Record{T: at(s), Ev: evDrop, Src: srcConsumer, Node: "n1", Ent: ent, Snd: snd, Seq: seq, Reason: reason}
}

func TestAnalyzeReliable(t *testing.T) {
	// Two faults, at 10s and 20s: sends at 1s are before them, at 11s in
	// the first's window, at 21s in the second's.
	faults := []time.Time{base.Add(10 * time.Second), base.Add(20 * time.Second)}
	sends := func(snd, ent string, times ...float64) []Record {
		var out []Record
		for i, s := range times {
			out = append(out, sent(s, snd, ent, int64(i+1)))
		}
		return out
	}
	tests := []struct {
		name       string
		recs       []Record
		deliveries map[string]map[string][]int64
		want       ReliableCounts
		perFault   []ReliableCounts // nil: not checked
		applied    int64
		failures   int
		check      func(t *testing.T, f ReliableFindings)
	}{
		{
			name:       "every message applied once",
			recs:       append(sends("s1", "e1", 1, 11, 21), drained(30, 0, 4)),
			deliveries: map[string]map[string][]int64{"e1": {"s1": {1, 2, 3}}},
			want:       ReliableCounts{Sent: 3},
			perFault:   []ReliableCounts{{Sent: 1}, {Sent: 1}},
			applied:    3,
			check: func(t *testing.T, f ReliableFindings) {
				if f.Resent != 4 || f.UnconfirmedAtEnd != 0 || f.BeforeFaults.Sent != 1 {
					t.Errorf("resent %d, unconfirmed %d, before faults %+v", f.Resent, f.UnconfirmedAtEnd, f.BeforeFaults)
				}
			},
		},
		{
			name:       "the last two never applied",
			recs:       append(sends("s1", "e1", 1, 11, 21, 22), drained(30, 0, 0)),
			deliveries: map[string]map[string][]int64{"e1": {"s1": {1, 2}}},
			want:       ReliableCounts{Sent: 4, Lost: 2},
			perFault:   []ReliableCounts{{Sent: 1}, {Sent: 2, Lost: 2}},
			applied:    2,
			failures:   1,
			check: func(t *testing.T, f ReliableFindings) {
				if len(f.LostList) != 2 || f.LostList[0].Seq != 3 || f.LostList[1].Seq != 4 || f.LostList[0].Fault != 2 {
					t.Errorf("lost examples %+v", f.LostList)
				}
			},
		},
		{
			name:       "an entity without a record",
			recs:       append(sends("s1", "e2", 11, 12), drained(30, 0, 0)),
			deliveries: map[string]map[string][]int64{},
			want:       ReliableCounts{Sent: 2, Lost: 2},
			perFault:   []ReliableCounts{{Sent: 2, Lost: 2}, {}},
			failures:   1,
		},
		{
			name:       "processed twice",
			recs:       append(sends("s1", "e1", 1, 11), drained(30, 0, 0)),
			deliveries: map[string]map[string][]int64{"e1": {"s1": {1, 2, 2}}},
			want:       ReliableCounts{Sent: 2, Twice: 1},
			perFault:   []ReliableCounts{{Sent: 1, Twice: 1}, {}},
			applied:    2,
			failures:   1,
			check: func(t *testing.T, f ReliableFindings) {
				if len(f.TwiceList) != 1 || f.TwiceList[0].Seq != 2 {
					t.Errorf("twice examples %+v", f.TwiceList)
				}
			},
		},
		{
			name:       "a gap: one skipped and lost",
			recs:       append(sends("s1", "e1", 1, 11, 21), drained(30, 0, 0)),
			deliveries: map[string]map[string][]int64{"e1": {"s1": {1, 3}}},
			want:       ReliableCounts{Sent: 3, Lost: 1, Gaps: 1},
			perFault:   []ReliableCounts{{Sent: 1, Lost: 1, Gaps: 1}, {Sent: 1}},
			applied:    2,
			failures:   2,
		},
		{
			name: "duplicates the consumer dropped, counted by their send",
			recs: append(sends("s1", "e1", 1, 11),
				consumerDrop(25, "e1", "s1", 2, reasonDuplicate),
				consumerDrop(26, "e1", "s1", 2, reasonNotYetApplied),
				drained(30, 0, 2)),
			deliveries: map[string]map[string][]int64{"e1": {"s1": {1, 2}}},
			want:       ReliableCounts{Sent: 2, DuplicatesDropped: 1},
			perFault:   []ReliableCounts{{Sent: 1, DuplicatesDropped: 1}, {}},
			applied:    2,
			check: func(t *testing.T, f ReliableFindings) {
				if f.NotYetAppliedDropped != 1 {
					t.Errorf("out-of-order copies %d, want 1", f.NotYetAppliedDropped)
				}
			},
		},
		{
			name: "a fenced zombie is no failure",
			recs: append(sends("s1", "e1", 1),
				Record{T: at(15), Ev: evFenced, Node: "n2", Ent: "e1", Inc: "n2|x|1", Snd: "s1", Seq: 1, Reason: "conflict"},
				drained(30, 0, 0)),
			deliveries: map[string]map[string][]int64{"e1": {"s1": {1}}},
			want:       ReliableCounts{Sent: 1, Fenced: 1},
			perFault:   []ReliableCounts{{Fenced: 1}, {}},
			applied:    1,
		},
		{
			name:       "applied beyond what was accepted",
			recs:       append(sends("s1", "e1", 1), drained(30, 0, 0)),
			deliveries: map[string]map[string][]int64{"e1": {"s1": {1, 2}, "s9": {1}}},
			want:       ReliableCounts{Sent: 1},
			applied:    3,
			failures:   1,
			check: func(t *testing.T, f ReliableFindings) {
				if f.AppliedNotSent != 2 {
					t.Errorf("applied not sent %d, want 2", f.AppliedNotSent)
				}
			},
		},
		{
			name:       "messages left unconfirmed",
			recs:       append(sends("s1", "e1", 1), drained(30, 3, 0)),
			deliveries: map[string]map[string][]int64{"e1": {"s1": {1}}},
			want:       ReliableCounts{Sent: 1},
			applied:    1,
			failures:   1,
		},
		{
			name:       "no drain",
			recs:       sends("s1", "e1", 1),
			deliveries: map[string]map[string][]int64{"e1": {"s1": {1}}},
			want:       ReliableCounts{Sent: 1},
			applied:    1,
			failures:   1,
		},
		{
			name: "a send with an unknown outcome",
			recs: append(sends("s1", "e1", 1),
				Record{T: at(2), Ev: evUnsure, Node: "loadgen", Snd: "s1", Ent: "e1", Seq: 2, Reason: "deadline exceeded"},
				drained(30, 0, 0)),
			deliveries: map[string]map[string][]int64{"e1": {"s1": {1}}},
			want:       ReliableCounts{Sent: 1},
			applied:    1,
			failures:   1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sortRecords(tt.recs)
			f := analyzeReliable(tt.recs, records(tt.deliveries), faults)
			if f.ReliableCounts != tt.want {
				t.Errorf("counts %+v, want %+v", f.ReliableCounts, tt.want)
			}
			if tt.perFault != nil && !reflect.DeepEqual(f.PerFault, tt.perFault) {
				t.Errorf("per fault %+v, want %+v", f.PerFault, tt.perFault)
			}
			if f.Applied != tt.applied {
				t.Errorf("applied %d, want %d", f.Applied, tt.applied)
			}
			if got := f.failures(); len(got) != tt.failures {
				t.Errorf("failures %q, want %d", got, tt.failures)
			}
			if tt.check != nil {
				tt.check(t, f)
			}
		})
	}
}

// TestJudgeReliableFromFiles: the judge reads the records the entities
// wrote through the store, and an unreadable one fails the run.
func TestJudgeReliableFromFiles(t *testing.T) {
	dir := t.TempDir()
	store, err := openCASStore(entityStoreDir(dir), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	write := func(id string, r entityRecord) {
		b, err := r.encode()
		if err != nil {
			t.Fatal(err)
		}
		_, v, _ := store.Load(id)
		if _, err := store.CompareAndSet(id, v, b); err != nil {
			t.Fatal(err)
		}
	}
	recs := []Record{sent(1, "s1", "e/1", 1), sent(2, "s1", "e/1", 2), sent(3, "s2", "e2", 1), drained(9, 0, 1)}
	r, _ := entityRecord{}.apply("s1", 1)
	write("e/1", r)
	r, _ = r.apply("s1", 2) // the later write replaces the earlier
	write("e/1", r)
	r, _ = entityRecord{}.apply("s2", 1)
	write("e2", r)
	f, err := judgeReliable(dir, recs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.Records != 2 || f.Sent != 3 || f.Applied != 3 || f.Lost != 0 || len(f.failures()) != 0 {
		t.Fatalf("findings %+v, failures %q", f, f.failures())
	}
	if err := os.WriteFile(store.path("e3", stateSuffix), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err = judgeReliable(dir, recs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.BadRecords) != 1 || len(f.failures()) != 1 {
		t.Fatalf("bad records %q, failures %q", f.BadRecords, f.failures())
	}
	// No store at all: nothing applied, everything accepted is lost.
	f, err = judgeReliable(t.TempDir(), recs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.Lost != 3 {
		t.Fatalf("lost %d without records, want 3", f.Lost)
	}
}

// TestJudgeReliableReport: in a reliable run the records decide, the
// ledger's unaccounted messages and order violations do not, and the text
// report has the reliable table.
func TestJudgeReliableReport(t *testing.T) {
	tests := []struct {
		name  string
		f     Counts
		rel   ReliableFindings
		fails int
	}{
		{name: "held", f: Counts{Sent: 5}, rel: ReliableFindings{ReliableCounts: ReliableCounts{Sent: 5, DuplicatesDropped: 3}}},
		{name: "receipts missing, records complete", f: Counts{Sent: 5, Unaccounted: 2, OrderViolations: 1}, rel: ReliableFindings{ReliableCounts: ReliableCounts{Sent: 5}}},
		{name: "lost and twice", f: Counts{Sent: 5}, rel: ReliableFindings{ReliableCounts: ReliableCounts{Sent: 5, Lost: 1, Twice: 2}}, fails: 2},
		{name: "overlap still fails", f: Counts{Sent: 5, OverlappingActivations: 1}, rel: ReliableFindings{ReliableCounts: ReliableCounts{Sent: 5}}, fails: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Report{Settings: Settings{Reliable: true}, Faults: []*Fault{{N: 1, Kind: faultKill, Reliable: &tt.rel.ReliableCounts}}}
			r.Findings.Counts = tt.f
			rel := tt.rel
			r.Reliable = &rel
			r.summarize()
			r.judge(false)
			if len(r.Failures) != tt.fails {
				t.Errorf("failures %q, want %d", r.Failures, tt.fails)
			}
			var out bytes.Buffer
			r.writeText(&out)
			text := out.String()
			if pass := strings.Contains(text, "\nPASS"); pass != (tt.fails == 0) {
				t.Errorf("text report says pass=%v:\n%s", pass, text)
			}
			if !strings.Contains(text, "reliable delivery (from the entities' records") || !strings.Contains(text, "\n  kill ") {
				t.Errorf("no reliable table per kind:\n%s", text)
			}
		})
	}
}
