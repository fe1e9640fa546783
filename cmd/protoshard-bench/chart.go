package main

import (
	"fmt"
	"html"
	"io"
	"math"
)

// relative is a ratio of a figure (protoshard / baseline) as
// "protoshard's performance relative to its baseline": 1 is parity, below
// 1 protoshard is slower (or bigger). For a figure where lower is better
// (latency, bytes) that is the inverse.
func relative(f figure, ratio float64) float64 {
	if f.HigherIsBetter {
		return ratio
	}
	return 1 / ratio
}

// writeSVG draws every figure as a horizontal bar of its ratio as
// relative() on a log scale from 1/1000 to 100, with parity marked, so
// that both a throughput and a latency row read "longer is better"; a
// whisker across the bar spans the runs' lowest to highest ratio.
func writeSVG(w io.Writer, rep *report) error {
	const (
		left, right, top = 560.0, 40.0, 50.0
		barH, gap        = 18.0, 8.0
		width            = 1100.0
		minLog, maxLog   = -3.0, 2.0
	)
	plot := width - left - right
	x := func(v float64) float64 {
		l := math.Log10(v)
		l = math.Max(minLog, math.Min(maxLog, l))
		return left + (l-minLog)/(maxLog-minLog)*plot
	}
	height := top + float64(len(rep.Figures))*(barH+gap) + 50
	p := func(format string, a ...any) error {
		_, err := fmt.Fprintf(w, format, a...)
		return err
	}
	if err := p(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", width, height); err != nil {
		return err
	}
	_ = p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	_ = p(`<text x="10" y="20" font-size="14" font-weight="bold">protoshard relative to its baseline, measured in the same run (log scale; 1 = parity; longer is better)</text>` + "\n")
	_ = p(`<text x="10" y="38" fill="#555">%s, %s/%s, %d CPUs%s; bar: the median of the runs' ratios, whisker: their lowest to highest</text>`+"\n", html.EscapeString(rep.GoVersion), rep.GOOS, rep.GOARCH, rep.CPUs, map[bool]string{true: ", -short", false: ""}[rep.Short])
	for e := minLog; e <= maxLog; e++ {
		gx := x(math.Pow(10, e))
		stroke := "#ddd"
		if e == 0 {
			stroke = "#333"
		}
		_ = p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", gx, top-6, gx, height-40, stroke)
		_ = p(`<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%s</text>`+"\n", gx, height-24, html.EscapeString(fmt.Sprintf("%gx", math.Pow(10, e))))
	}
	for i, f := range rep.Figures {
		y := top + float64(i)*(barH+gap)
		r := relative(f, f.Ratio)
		color := "#4a7ebb"
		if r < 1 {
			color = "#d9822b"
		}
		x0, x1 := x(1), x(r)
		if x1 < x0 {
			x0, x1 = x1, x0
		}
		label := fmt.Sprintf("%s: %s", f.Section, f.Workload)
		if len(label) > 85 {
			label = label[:82] + "..."
		}
		_ = p(`<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-8, y+barH-5, html.EscapeString(label))
		_ = p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", x0, y, math.Max(1, x1-x0), barH, color)
		if f.Reps > 1 {
			lo, hi := x(relative(f, f.RatioMin)), x(relative(f, f.RatioMax))
			mid := y + barH/2
			_ = p(`<path d="M%.1f %.1fV%.1fM%.1f %.1fH%.1fM%.1f %.1fV%.1f" stroke="#222" fill="none"/>`+"\n",
				lo, mid-4, mid+4, lo, mid, hi, hi, mid-4, mid+4)
		}
		_ = p(`<text x="%.1f" y="%.1f" fill="#222">%s</text>`+"\n", math.Max(x1, x(1))+4, y+barH-5, html.EscapeString(fmt.Sprintf("%.2gx", r)))
	}
	return p("</svg>\n")
}
