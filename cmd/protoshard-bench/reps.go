package main

import (
	"fmt"
	"runtime"
	"slices"
	"time"
)

// On a small shared machine the speed drifts by a factor of two within
// seconds, so one measurement per side, or the best of a few, says more
// about the moment than about the code. A figure is therefore measured in
// repetitions, each measuring protoshard and its baseline back to back,
// and reported as medians; the ratio is the median of the repetitions'
// ratios, since the two values of one repetition saw the same machine.

// interleave runs reps repetitions of sides, each side once per
// repetition, in the given order in even repetitions and in the reverse
// order in odd ones, so that no side always runs first (or right after
// another). Before each side a garbage collection clears the garbage of
// the sides before, so that none pays for another's. A side records its
// own values; the first error ends it.
func interleave(reps int, sides ...func() error) error {
	for r := range reps {
		for i := range sides {
			side := sides[i]
			if r%2 == 1 {
				side = sides[len(sides)-1-i]
			}
			runtime.GC()
			if err := side(); err != nil {
				return fmt.Errorf("repetition %d: %w", r+1, err)
			}
		}
	}
	return nil
}

// series collects one value (such as a throughput) per repetition.
type series []float64

// side is a side for interleave: it measures one value and appends it, or
// passes measure's error on with what it measured.
func (r *series) side(what string, measure func() (float64, error)) func() error {
	return func() error {
		v, err := measure()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		*r = append(*r, v)
		return nil
	}
}

// percentileSeries collects the p50 and p99 of one latency measurement per
// repetition.
type percentileSeries struct{ p50, p99 []float64 }

// side is a side for interleave: it measures a p50 and a p99 and appends
// them, or passes measure's error on with what it measured.
func (p *percentileSeries) side(what string, measure func() (p50, p99 float64, err error)) func() error {
	return func() error {
		p50, p99, err := measure()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		p.p50, p.p99 = append(p.p50, p50), append(p.p99, p99)
		return nil
	}
}

// paired completes f from protoshard's and the baseline's values of the
// same repetitions (protoshard[i] and baseline[i] measured back to back):
// the median of each side, and the ratio as the median of the
// repetitions' ratios, with the lowest and the highest of them.
func paired(f figure, protoshard, baseline []float64) figure {
	if len(protoshard) != len(baseline) || len(protoshard) == 0 {
		// Not a figure: run reports it as a bad one.
		f.Protoshard, f.Baseline, f.Ratio = 0, 0, 0
		return f
	}
	ratios := make([]float64, len(protoshard))
	for i := range protoshard {
		ratios[i] = protoshard[i] / baseline[i]
	}
	f.Reps, f.ProtoshardRuns, f.BaselineRuns = len(ratios), slices.Clone(protoshard), slices.Clone(baseline)
	f.Protoshard, f.Baseline, f.Ratio = median(protoshard), median(baseline), median(ratios)
	f.RatioMin, f.RatioMax = slices.Min(ratios), slices.Max(ratios)
	return f
}

// median of v (the mean of the middle two for an even count).
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return m
}

// percentile is the p-th percentile of v by nearest rank: the smallest
// value that at least p percent of v do not exceed.
func percentile(v []float64, p int) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}

// tail completes f from every round of protoshard and of the baseline:
// the p-th percentile of each side, and their ratio. A tail needs many
// rounds; the ratio of two tails, not the tail of the rounds' ratios,
// which would add two rounds' noise.
func tail(f figure, p int, protoshard, baseline []float64) figure {
	if len(protoshard) == 0 || len(baseline) == 0 {
		f.Protoshard, f.Baseline, f.Ratio = 0, 0, 0
		return f
	}
	f.Reps, f.ProtoshardRuns, f.BaselineRuns = len(protoshard), slices.Clone(protoshard), slices.Clone(baseline)
	f.Protoshard, f.Baseline = percentile(protoshard, p), percentile(baseline, p)
	f.Ratio = f.Protoshard / f.Baseline
	f.RatioMin, f.RatioMax = f.Ratio, f.Ratio
	return f
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// medianOf says in a workload's text how many repetitions its figures are
// the median of: "one run", "median of 5 runs".
func medianOf(n int, one, many string) string {
	if n == 1 {
		return "one " + one
	}
	return fmt.Sprintf("median of %d %s", n, many)
}

// runsText is medianOf for the repetitions of the -reps flag.
func runsText(reps int) string { return medianOf(reps, "run", "runs") }
