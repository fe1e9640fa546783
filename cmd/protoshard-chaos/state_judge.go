package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/protoshard/protoshard/durablestate"
)

// stateFinalFile, in a run's directory, holds the durable state entities'
// records as Consul held them at the end of the run, read after every
// process was stopped.
const stateFinalFile = "state-final.json"

// stateBeforeWipeFile names the file, in a run's directory, that holds the
// records as Consul held them just before it was stopped for the nth time
// (from 1), to be started again empty.
func stateBeforeWipeFile(n int) string { return fmt.Sprintf("state-before-wipe-%d.json", n) }

// finalState is the content of stateFinalFile or a stateBeforeWipeFile.
type finalState struct {
	// ReadAt: when the read began (Unix ns). A save recorded before it
	// was accepted before it, so the records hold it.
	ReadAt int64 `json:"read_at"`
	// Error: the records could not all be read.
	Error   string                 `json:"error,omitempty"`
	Records map[string]finalRecord `json:"records"`
}

// finalRecord is one entity's record: revision 0 when there is none.
type finalRecord struct {
	Revision uint64   `json:"revision"`
	Token    uint64   `json:"token"`
	Updates  []string `json:"updates,omitempty"`
}

// readFinalState reads the records of the run's n durable state entities.
func readFinalState(ctx context.Context, store durablestate.Store, n int) finalState {
	fs := finalState{ReadAt: time.Now().UnixNano(), Records: map[string]finalRecord{}}
	var errs []error
	for i := range n {
		id := stateEntityID(i)
		r, err := store.Load(ctx, id)
		var updates []string
		if err == nil {
			updates, err = decodeUpdates(r.Payload)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
			continue
		}
		fs.Records[id] = finalRecord{Revision: r.Revision, Token: r.Token, Updates: updates}
	}
	if err := errors.Join(errs...); err != nil {
		fs.Error = err.Error()
	}
	return fs
}

// writeFinalState writes fs as the file name of dir.
func writeFinalState(dir, name string, fs finalState) error {
	b, err := json.MarshalIndent(fs, "", " ")
	if err != nil {
		return fmt.Errorf("encoding the durable state records: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the durable state records: %w", err)
	}
	return nil
}

// loadFinalState reads the file name of dir; nil when there is none.
func loadFinalState(dir, name string) (*finalState, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the durable state records: %w", err)
	}
	var fs finalState
	if err := json.Unmarshal(b, &fs); err != nil {
		return nil, fmt.Errorf("decoding the durable state records %s: %w", name, err)
	}
	return &fs, nil
}

// loadBeforeWipes reads the stateBeforeWipeFiles of dir, in order, up to
// the first missing one.
func loadBeforeWipes(dir string) ([]*finalState, error) {
	var out []*finalState
	for n := 1; ; n++ {
		fs, err := loadFinalState(dir, stateBeforeWipeFile(n))
		if err != nil || fs == nil {
			return out, err
		}
		out = append(out, fs)
	}
}

// StateFindings is what the durable state entities' ledgers and their
// final records show.
type StateFindings struct {
	// Requested: update requests sent; Acknowledged: answered, so saved.
	Requested    int `json:"requested"`
	Acknowledged int `json:"acknowledged"`
	// Claims: recoveries that claimed the record with a new token; Saves:
	// updates saved; Fenced: saves refused with ErrFenced (a stale
	// incarnation stopped); Failed: recoveries and saves that failed
	// otherwise (Consul down, or wiped under a running incarnation).
	Claims int `json:"claims"`
	Saves  int `json:"saves"`
	Fenced int `json:"fenced"`
	Failed int `json:"failed"`
	// Wipes: Consul restarts, each of which emptied the store.
	Wipes int `json:"wipes"`
	// StaleAccepted: accepted writes (claims and saves) whose token is
	// lower than that of an accepted write of the entity at a lower
	// revision since the last wipe. RevisionClashes: two accepted writes
	// of one entity at one revision since the last wipe.
	StaleAccepted   int `json:"stale_accepted"`
	RevisionClashes int `json:"revision_clashes"`
	// Lost: acknowledged updates missing from the final record, saved
	// since the last wipe; or saved before a wipe, before the records were
	// read just before it, and missing from what was read. LostToWipe:
	// acknowledged updates saved before a wipe and missing from the final
	// record (the store forgot them; no failure); Unchecked: those of them
	// saved after the read before the wipe (or without one), which no
	// record can confirm.
	Lost       int `json:"lost"`
	LostToWipe int `json:"lost_to_wipe"`
	Unchecked  int `json:"unchecked"`
	// AckedUnsaved: acknowledged updates without a save record;
	// Unrequested: updates in the final records never requested.
	AckedUnsaved int `json:"acked_unsaved"`
	Unrequested  int `json:"unrequested"`
	// Entities: final records read (with revision > 0); FinalError: why
	// some could not be read ("missing": the run left no final state).
	Entities   int    `json:"entities"`
	FinalError string `json:"final_error,omitempty"`
	// Examples of lost updates and stale writes accepted.
	LostList  []StateEvidence `json:"lost_examples,omitempty"`
	StaleList []StateEvidence `json:"stale_examples,omitempty"`
	// PerFault and BeforeFaults count in the window of each fault (and
	// before the first): answers by their time, writes and refusals by
	// theirs, lost updates by their save's.
	PerFault     []StateCounts `json:"per_fault"`
	BeforeFaults StateCounts   `json:"before_faults"`
}

// StateCounts are durable state findings in one window.
type StateCounts struct {
	Acknowledged  int `json:"acknowledged"`
	Saves         int `json:"saves"`
	Fenced        int `json:"fenced"`
	Failed        int `json:"failed"`
	StaleAccepted int `json:"stale_accepted"`
	Lost          int `json:"lost"`
	LostToWipe    int `json:"lost_to_wipe"`
}

func (a StateCounts) add(b StateCounts) StateCounts {
	a.Acknowledged += b.Acknowledged
	a.Saves += b.Saves
	a.Fenced += b.Fenced
	a.Failed += b.Failed
	a.StaleAccepted += b.StaleAccepted
	a.Lost += b.Lost
	a.LostToWipe += b.LostToWipe
	return a
}

// StateEvidence is one accepted write or acknowledged update the judge
// found wrong, with what the ledgers say of it.
type StateEvidence struct {
	Entity      string `json:"entity"`
	Update      string `json:"update,omitempty"`
	Incarnation string `json:"incarnation"`
	Token       uint64 `json:"token"`
	Revision    uint64 `json:"revision"`
	At          string `json:"at"`
	Fault       int    `json:"fault"`
	Detail      string `json:"detail"`
}

// failures are the broken promises of durable state: no stale write
// accepted, no acknowledged update lost (except to a Consul wipe).
func (f *StateFindings) failures() []string {
	var out []string
	add := func(n int, what string) {
		if n != 0 {
			out = append(out, fmt.Sprintf("durable state: %d %s", n, what))
		}
	}
	add(f.StaleAccepted, "stale writes accepted")
	add(f.RevisionClashes, "writes accepted at one revision")
	add(f.Lost, "acknowledged updates lost")
	add(f.AckedUnsaved, "acknowledged updates without a save")
	add(f.Unrequested, "stored updates never requested")
	if f.FinalError != "" {
		out = append(out, "durable state: the final records could not be read: "+f.FinalError)
	}
	if f.Acknowledged == 0 {
		out = append(out, "durable state: no update was acknowledged")
	}
	return out
}

// analyzeState judges the durable state entities from the ledgers, their
// final records (nil: none were read) and those read before each wipe
// (beforeWipes[i] before the (i+1)th Consul stop; nil or missing: none).
//
// Consul restarts empty, so the store forgets every record and its
// revisions and tokens count again from the start: a write belongs to the
// Consul epoch of its record's time (the number of Consul starts before
// it; a write recorded while Consul was down was accepted before it went
// down), and revisions and tokens are compared within an epoch only.
// The writes of an entity in one epoch, ordered by revision (the store's
// order), must have tokens that never go down. An acknowledged update
// saved in the last epoch must be in the final record; one saved in an
// earlier epoch must be in the records read before that epoch's wipe if it
// was recorded before the read began, and if it is missing from the final
// record it was lost to the wipe.
func analyzeState(recs []Record, final *finalState, beforeWipes []*finalState, faultStarts []time.Time) StateFindings {
	f := StateFindings{PerFault: make([]StateCounts, len(faultStarts))}
	starts := make([]int64, len(faultStarts))
	for i, s := range faultStarts {
		starts[i] = s.UnixNano()
	}
	faultAt := func(t int64) int {
		return sort.Search(len(starts), func(i int) bool { return starts[i] > t })
	}
	window := func(t int64) *StateCounts {
		if n := faultAt(t); n > 0 {
			return &f.PerFault[n-1]
		}
		return &f.BeforeFaults
	}
	var consulStarts []int64
	for _, r := range recs {
		if r.Ev == evConsulStart {
			consulStarts = append(consulStarts, r.T)
		}
	}
	f.Wipes = len(consulStarts)
	epochOf := func(t int64) int {
		return sort.Search(len(consulStarts), func(i int) bool { return consulStarts[i] >= t })
	}
	type key struct {
		ent string
		ep  int
	}
	writes := map[key][]Record{}
	saved := map[string]Record{} // the save of each update, by entity and update id
	requested := map[string]bool{}
	var acks []Record
	for _, r := range recs {
		switch r.Ev {
		case evUpdate:
			f.Requested++
			requested[r.Ent+" "+updateID(r.Snd, r.Seq)] = true
		case evUpdated:
			f.Acknowledged++
			window(r.T).Acknowledged++
			acks = append(acks, r)
		case evClaim, evSave:
			k := key{r.Ent, epochOf(r.T)}
			writes[k] = append(writes[k], r)
			if r.Ev == evClaim {
				f.Claims++
				continue
			}
			f.Saves++
			window(r.T).Saves++
			if id := r.Ent + " " + updateID(r.Snd, r.Seq); saved[id].T == 0 {
				saved[id] = r
			}
		case evFencedSave:
			f.Fenced++
			window(r.T).Fenced++
		case evSaveFailed:
			f.Failed++
			window(r.T).Failed++
		}
	}
	var staleEx, lostEx sampler
	evidence := func(r Record, detail string) StateEvidence {
		ev := StateEvidence{Entity: r.Ent, Incarnation: r.Inc, Token: r.Token, Revision: r.Rev, At: stamp(r.T), Fault: faultAt(r.T), Detail: detail}
		if r.Snd != "" {
			ev.Update = updateID(r.Snd, r.Seq)
		}
		return ev
	}
	keys := make([]key, 0, len(writes))
	for k := range writes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].ent != keys[j].ent {
			return keys[i].ent < keys[j].ent
		}
		return keys[i].ep < keys[j].ep
	})
	for _, k := range keys {
		ws := writes[k]
		sort.SliceStable(ws, func(i, j int) bool { return ws[i].Rev < ws[j].Rev })
		var top Record
		for i, w := range ws {
			if i > 0 && w.Rev == ws[i-1].Rev {
				f.RevisionClashes++
			}
			if w.Token < top.Token {
				f.StaleAccepted++
				window(w.T).StaleAccepted++
				if staleEx.take(faultAt(w.T)) {
					f.StaleList = append(f.StaleList, evidence(w, fmt.Sprintf("accepted after %s wrote token %d at revision %d", top.Inc, top.Token, top.Rev)))
				}
				continue
			}
			top = w
		}
	}
	if final == nil {
		f.FinalError = "missing"
		final = &finalState{}
	} else {
		f.FinalError = final.Error
	}
	// heldBefore reports whether the records read before the wipe that
	// ended epoch ep can tell about save s, and whether they hold it.
	heldBefore := func(s Record, ep int, id string) (known, held bool) {
		if ep >= len(beforeWipes) || beforeWipes[ep] == nil || s.T >= beforeWipes[ep].ReadAt {
			return false, false
		}
		fr, ok := beforeWipes[ep].Records[s.Ent]
		return ok, ok && slices.Contains(fr.Updates, updateID(s.Snd, s.Seq))
	}
	stored := map[string]bool{}
	for ent, fr := range final.Records {
		if fr.Revision > 0 {
			f.Entities++
		}
		for _, u := range fr.Updates {
			stored[ent+" "+u] = true
			if !requested[ent+" "+u] {
				f.Unrequested++
			}
		}
	}
	last := len(consulStarts)
	for _, a := range acks {
		id := a.Ent + " " + updateID(a.Snd, a.Seq)
		s, ok := saved[id]
		if !ok {
			f.AckedUnsaved++
			continue
		}
		ep := epochOf(s.T)
		known, held := heldBefore(s, ep, id)
		switch {
		case ep < last && known && !held:
			f.Lost++
			window(s.T).Lost++
			if lostEx.take(faultAt(s.T)) {
				fr := beforeWipes[ep].Records[s.Ent]
				f.LostList = append(f.LostList, evidence(s, fmt.Sprintf("acknowledged at %s; the record read before wipe %d has token %d, revision %d, %d updates", stamp(a.T), ep+1, fr.Token, fr.Revision, len(fr.Updates))))
			}
		case stored[id]:
		case ep < last:
			f.LostToWipe++
			window(s.T).LostToWipe++
			if !known {
				f.Unchecked++
			}
		default:
			f.Lost++
			window(s.T).Lost++
			if lostEx.take(faultAt(s.T)) {
				fr := final.Records[a.Ent]
				f.LostList = append(f.LostList, evidence(s, fmt.Sprintf("acknowledged at %s; the final record has token %d, revision %d, %d updates", stamp(a.T), fr.Token, fr.Revision, len(fr.Updates))))
			}
		}
	}
	return f
}
