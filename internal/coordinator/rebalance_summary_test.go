package coordinator

import (
	"testing"
	"time"
)

func TestRebalanceSummary(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	type tick struct {
		started int
		settled bool
		want    rebalanceEvent
		total   rebalanceSummary // for rebalanceEnded
	}
	tests := []struct {
		name  string
		ticks []tick
	}{
		{"a settled allocation reports nothing", []tick{
			{0, true, rebalanceGoesOn, rebalanceSummary{}},
			{0, true, rebalanceGoesOn, rebalanceSummary{}},
		}},
		{"hand-offs not of a rebalance in progress report nothing", []tick{
			{0, false, rebalanceGoesOn, rebalanceSummary{}},
		}},
		{"the first round begins it, later rounds are counted, the settled tick ends it", []tick{
			{10, false, rebalanceBegan, rebalanceSummary{}},
			{9, false, rebalanceGoesOn, rebalanceSummary{}},
			{0, false, rebalanceGoesOn, rebalanceSummary{}}, // hand-offs still in progress
			{1, false, rebalanceGoesOn, rebalanceSummary{}},
			{0, true, rebalanceEnded, rebalanceSummary{since: t0, rounds: 3, shards: 20}},
			{0, true, rebalanceGoesOn, rebalanceSummary{}},
		}},
		{"a rebalance after the end is a new one", []tick{
			{2, false, rebalanceBegan, rebalanceSummary{}},
			{0, true, rebalanceEnded, rebalanceSummary{since: t0, rounds: 1, shards: 2}},
			{3, false, rebalanceBegan, rebalanceSummary{}},
			{0, true, rebalanceEnded, rebalanceSummary{since: t0.Add(2 * time.Second), rounds: 1, shards: 3}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s rebalanceSummary
			for i, k := range tt.ticks {
				got, total := s.tick(k.started, k.settled, t0.Add(time.Duration(i)*time.Second))
				if got != k.want {
					t.Fatalf("tick %d: event %d, want %d", i, got, k.want)
				}
				if got == rebalanceEnded && total != k.total {
					t.Fatalf("tick %d: totals %+v, want %+v", i, total, k.total)
				}
			}
		})
	}
	var s rebalanceSummary
	s.tick(1, false, t0)
	if _, total := s.tick(0, true, t0.Add(90*time.Second)); total.took(t0.Add(90*time.Second)) != 90*time.Second {
		t.Fatalf("took %v, want 90s", total.took(t0.Add(90*time.Second)))
	}
}
