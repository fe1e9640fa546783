package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/coordinatoractor"
)

// Helpers of the write bookkeeping tests carry a "wr" prefix.

// wrStep is one transition of a stateWrites and what it must give.
type wrStep struct {
	op      string // load, apply, wait, begin, done, refuse, abandon, settled, durable
	event   Event  // apply
	key     string // apply, wait
	tag     string // apply, wait: what then/refused record
	shard   string // settled
	version uint64 // load, done; begin: the version it must write at
	ok      bool   // wait: queued; begin: started; settled: settled
	tags    []string
	shards  int // begin: shards in the snapshot; durable: shards written
	err     bool
}

func wrAlloc(shard string) Event {
	return ShardHomeAllocated{Shard: shard, Region: stRegion(1)}
}

// wrLoaded is the state a coordinator reads: one region, shard s0 on it.
func wrLoaded() State {
	s := NewState(false)
	for _, e := range []Event{ShardRegionRegistered{Region: stRegion(1), MemberID: "m1"}, wrAlloc("s0")} {
		if err := s.Apply(e); err != nil {
			panic(err)
		}
	}
	return s
}

// claimed: loaded at version 7 and claimed at 8.
var wrClaimed = []wrStep{
	{op: "load", version: 7},
	{op: "begin", ok: true, version: 7, shards: 1},
	{op: "done", version: 8, tags: []string{}},
}

func TestStateWritesTransitions(t *testing.T) {
	cases := []struct {
		name  string
		steps []wrStep
	}{
		{"the claim comes first", []wrStep{
			{op: "load", version: 7},
			{op: "begin", ok: true, version: 7, shards: 1},
			{op: "begin", ok: false},
			{op: "done", version: 8, tags: []string{}},
			{op: "begin", ok: false},
			{op: "durable", shards: 1},
		}},
		{"nothing applies before the load", []wrStep{
			{op: "apply", event: wrAlloc("s1"), err: true},
			{op: "begin", ok: false},
		}},
		// One write where a coordinator with work at its start made two.
		{"events decided before the claim go with it", []wrStep{
			{op: "load", version: 7},
			{op: "apply", event: wrAlloc("s1"), tag: "a"},
			{op: "begin", ok: true, version: 7, shards: 2},
			{op: "apply", event: wrAlloc("s2"), tag: "b"},
			{op: "begin", ok: false},
			{op: "done", version: 8, tags: []string{"a"}},
			{op: "durable", shards: 2},
			{op: "begin", ok: true, version: 8, shards: 3},
			{op: "done", version: 9, tags: []string{"b"}},
		}},
		// Replies carry the epoch, the version of the claim.
		{"before the claim is written every reply waits for it", []wrStep{
			{op: "load", version: 7},
			{op: "settled", shard: "s0", ok: false},
			{op: "wait", key: "k", tag: "w1", ok: true},
			{op: "begin", ok: true, version: 7, shards: 1},
			{op: "settled", shard: "s0", ok: false},
			{op: "wait", tag: "w2", ok: true},
			{op: "done", version: 8, tags: []string{"w1", "w2"}},
			{op: "settled", shard: "s0", ok: true},
			{op: "wait", tag: "w3", ok: false},
		}},
		{"a refused claim with events claims again without them", []wrStep{
			{op: "load", version: 7},
			{op: "apply", event: wrAlloc("s1"), tag: "a"},
			{op: "wait", key: "k", tag: "w", ok: true},
			{op: "begin", ok: true, version: 7, shards: 2},
			{op: "apply", event: wrAlloc("s2"), tag: "b"},
			{op: "refuse", tags: []string{"a", "w", "b"}},
			{op: "settled", shard: "s1", ok: false},
			{op: "begin", ok: true, version: 7, shards: 1},
			{op: "refuse", err: true},
		}},
		{"a claim written again after a refusal", []wrStep{
			{op: "load", version: 7},
			{op: "apply", event: wrAlloc("s1"), tag: "a"},
			{op: "begin", ok: true, version: 7, shards: 2},
			{op: "refuse", tags: []string{"a"}},
			{op: "begin", ok: true, version: 7, shards: 1},
			{op: "done", version: 8, tags: []string{}},
			{op: "settled", shard: "s1", ok: true},
			{op: "durable", shards: 1},
		}},
		{"loaded twice", []wrStep{{op: "load", version: 1}, {op: "load", version: 2, err: true}}},
		{"nothing to write before the load", []wrStep{{op: "begin", ok: false}}},
		{"events while a write is in flight go in the next one", append(slices.Clone(wrClaimed),
			wrStep{op: "apply", event: wrAlloc("s1"), tag: "a"},
			wrStep{op: "begin", ok: true, version: 8, shards: 2},
			wrStep{op: "apply", event: wrAlloc("s2"), tag: "b"},
			wrStep{op: "apply", event: wrAlloc("s3"), tag: "c"},
			wrStep{op: "begin", ok: false},
			wrStep{op: "done", version: 9, tags: []string{"a"}},
			wrStep{op: "durable", shards: 2},
			wrStep{op: "begin", ok: true, version: 9, shards: 4},
			wrStep{op: "done", version: 12, tags: []string{"b", "c"}},
			wrStep{op: "durable", shards: 4},
			wrStep{op: "begin", ok: false},
		)},
		{"the snapshot does not move with later events", append(slices.Clone(wrClaimed),
			wrStep{op: "apply", event: wrAlloc("s1"), tag: "a"},
			wrStep{op: "begin", ok: true, version: 8, shards: 2},
			wrStep{op: "apply", event: ShardHomeDeallocated{Shard: "s0"}, tag: "b"},
			wrStep{op: "done", version: 9, tags: []string{"a"}},
			wrStep{op: "durable", shards: 2},
		)},
		{"a reply with nothing unwritten goes at once", append(slices.Clone(wrClaimed),
			wrStep{op: "wait", key: "k", tag: "w", ok: false},
			wrStep{op: "begin", ok: false},
		)},
		{"a reply waits for the pending events", append(slices.Clone(wrClaimed),
			wrStep{op: "apply", event: wrAlloc("s1"), tag: "a"},
			wrStep{op: "begin", ok: true, version: 8, shards: 2},
			wrStep{op: "apply", event: wrAlloc("s2"), tag: "b"},
			wrStep{op: "wait", tag: "w", ok: true},
			wrStep{op: "done", version: 9, tags: []string{"a"}},
			wrStep{op: "begin", ok: true, version: 9, shards: 3},
			wrStep{op: "done", version: 10, tags: []string{"b", "w"}},
		)},
		{"a reply behind the write in flight needs no write of its own", append(slices.Clone(wrClaimed),
			wrStep{op: "apply", event: wrAlloc("s1"), tag: "a"},
			wrStep{op: "begin", ok: true, version: 8, shards: 2},
			wrStep{op: "wait", tag: "w", ok: true},
			wrStep{op: "begin", ok: false},
			wrStep{op: "done", version: 9, tags: []string{"a", "w"}},
			wrStep{op: "begin", ok: false},
		)},
		{"a repeated reply waits once, and again once answered", append(slices.Clone(wrClaimed),
			wrStep{op: "apply", event: wrAlloc("s1"), key: "k", tag: "a"},
			wrStep{op: "wait", key: "k", tag: "w1", ok: true},
			wrStep{op: "wait", key: "other", tag: "w2", ok: true},
			wrStep{op: "wait", key: "other", tag: "w3", ok: true},
			wrStep{op: "begin", ok: true, version: 8, shards: 2},
			wrStep{op: "done", version: 9, tags: []string{"a", "w2"}},
			wrStep{op: "apply", event: wrAlloc("s2"), tag: "b"},
			wrStep{op: "wait", key: "k", tag: "w4", ok: true},
			wrStep{op: "begin", ok: true, version: 9, shards: 3},
			wrStep{op: "done", version: 10, tags: []string{"b", "w4"}},
		)},
		{"a shard is settled once its events are written", append(slices.Clone(wrClaimed),
			wrStep{op: "settled", shard: "s0", ok: true},
			wrStep{op: "apply", event: wrAlloc("s1"), tag: "a"},
			wrStep{op: "settled", shard: "s1", ok: false},
			wrStep{op: "begin", ok: true, version: 8, shards: 2},
			wrStep{op: "apply", event: ShardHomeDeallocated{Shard: "s1"}, tag: "b"},
			wrStep{op: "done", version: 9, tags: []string{"a"}},
			wrStep{op: "settled", shard: "s1", ok: false},
			wrStep{op: "begin", ok: true, version: 9, shards: 1},
			wrStep{op: "done", version: 10, tags: []string{"b"}},
			wrStep{op: "settled", shard: "s1", ok: true},
		)},
		{"an event that does not fit queues nothing", append(slices.Clone(wrClaimed),
			wrStep{op: "apply", event: ShardHomeDeallocated{Shard: "nope"}, tag: "a", err: true},
			wrStep{op: "apply", event: wrAlloc("s0"), tag: "b", err: true},
			wrStep{op: "apply", event: nil, tag: "c", err: true},
			wrStep{op: "begin", ok: false},
			wrStep{op: "settled", shard: "s0", ok: true},
		)},
		{"done out of order", append(slices.Clone(wrClaimed),
			wrStep{op: "done", version: 9, err: true},
			wrStep{op: "apply", event: wrAlloc("s1"), tag: "a"},
			wrStep{op: "begin", ok: true, version: 8, shards: 2},
			wrStep{op: "done", version: 5, err: true},
			wrStep{op: "done", version: 9, tags: []string{"a"}},
		)},
		// Consul keeps the index of a key whose value a write leaves as it was.
		{"a write that changes nothing may keep the version", append(slices.Clone(wrClaimed),
			wrStep{op: "apply", event: wrAlloc("s1"), tag: "a"},
			wrStep{op: "apply", event: ShardHomeDeallocated{Shard: "s1"}, tag: "b"},
			wrStep{op: "begin", ok: true, version: 8, shards: 1},
			wrStep{op: "done", version: 8, tags: []string{"a", "b"}},
		)},
		{"a refused write goes back to the state written", append(slices.Clone(wrClaimed),
			wrStep{op: "apply", event: wrAlloc("s1"), tag: "a"},
			wrStep{op: "begin", ok: true, version: 8, shards: 2},
			wrStep{op: "apply", event: wrAlloc("s2"), key: "k", tag: "b"},
			wrStep{op: "wait", tag: "w", ok: true},
			wrStep{op: "refuse", tags: []string{"a", "b", "w"}},
			wrStep{op: "settled", shard: "s1", ok: true},
			wrStep{op: "begin", ok: false},
			// The state is the one written: s1 can be allocated again.
			wrStep{op: "apply", event: wrAlloc("s1"), key: "k", tag: "c"},
			wrStep{op: "wait", key: "k", tag: "w2", ok: true},
			wrStep{op: "begin", ok: true, version: 8, shards: 2},
			wrStep{op: "done", version: 9, tags: []string{"c"}},
		)},
		{"a refused claim is no refusal", []wrStep{
			{op: "load", version: 7},
			{op: "begin", ok: true, version: 7, shards: 1},
			{op: "refuse", err: true},
		}},
		{"refused with no write in flight", append(slices.Clone(wrClaimed),
			wrStep{op: "apply", event: wrAlloc("s1"), tag: "a"},
			wrStep{op: "refuse", err: true},
		)},
		{"abandon returns all that is not written", append(slices.Clone(wrClaimed),
			wrStep{op: "apply", event: wrAlloc("s1"), tag: "a"},
			wrStep{op: "begin", ok: true, version: 8, shards: 2},
			wrStep{op: "apply", event: wrAlloc("s2"), tag: "b"},
			wrStep{op: "wait", key: "k", tag: "w", ok: true},
			wrStep{op: "abandon", tags: []string{"a", "b", "w"}},
			wrStep{op: "abandon", tags: []string{}},
			wrStep{op: "begin", ok: false},
			wrStep{op: "settled", shard: "s2", ok: true},
			wrStep{op: "apply", event: wrAlloc("s3"), err: true},
			wrStep{op: "wait", tag: "w2", ok: false},
		)},
		{"abandoned during the claim, it claims no more", []wrStep{
			{op: "load", version: 7},
			{op: "begin", ok: true, version: 7, shards: 1},
			{op: "abandon", tags: []string{}},
			{op: "begin", ok: false},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var w stateWrites
			var ran, refused []string
			record := func(tag string) (func(actor.Context), func(actor.Context, error)) {
				return func(actor.Context) { ran = append(ran, tag) },
					func(_ actor.Context, err error) { refused = append(refused, tag) }
			}
			for i, st := range tc.steps {
				where := fmt.Sprintf("step %d (%s)", i, st.op)
				var err error
				switch st.op {
				case "load":
					err = w.load(wrLoaded(), st.version)
				case "apply":
					then, ref := record(st.tag)
					err = w.apply(update{event: st.event, key: st.key, then: then, refused: ref})
				case "wait":
					then, ref := record(st.tag)
					if got := w.wait(st.key, then, ref); got != st.ok {
						t.Fatalf("%s: queued %v, want %v", where, got, st.ok)
					}
				case "begin":
					snap, v, ok := w.begin()
					if ok != st.ok {
						t.Fatalf("%s: started %v, want %v", where, ok, st.ok)
					}
					if ok && (v != st.version || len(snap.Shards) != st.shards) {
						t.Fatalf("%s: writes %d shards at version %d, want %d at %d", where, len(snap.Shards), v, st.shards, st.version)
					}
				case "done":
					var batch []update
					batch, err = w.done(st.version)
					if err == nil {
						ran = nil
						for _, u := range batch {
							if u.then != nil {
								u.then(nil)
							}
						}
						wrAssertTags(t, where, ran, st.tags)
						if w.version != st.version {
							t.Fatalf("%s: version %d, want %d", where, w.version, st.version)
						}
					}
				case "refuse", "abandon":
					var all []update
					if st.op == "refuse" {
						all, err = w.refuse()
					} else {
						all = w.abandon()
					}
					if err == nil {
						refused = nil
						for _, u := range all {
							u.refused(nil, errors.New("refused"))
						}
						wrAssertTags(t, where, refused, st.tags)
						if st.op == "refuse" {
							stAssertEqual(t, w.state, w.durable)
						}
					}
				case "settled":
					if got := w.settled(st.shard); got != st.ok {
						t.Fatalf("%s: settled(%s) = %v, want %v", where, st.shard, got, st.ok)
					}
				case "durable":
					if got := len(w.durable.Shards); got != st.shards {
						t.Fatalf("%s: %d shards written, want %d", where, got, st.shards)
					}
				default:
					t.Fatalf("%s: unknown op", where)
				}
				if (err != nil) != st.err {
					t.Fatalf("%s: error %v, want error %v", where, err, st.err)
				}
				if err != nil && st.op != "apply" && !errors.Is(err, errWriteOrder) {
					t.Fatalf("%s: error %v is not errWriteOrder", where, err)
				}
			}
		})
	}
}

func wrAssertTags(t *testing.T, where string, got, want []string) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: ran %v, want %v", where, got, want)
	}
}

// The state applied ahead of the store is the state written plus the
// events not yet written, whatever their order of writes: replaying the
// batches on the state loaded gives the state the coordinator decides on.
func TestStateWritesWorkingStateIsDurablePlusPending(t *testing.T) {
	var w stateWrites
	if err := w.load(wrLoaded(), 1); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := w.begin(); !ok {
		t.Fatal("no claim")
	}
	if _, err := w.done(2); err != nil {
		t.Fatal(err)
	}
	version := uint64(2)
	for round := range 5 {
		for i := range round + 1 {
			if err := w.apply(update{event: wrAlloc(fmt.Sprintf("r%d-%d", round, i))}); err != nil {
				t.Fatal(err)
			}
		}
		snap, v, ok := w.begin()
		if !ok || v != version {
			t.Fatalf("round %d: begin %v at %d, want at %d", round, ok, v, version)
		}
		// More events while in flight; the snapshot stays as it was.
		if err := w.apply(update{event: wrAlloc(fmt.Sprintf("late-%d", round))}); err != nil {
			t.Fatal(err)
		}
		if len(snap.Shards) != len(w.state.Shards)-1 {
			t.Fatalf("round %d: the snapshot moved with a later event", round)
		}
		version++
		if _, err := w.done(version); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, ok := w.begin(); !ok {
		t.Fatal("the last late event is not written")
	}
	version++
	if _, err := w.done(version); err != nil {
		t.Fatal(err)
	}
	stAssertEqual(t, w.durable, w.state)
	stAssertConsistent(t, w.state)
	if got, want := len(w.state.Shards), 1+15+5; got != want {
		t.Fatalf("%d shards, want %d", got, want)
	}
}

func TestWriteOutcome(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, writeOK},
		{fmt.Errorf("save: %w", coordinatoractor.ErrVersionConflict), writeConflict},
		{fmt.Errorf("save: %w", coordinatoractor.ErrStateTooLarge), writeRefused},
		{ErrInvalidState, writeRefused},
		{fmt.Errorf("consul: %w", context.DeadlineExceeded), writeTimeout},
		{errors.New("connection refused"), writeError},
	}
	for _, tt := range tests {
		if got := writeOutcome(tt.err); got != tt.want {
			t.Errorf("writeOutcome(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
