package main

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/durablestate"
	"github.com/protoshard/protoshard/internal/testpb"
)

// stateLedger builds durable state records at t = 1, 2, ... seconds.
type stateLedger struct{ recs []Record }

func (l *stateLedger) add(r Record) {
	r.T = int64(len(l.recs)+1) * int64(time.Second)
	l.recs = append(l.recs, r)
}

func (l *stateLedger) claim(inc string, token, rev uint64) {
	l.add(Record{Ev: evClaim, Ent: "st-000", Inc: inc, Token: token, Rev: rev})
}

// saved adds the request, the save and the answer of update seq.
func (l *stateLedger) saved(inc string, token, rev uint64, seq int64) {
	l.add(Record{Ev: evUpdate, Ent: "st-000", Snd: updateSender, Seq: seq})
	l.add(Record{Ev: evSave, Ent: "st-000", Inc: inc, Token: token, Rev: rev, Snd: updateSender, Seq: seq})
	l.add(Record{Ev: evUpdated, Ent: "st-000", Snd: updateSender, Seq: seq})
}

func final(token, rev uint64, seqs ...int64) *finalState {
	var ids []string
	for _, s := range seqs {
		ids = append(ids, updateID(updateSender, s))
	}
	return &finalState{Records: map[string]finalRecord{"st-000": {Revision: rev, Token: token, Updates: ids}}}
}

func TestAnalyzeState(t *testing.T) {
	tests := []struct {
		name   string
		ledger func(l *stateLedger)
		final  *finalState
		// beforeWipes: the records read before each Consul stop.
		beforeWipes []*finalState
		want        StateFindings // the counts; examples are checked by number
	}{
		{
			name: "a kill: the next incarnation recovers and saves on",
			ledger: func(l *stateLedger) {
				l.claim("n1|a|1", 1, 10)
				l.saved("n1|a|1", 1, 11, 1)
				l.add(Record{Ev: evKill, Node: "n1"})
				l.claim("n2|a|1", 2, 14)
				l.saved("n2|a|1", 2, 15, 2)
			},
			final: final(2, 15, 1, 2),
			want:  StateFindings{Requested: 2, Acknowledged: 2, Claims: 2, Saves: 2, Entities: 1},
		},
		{
			name: "a stale incarnation refused",
			ledger: func(l *stateLedger) {
				l.claim("n1|a|1", 1, 10)
				l.claim("n2|a|1", 2, 12)
				l.saved("n2|a|1", 2, 13, 1)
				l.add(Record{Ev: evUpdate, Ent: "st-000", Snd: updateSender, Seq: 2})
				l.add(Record{Ev: evFencedSave, Ent: "st-000", Inc: "n1|a|1", Token: 1, Snd: updateSender, Seq: 2})
			},
			final: final(2, 13, 1),
			want:  StateFindings{Requested: 2, Acknowledged: 1, Claims: 2, Saves: 1, Fenced: 1, Entities: 1},
		},
		{
			name: "a stale write accepted and the update it overwrote lost",
			ledger: func(l *stateLedger) {
				l.claim("n1|a|1", 1, 10)
				l.claim("n2|a|1", 2, 12)
				l.saved("n2|a|1", 2, 13, 1)
				// Recorded later than it was accepted: revision order counts.
				l.saved("n1|a|1", 1, 14, 2)
			},
			final: final(1, 14, 2),
			want:  StateFindings{Requested: 2, Acknowledged: 2, Claims: 2, Saves: 2, StaleAccepted: 1, Lost: 1, Entities: 1},
		},
		{
			name: "two writes at one revision",
			ledger: func(l *stateLedger) {
				l.claim("n1|a|1", 1, 10)
				l.saved("n1|a|1", 1, 11, 1)
				l.saved("n1|a|1", 1, 11, 2)
			},
			final: final(1, 11, 1, 2),
			want:  StateFindings{Requested: 2, Acknowledged: 2, Claims: 1, Saves: 2, RevisionClashes: 1, Entities: 1},
		},
		{
			name: "a Consul wipe: tokens and revisions count again, and what was saved before is lost to it",
			ledger: func(l *stateLedger) {
				l.claim("n1|a|1", 3, 10)
				l.saved("n1|a|1", 3, 11, 1)
				l.add(Record{Ev: evConsulStop})
				l.add(Record{Ev: evConsulStart})
				l.add(Record{Ev: evUpdate, Ent: "st-000", Snd: updateSender, Seq: 2})
				l.add(Record{Ev: evSaveFailed, Ent: "st-000", Inc: "n1|a|1", Token: 3, Snd: updateSender, Seq: 2})
				l.claim("n1|a|2", 1, 20)
				l.saved("n1|a|2", 1, 21, 3)
				l.saved("n1|a|2", 1, 22, 4)
			},
			// Update 4, saved after the wipe, is lost all the same.
			final: final(1, 21, 3),
			want:  StateFindings{Requested: 4, Acknowledged: 3, Claims: 2, Saves: 3, Failed: 1, Wipes: 1, LostToWipe: 1, Unchecked: 1, Lost: 1, Entities: 1},
		},
		{
			name: "before a wipe: an update saved before the records were read must be in them",
			ledger: func(l *stateLedger) {
				l.claim("n1|a|1", 1, 10)
				l.saved("n1|a|1", 1, 11, 1) // saved at 2s, in what was read at 6.5s
				l.saved("n1|a|1", 1, 12, 2) // saved at 5s, missing from it: lost
				l.saved("n1|a|1", 1, 13, 3) // saved at 8s, after the read: unchecked
				l.add(Record{Ev: evConsulStop})
				l.add(Record{Ev: evConsulStart})
			},
			beforeWipes: []*finalState{{ReadAt: int64(6500 * time.Millisecond), Records: final(1, 11, 1).Records}},
			final:       &finalState{Records: map[string]finalRecord{"st-000": {}}},
			want:        StateFindings{Requested: 3, Acknowledged: 3, Claims: 1, Saves: 3, Wipes: 1, Lost: 1, LostToWipe: 2, Unchecked: 1},
		},
		{
			name: "no final state, an answer without a save, an update never requested",
			ledger: func(l *stateLedger) {
				l.add(Record{Ev: evUpdated, Ent: "st-000", Snd: updateSender, Seq: 1})
			},
			final: nil,
			want:  StateFindings{Acknowledged: 1, AckedUnsaved: 1, FinalError: "missing"},
		},
		{
			name:   "an update never requested",
			ledger: func(l *stateLedger) { l.saved("n1|a|1", 1, 11, 1) },
			final:  final(1, 11, 1, 7),
			want:   StateFindings{Requested: 1, Acknowledged: 1, Saves: 1, Unrequested: 1, Entities: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &stateLedger{}
			tt.ledger(l)
			// One fault at 0.5s: every record is in its window.
			got := analyzeState(l.recs, tt.final, tt.beforeWipes, []time.Time{time.Unix(0, int64(time.Second/2))})
			want := StateCounts{Acknowledged: got.Acknowledged, Saves: got.Saves, Fenced: got.Fenced, Failed: got.Failed,
				StaleAccepted: got.StaleAccepted, Lost: got.Lost, LostToWipe: got.LostToWipe}
			if len(got.PerFault) != 1 || got.PerFault[0] != want || got.BeforeFaults != (StateCounts{}) {
				t.Errorf("windows: before %+v, per fault %+v; want %+v in the fault's", got.BeforeFaults, got.PerFault, want)
			}
			got.PerFault = nil
			if len(got.StaleList) != got.StaleAccepted || len(got.LostList) != got.Lost {
				t.Errorf("examples: %d stale, %d lost; counted %d, %d", len(got.StaleList), len(got.LostList), got.StaleAccepted, got.Lost)
			}
			got.StaleList, got.LostList = nil, nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("findings\n %+v\nwant\n %+v", got, tt.want)
			}
		})
	}
}

func TestStateFailures(t *testing.T) {
	ok := StateFindings{Requested: 5, Acknowledged: 4, Fenced: 2, Failed: 1, LostToWipe: 3}
	if f := ok.failures(); len(f) != 0 {
		t.Errorf("fenced refusals, failed saves and losses to a wipe are no failures: %v", f)
	}
	bad := StateFindings{Lost: 1, StaleAccepted: 2, FinalError: "missing"}
	got := strings.Join(bad.failures(), "; ")
	for _, want := range []string{"1 acknowledged updates lost", "2 stale writes accepted", "could not be read", "no update was acknowledged"} {
		if !strings.Contains(got, want) {
			t.Errorf("failures %q lack %q", got, want)
		}
	}
}

// brokenStore fails the load of one entity.
type brokenStore struct{ *durablestate.MemoryStore }

func (s brokenStore) Load(ctx context.Context, id string) (durablestate.Record, error) {
	if id == stateEntityID(1) {
		return durablestate.Record{}, errors.New("unreachable")
	}
	return s.MemoryStore.Load(ctx, id)
}

// The final state read from a store is what the judge reads back from the
// run's directory; an entity that cannot be read is an error, one never
// saved a record of revision 0.
func TestFinalStateRoundTrip(t *testing.T) {
	ctx := context.Background()
	mem := durablestate.NewMemoryStore()
	if _, err := mem.Save(ctx, stateEntityID(0), []byte(`["u1#1","u1#2"]`), 0, 3); err != nil {
		t.Fatal(err)
	}
	fs := readFinalState(ctx, brokenStore{mem}, 3)
	if !strings.Contains(fs.Error, "st-001: unreachable") {
		t.Errorf("error %q", fs.Error)
	}
	want := map[string]finalRecord{
		stateEntityID(0): {Revision: 1, Token: 3, Updates: []string{"u1#1", "u1#2"}},
		stateEntityID(2): {},
	}
	if !reflect.DeepEqual(fs.Records, want) {
		t.Errorf("records %+v, want %+v", fs.Records, want)
	}
	dir := t.TempDir()
	if got, err := loadFinalState(dir, stateFinalFile); got != nil || err != nil {
		t.Errorf("no file: %+v, %v", got, err)
	}
	if err := writeFinalState(dir, stateBeforeWipeFile(1), fs); err != nil {
		t.Fatal(err)
	}
	got, err := loadBeforeWipes(dir)
	if err != nil || len(got) != 1 || !reflect.DeepEqual(*got[0], fs) {
		t.Errorf("read back %+v, %v; want [%+v]", got, err, fs)
	}
	if err := writeFinalState(dir, stateFinalFile, fs); err != nil {
		t.Fatal(err)
	}
	final, err := loadFinalState(dir, stateFinalFile)
	if err != nil || !reflect.DeepEqual(*final, fs) {
		t.Errorf("read back %+v, %v; want %+v", final, err, fs)
	}
}

// Two incarnations of one durable state entity, the older one cut off:
// each answers only what it saved, the older one is refused once the
// newer one claimed, and the judge finds the refusal and nothing lost.
func TestStateEntityAnswersOnlySavedUpdates(t *testing.T) {
	dir := t.TempDir()
	l, err := openLedger(ledgerPath(dir, "n1"), "n1")
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	store := durablestate.NewMemoryStore()
	spawn := func() (*actor.ActorSystem, *actor.PID) {
		system := actor.NewActorSystem()
		t.Cleanup(system.Shutdown)
		pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
			return &entity{node: "n1", ledger: l, durable: store}
		}), stateEntityID(0))
		if err != nil {
			t.Fatal(err)
		}
		return system, pid
	}
	update := func(system *actor.ActorSystem, pid *actor.PID, seq int64) bool {
		req := &testpb.Ping{EntityId: stateEntityID(0), Seq: seq, From: updateSender}
		l.write(Record{Ev: evUpdate, Ent: req.EntityId, Snd: req.From, Seq: seq})
		res, err := system.Root.RequestFuture(pid, req, 2*time.Second).Result()
		p, ok := res.(*testpb.Pong)
		if err != nil || !ok || p.Seq != seq {
			return false
		}
		l.write(Record{Ev: evUpdated, Ent: req.EntityId, Snd: req.From, Seq: seq})
		return true
	}
	older, a := spawn()
	if !update(older, a, 1) {
		t.Fatal("update 1 was not answered")
	}
	newer, b := spawn()
	if !update(newer, b, 2) {
		t.Fatal("update 2 was not answered by the newer incarnation")
	}
	if update(older, a, 3) {
		t.Fatal("the older incarnation answered update 3 after the newer one claimed")
	}
	if !update(newer, b, 4) {
		t.Fatal("update 4 was not answered")
	}
	recs, _, err := readLedgers(dir)
	if err != nil {
		t.Fatal(err)
	}
	fs := readFinalState(context.Background(), store, 1)
	if got := fs.Records[stateEntityID(0)].Updates; !reflect.DeepEqual(got, []string{"u1#1", "u1#2", "u1#4"}) {
		t.Errorf("stored updates %v", got)
	}
	f := analyzeState(recs, &fs, nil, nil)
	if f.Acknowledged != 3 || f.Saves != 3 || f.Claims != 2 || f.Fenced != 1 || f.Lost != 0 || f.StaleAccepted != 0 || len(f.failures()) != 0 {
		t.Errorf("findings %+v, failures %v", f, f.failures())
	}
}
