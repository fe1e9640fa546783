package main

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/internal/coordinator"
)

// The strategy alone: regions above the new optimum give their surplus,
// at most the per-round limit in a round.
func TestSimulateRebalance(t *testing.T) {
	strategy := coordinatoractor.NewLeastShardAllocationStrategy(coordinatoractor.DefaultRebalanceAbsoluteLimit, coordinatoractor.DefaultRebalanceRelativeLimit)
	for _, tc := range []struct {
		size          scaleSize
		rounds, moved int
		limit         int
	}{
		// optimum ceil(10000/110) = 91: 100 regions give 9 each, 20 a round.
		{newScaleSize(100, 10_000), 45, 900, 20},
		// optimum ceil(1000/11) = 91: 10 regions give 9 each.
		{newScaleSize(10, 1000), 5, 90, 20},
		// optimum ceil(200/3) = 67: 2 regions give 33 each; the relative
		// limit (0.1 × 200) is the absolute one.
		{newScaleSize(2, 200), 4, 66, 20},
		// 0.1 × 50 shards: 5 a round.
		{newScaleSize(2, 50), 4, 16, 5},
	} {
		rounds, err := simulateRebalance(strategy, tc.size)
		if err != nil {
			t.Fatalf("%v: %v", tc.size, err)
		}
		if len(rounds) != tc.rounds || sum(rounds) != tc.moved || slices.Max(rounds) != tc.limit {
			t.Errorf("%v + %d: rounds %v (%d moved), want %d rounds, %d moved, at most %d a round", tc.size, tc.size.joining, rounds, sum(rounds), tc.rounds, tc.moved, tc.limit)
		}
		if got := roundLimit(tc.size.shards); got != tc.limit {
			t.Errorf("%v: limit %d, want %d", tc.size, got, tc.limit)
		}
	}
}

// The state built in memory has the regions and shards asked for, and
// encodes (EncodeState validates it as DecodeState would).
func TestSyntheticState(t *testing.T) {
	st := syntheticState(coordinator.RegionEntry{}, newScaleSize(300, 1000))
	if len(st.Regions) != 300 || len(st.Shards) != 1000 {
		t.Fatalf("%d regions, %d shards, want 300, 1000", len(st.Regions), len(st.Shards))
	}
	data, err := coordinator.EncodeState(st)
	if err != nil {
		t.Fatal(err)
	}
	back, err := coordinator.DecodeState(data)
	if err != nil || len(back.Shards) != 1000 {
		t.Fatalf("decoded %d shards (%v), want 1000", len(back.Shards), err)
	}
}

// Only the rebalance rounds logged while recording count.
func TestRoundsLog(t *testing.T) {
	var l roundsLog
	round := func(n int) {
		r := slog.NewRecord(time.Now(), slog.LevelDebug, rebalanceRoundLog, 0)
		r.AddAttrs(slog.String("type", "T"), slog.Int("shards", n), slog.Int("in-progress", n))
		l.observe(r)
	}
	round(1)
	l.record()
	round(20)
	l.observe(slog.NewRecord(time.Now(), slog.LevelDebug, "shard allocated", 0))
	round(7)
	got := l.stop()
	round(3)
	if !slices.Equal(got, []int{20, 7}) {
		t.Errorf("rounds %v, want [20 7]", got)
	}
}
