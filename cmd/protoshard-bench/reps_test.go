package main

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestInterleave(t *testing.T) {
	for _, tc := range []struct {
		reps  int
		sides int
		want  string
	}{
		{reps: 1, sides: 2, want: "ab"},
		{reps: 3, sides: 2, want: "abbaab"},
		{reps: 4, sides: 3, want: "abccbaabccba"},
	} {
		var got strings.Builder
		sides := make([]func() error, tc.sides)
		for i := range sides {
			sides[i] = func() error { got.WriteByte(byte('a' + i)); return nil }
		}
		if err := interleave(tc.reps, sides...); err != nil {
			t.Fatal(err)
		}
		if got.String() != tc.want {
			t.Errorf("%d repetitions of %d sides ran %q, want %q", tc.reps, tc.sides, got.String(), tc.want)
		}
	}
}

func TestInterleaveStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	calls, bCalls := 0, 0
	err := interleave(3, func() error { calls++; return nil }, func() error {
		calls++
		if bCalls++; bCalls == 2 { // the second repetition, which this side starts
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "repetition 2") {
		t.Fatalf("error %v, want boom in repetition 2", err)
	}
	if calls != 3 {
		t.Fatalf("%d calls, want 3: none after the error", calls)
	}
}

func TestPaired(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		protoshard, baseline        []float64
		wantP, wantB, ratio, lo, hi float64
	}{
		{name: "one run", protoshard: []float64{3}, baseline: []float64{2}, wantP: 3, wantB: 2, ratio: 1.5, lo: 1.5, hi: 1.5},
		{
			// The machine is twice as fast in the second run: the ratio of
			// the medians (4/4) would hide that protoshard is half as fast
			// in every run.
			name:       "a run on a faster machine",
			protoshard: []float64{1, 4, 5},
			baseline:   []float64{2, 8, 4},
			wantP:      4, wantB: 4, ratio: 0.5, lo: 0.5, hi: 1.25,
		},
		{name: "even count", protoshard: []float64{1, 2, 3, 4}, baseline: []float64{1, 1, 1, 1}, wantP: 2.5, wantB: 1, ratio: 2.5, lo: 1, hi: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, b := slices.Clone(tc.protoshard), slices.Clone(tc.baseline)
			f := paired(figure{Section: "s"}, p, b)
			if f.Protoshard != tc.wantP || f.Baseline != tc.wantB || f.Ratio != tc.ratio || f.RatioMin != tc.lo || f.RatioMax != tc.hi || f.Reps != len(p) {
				t.Errorf("got %+v, want %v / %v, ratio %v (%v..%v)", f, tc.wantP, tc.wantB, tc.ratio, tc.lo, tc.hi)
			}
			if !validFigure(f) {
				t.Errorf("%+v is not a valid figure", f)
			}
			if !slices.Equal(p, tc.protoshard) || !slices.Equal(b, tc.baseline) {
				t.Error("paired reordered its arguments")
			}
		})
	}
	if f := paired(figure{}, []float64{1, 2}, []float64{1}); validFigure(f) {
		t.Errorf("runs of different counts made a valid figure: %+v", f)
	}
}

func TestPercentile(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(100 - i) // 100 down to 1: sorting is percentile's
	}
	for _, tc := range []struct {
		name string
		v    []float64
		p    int
		want float64
	}{
		{name: "one value", v: []float64{7}, p: 99, want: 7},
		{name: "p50 of four", v: []float64{4, 1, 3, 2}, p: 50, want: 2},
		{name: "p99 of 100 leaves out the slowest", v: hundred, p: 99, want: 99},
		{name: "p99 of 50 is the slowest", v: hundred[50:], p: 99, want: 50},
		{name: "p0 is the fastest", v: []float64{5, 3, 9}, p: 0, want: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := slices.Clone(tc.v)
			if got := percentile(v, tc.p); got != tc.want {
				t.Errorf("p%d = %v, want %v", tc.p, got, tc.want)
			}
			if !slices.Equal(v, tc.v) {
				t.Error("percentile reordered its argument")
			}
		})
	}
}

func TestTail(t *testing.T) {
	// Each side has one slow round, not the same one: the tail of the
	// rounds' ratios would be 10, the ratio of the tails is 1.
	protoshard := []float64{1, 10, 1, 1}
	baseline := []float64{1, 1, 10, 1}
	f := tail(figure{Section: "s"}, 99, protoshard, baseline)
	if f.Protoshard != 10 || f.Baseline != 10 || f.Ratio != 1 || f.RatioMin != 1 || f.RatioMax != 1 || f.Reps != 4 {
		t.Errorf("got %+v, want 10 / 10, ratio 1", f)
	}
	if !validFigure(f) {
		t.Errorf("%+v is not a valid figure", f)
	}
	if f := tail(figure{}, 99, nil, baseline); validFigure(f) {
		t.Errorf("no rounds made a valid figure: %+v", f)
	}
}

func TestRatioText(t *testing.T) {
	if got := ratioText(paired(figure{}, []float64{1, 2, 3}, []float64{2, 2, 2})); got != "1.00 (0.50–1.50)" {
		t.Errorf("got %q", got)
	}
	if got := ratioText(paired(figure{}, []float64{1}, []float64{2})); got != "0.50" {
		t.Errorf("one run: got %q", got)
	}
	if medianOf(1, "kill", "kills") != "one kill" || medianOf(3, "kill", "kills") != "median of 3 kills" {
		t.Error("medianOf")
	}
}
