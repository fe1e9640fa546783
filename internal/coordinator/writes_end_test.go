package coordinator

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/protoshard/protoshard/coordinatoractor"
)

// weDescribe writes a writeEnd as "claim done 1", "refused 2 (cause)" or
// "fail: ...", the claim marked by its prefix.
func weDescribe(e writeEnd) string {
	var b strings.Builder
	if e.claim {
		b.WriteString("claim ")
	}
	switch {
	case e.fail != nil:
		fmt.Fprintf(&b, "fail: %v", e.fail)
	case e.cause != nil:
		fmt.Fprintf(&b, "refused %d", len(e.refused))
	default:
		fmt.Fprintf(&b, "done %d", len(e.done))
	}
	return b.String()
}

func TestStateWritesEnded(t *testing.T) {
	tooLarge := fmt.Errorf("9000 bytes: %w", coordinatoractor.ErrStateTooLarge)
	lost := errors.New("connection reset")
	type step struct {
		op      string // apply, wait, begin, ended
		shard   string // apply
		version uint64 // ended
		err     error  // ended
		want    string // ended: weDescribe
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"the claim succeeds", []step{
			{op: "begin"},
			{op: "ended", version: 8, want: "claim done 0"},
			{op: "apply", shard: "s1"},
			{op: "wait"},
			{op: "begin"},
			{op: "ended", version: 9, want: "done 2"},
		}},
		{"a claim that carried events and is refused is written again without them", []step{
			{op: "apply", shard: "s1"},
			{op: "begin"},
			{op: "wait"},
			{op: "ended", err: tooLarge, want: "claim refused 2"},
			{op: "begin"},
			{op: "ended", version: 8, want: "claim done 0"},
		}},
		{"a bare claim refused fails", []step{
			{op: "begin"},
			{op: "ended", err: tooLarge, want: "claim fail: coordinator state writes out of order: a refused write while none, or the bare claim, was in flight"},
		}},
		{"a claim that fails fails", []step{
			{op: "begin"},
			{op: "ended", err: lost, want: "claim fail: claim the state: connection reset"},
		}},
		{"a write that fails fails", []step{
			{op: "begin"},
			{op: "ended", version: 8, want: "claim done 0"},
			{op: "apply", shard: "s1"},
			{op: "begin"},
			{op: "ended", err: lost, want: "fail: write the state: connection reset"},
		}},
		{"a write that conflicts fails", []step{
			{op: "begin"},
			{op: "ended", err: coordinatoractor.ErrVersionConflict, want: "claim fail: claim the state: " + coordinatoractor.ErrVersionConflict.Error()},
		}},
		{"an answer with no write in flight fails", []step{
			{op: "ended", version: 8, want: "claim fail: coordinator state writes out of order: a write succeeded while none was in flight"},
		}},
		{"a version older than the one written fails", []step{
			{op: "begin"},
			{op: "ended", version: 6, want: "claim fail: coordinator state writes out of order: the store answered version 6 to a write at version 7"},
		}},
		{"a refused write of events goes back to the state written", []step{
			{op: "begin"},
			{op: "ended", version: 8, want: "claim done 0"},
			{op: "apply", shard: "s1"},
			{op: "begin"},
			{op: "apply", shard: "s2"},
			{op: "ended", err: fmt.Errorf("bad: %w", ErrInvalidState), want: "refused 2"},
			{op: "begin"},
			{op: "ended", version: 9, want: "fail: coordinator state writes out of order: a write succeeded while none was in flight"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var w stateWrites
			if err := w.load(wrLoaded(), 7); err != nil {
				t.Fatal(err)
			}
			for i, s := range tc.steps {
				switch s.op {
				case "apply":
					if err := w.apply(update{event: wrAlloc(s.shard)}); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
				case "wait":
					w.wait("", nil, nil)
				case "begin":
					w.begin()
				case "ended":
					if got := weDescribe(w.ended(s.version, s.err)); got != s.want {
						t.Fatalf("step %d: ended = %q, want %q", i, got, s.want)
					}
				}
			}
		})
	}
}

func TestClaimable(t *testing.T) {
	read := stBuild(t, true,
		ShardRegionRegistered{Region: stRegion(1), MemberID: "m1"},
		ShardHomeAllocated{Shard: "a", Region: stRegion(1)},
		ShardRegionTerminated{Region: stRegion(1)},
	)
	cases := []struct {
		remember    bool
		unallocated int
	}{{true, 1}, {false, 0}}
	for _, tc := range cases {
		got := claimable(read.Clone(), tc.remember)
		if got.RememberEntities != tc.remember || len(got.Unallocated) != tc.unallocated || got.Unallocated == nil {
			t.Fatalf("claimable(remember %v) = %+v, want %d unallocated", tc.remember, got, tc.unallocated)
		}
	}
}
