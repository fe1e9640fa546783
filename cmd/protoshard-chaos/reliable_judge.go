package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/protoshard/protoshard/internal/shard"
)

// entityStoreDir is where a reliable run's entities keep their records.
func entityStoreDir(runDir string) string { return filepath.Join(runDir, "entities") }

// ReliableCounts are a reliable run's findings in one window (or in the
// whole run), each message counted in the window of its send.
type ReliableCounts struct {
	// Sent: messages the producers accepted.
	Sent int `json:"sent"`
	// Lost: accepted, never applied by the entity (its record shows).
	Lost int `json:"lost"`
	// Twice: applied again after they were applied once.
	Twice int `json:"processed_twice"`
	// Gaps: an entity applied a message while an earlier one of its
	// sender was not applied yet (out of order).
	Gaps int `json:"gaps"`
	// DuplicatesDropped: copies of applied messages that reached their
	// entity (resent, or passed on by a hand-off) and that its consumer
	// discarded.
	DuplicatesDropped int `json:"duplicates_dropped"`
	// Fenced: entity incarnations stopped, unconfirmed, because their
	// record's write failed (counted in the window of the failure).
	Fenced int `json:"fenced"`
}

func (a ReliableCounts) add(b ReliableCounts) ReliableCounts {
	a.Sent += b.Sent
	a.Lost += b.Lost
	a.Twice += b.Twice
	a.Gaps += b.Gaps
	a.DuplicatesDropped += b.DuplicatesDropped
	a.Fenced += b.Fenced
	return a
}

// ReliableFindings is what a reliable run's entity records and ledgers
// show, after the drain.
type ReliableFindings struct {
	ReliableCounts
	// Applied: messages applied, each once, by all entities.
	Applied int64 `json:"applied"`
	// Resent: messages the producers sent again (their count at the
	// drain's end).
	Resent int64 `json:"resent"`
	// UnconfirmedAtEnd: messages the producers still held, unconfirmed or
	// buffered, at the drain's end; -1 when unknown (no drain recorded, or
	// a producer did not answer).
	UnconfirmedAtEnd int64 `json:"unconfirmed_at_end"`
	// Unsure: Sends whose outcome the load generator could not know.
	Unsure int `json:"unsure_sends"`
	// AppliedNotSent: seqs an entity applied beyond the last one accepted
	// from that sender.
	AppliedNotSent int `json:"applied_not_sent"`
	// NotYetAppliedDropped: messages an entity's consumer discarded
	// because they came out of order (resent later).
	NotYetAppliedDropped int `json:"not_yet_applied_dropped"`
	// Records: entity records read; BadRecords: those unreadable.
	Records    int      `json:"records"`
	BadRecords []string `json:"bad_records,omitempty"`
	// Examples of lost messages and messages processed twice.
	LostList  []MessageEvidence `json:"lost_examples,omitempty"`
	TwiceList []MessageEvidence `json:"twice_examples,omitempty"`
	// PerFault and BeforeFaults as in Findings.
	PerFault     []ReliableCounts `json:"per_fault"`
	BeforeFaults ReliableCounts   `json:"before_faults"`
}

// failures are the broken promises of reliable delivery with stored
// progress: every accepted message applied exactly once and in order,
// none left with the producers.
func (f *ReliableFindings) failures() []string {
	var out []string
	add := func(n int, what string) {
		if n != 0 {
			out = append(out, fmt.Sprintf("reliable: %d %s", n, what))
		}
	}
	add(f.Lost, "messages lost")
	add(f.Twice, "messages processed twice")
	add(f.Gaps, "gaps (applied out of order)")
	add(f.Unsure, "sends with an unknown outcome")
	add(f.AppliedNotSent, "messages applied but never accepted")
	add(len(f.BadRecords), "unreadable entity records")
	switch {
	case f.UnconfirmedAtEnd < 0:
		out = append(out, "reliable: the producers' unconfirmed messages at the end are unknown (no drain)")
	case f.UnconfirmedAtEnd > 0:
		out = append(out, fmt.Sprintf("reliable: %d messages still unconfirmed at the end", f.UnconfirmedAtEnd))
	}
	return out
}

// readEntityRecords reads every entity record of a reliable run's store
// directory; unreadable ones are listed, not fatal.
func readEntityRecords(dir string) (map[string]entityRecord, []string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*"+stateSuffix))
	if err != nil {
		return nil, nil, fmt.Errorf("listing entity records: %w", err)
	}
	recs := map[string]entityRecord{}
	var bad []string
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), stateSuffix)
		id, err := shard.EntityID(name)
		var data []byte
		if err == nil {
			data, _, err = readStateFile(p)
		}
		var rec entityRecord
		if err == nil {
			rec, err = decodeEntityRecord(data)
		}
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", filepath.Base(p), err))
			continue
		}
		recs[id] = rec
	}
	return recs, bad, nil
}

// analyzeReliable judges a reliable run: the entities' records (what each
// applied, stored with its progress) against the messages the producers
// accepted (the load generator's sent records), after the drain.
//
//   - lost = Σ over (sender, entity) of (the highest seq accepted − the
//     seqs applied); which ones: those gaps skipped and those above the
//     highest applied;
//   - processed twice = Σ twice; gaps = Σ gaps (from the records);
//   - duplicates dropped: the consumers' discards of copies of applied
//     messages (ledger drops from srcConsumer);
//   - resent and unconfirmed at the end: the drain's record.
//
// Every message is counted in the window of its send.
func analyzeReliable(recs []Record, records map[string]entityRecord, faultStarts []time.Time) ReliableFindings {
	f := ReliableFindings{UnconfirmedAtEnd: -1, PerFault: make([]ReliableCounts, len(faultStarts)), Records: len(records)}
	starts := make([]int64, len(faultStarts))
	for i, s := range faultStarts {
		starts[i] = s.UnixNano()
	}
	faultAt := func(t int64) int {
		return sort.Search(len(starts), func(i int) bool { return starts[i] > t })
	}
	window := func(t int64) *ReliableCounts {
		if n := faultAt(t); n > 0 {
			return &f.PerFault[n-1]
		}
		return &f.BeforeFaults
	}
	type pair struct{ snd, ent string }
	maxSeq := map[pair]int64{}
	sentAt := map[msgKey]int64{}
	var pairs []pair
	for _, r := range recs {
		switch r.Ev {
		case evSent:
			k := msgKey{r.Snd, r.Ent, r.Seq}
			if _, dup := sentAt[k]; dup {
				continue
			}
			sentAt[k] = r.T
			p := pair{r.Snd, r.Ent}
			if _, ok := maxSeq[p]; !ok {
				pairs = append(pairs, p)
			}
			maxSeq[p] = max(maxSeq[p], r.Seq)
			f.Sent++
			window(r.T).Sent++
		case evUnsure:
			f.Unsure++
		case evDrained:
			f.UnconfirmedAtEnd, f.Resent = r.Unconfirmed, r.Resent
		case evFenced:
			f.Fenced++
			window(r.T).Fenced++
		}
	}
	// sendWindow is the window of the send of (p, seq), or of t when the
	// ledger has no such send.
	sendWindow := func(p pair, seq, t int64) (*ReliableCounts, int64) {
		if at, ok := sentAt[msgKey{p.snd, p.ent, seq}]; ok {
			t = at
		}
		return window(t), t
	}
	for _, r := range recs {
		if r.Ev != evDrop || r.Src != srcConsumer {
			continue
		}
		if r.Reason != reasonDuplicate {
			f.NotYetAppliedDropped++
			continue
		}
		f.DuplicatesDropped++
		w, _ := sendWindow(pair{r.Snd, r.Ent}, r.Seq, r.T)
		w.DuplicatesDropped++
	}
	// Pairs some entity applied although nothing was accepted for them.
	for ent, rec := range records {
		for snd := range rec.Senders {
			if _, ok := maxSeq[pair{snd, ent}]; !ok {
				pairs = append(pairs, pair{snd, ent})
			}
		}
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].snd != pairs[j].snd {
			return pairs[i].snd < pairs[j].snd
		}
		return pairs[i].ent < pairs[j].ent
	})
	var lostEx, twiceEx sampler
	evidence := func(p pair, seq, t int64, detail string) MessageEvidence {
		return MessageEvidence{Sender: p.snd, Entity: p.ent, Seq: seq, Sent: stamp(t), Fault: faultAt(t), Detail: detail}
	}
	for _, p := range pairs {
		s := senderRecord{}
		if rs := records[p.ent].Senders[p.snd]; rs != nil {
			s = *rs
		}
		top := maxSeq[p]
		f.Applied += s.Applied
		f.Twice += int(s.Twice)
		f.Gaps += int(s.Gaps)
		if s.Last > top {
			f.AppliedNotSent += int(s.Last - top)
		}
		// The lost seqs: those the gaps skipped, and those above Last.
		lost := int(top - min(s.Applied, top))
		f.Lost += lost
		var missing []int64
		for _, rg := range s.Skipped {
			for seq := rg.From; seq <= rg.To && seq <= top; seq++ {
				missing = append(missing, seq)
			}
		}
		for seq := s.Last + 1; seq <= top; seq++ {
			missing = append(missing, seq)
		}
		for _, seq := range missing[:min(len(missing), lost)] {
			w, t := sendWindow(p, seq, 0)
			w.Lost++
			if lostEx.take(faultAt(t)) {
				f.LostList = append(f.LostList, evidence(p, seq, t, fmt.Sprintf("the entity applied %d of %d, up to #%d", s.Applied, top, s.Last)))
			}
		}
		for _, seq := range s.TwiceSeqs {
			w, t := sendWindow(p, seq, 0)
			w.Twice++
			if twiceEx.take(faultAt(t)) {
				f.TwiceList = append(f.TwiceList, evidence(p, seq, t, fmt.Sprintf("applied again after #%d", s.Last)))
			}
		}
		for _, rg := range s.Skipped {
			w, _ := sendWindow(p, rg.From, 0)
			w.Gaps++
		}
	}
	return f
}

// judgeReliable reads the entity records of a reliable run's directory
// and judges them with the ledgers.
func judgeReliable(dir string, recs []Record, faultStarts []time.Time) (ReliableFindings, error) {
	storeDir := entityStoreDir(dir)
	if _, err := os.Stat(storeDir); errors.Is(err, os.ErrNotExist) {
		// No entity ever stored a message: every accepted one is lost.
		return analyzeReliable(recs, nil, faultStarts), nil
	}
	records, bad, err := readEntityRecords(storeDir)
	if err != nil {
		return ReliableFindings{}, err
	}
	f := analyzeReliable(recs, records, faultStarts)
	f.BadRecords = bad
	return f, nil
}

// reliableRun reports whether the ledgers are a reliable run's, by the
// orchestrator's record of the run's mode.
func reliableRun(recs []Record) bool {
	for _, r := range recs {
		if r.Ev == evRun {
			return r.Reason == modeReliable
		}
	}
	return false
}
