package main

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
)

func TestWriteSVG(t *testing.T) {
	rep := &report{GoVersion: "go", GOOS: "linux", GOARCH: "amd64", CPUs: 2, Figures: []figure{
		paired(figure{Section: "local", Workload: "throughput <&>", HigherIsBetter: true}, []float64{50}, []float64{100}),
		paired(figure{Section: "latency", Workload: "p50"}, []float64{200, 300, 150}, []float64{100, 100, 100}),
	}}
	var b bytes.Buffer
	if err := writeSVG(&b, rep); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	bars, whiskers := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			switch se.Name.Local {
			case "rect":
				bars++
			case "path":
				whiskers++
			}
		}
	}
	if bars != 3 { // the background and one bar per figure
		t.Fatalf("%d rects, want 3", bars)
	}
	if whiskers != 1 { // only the figure of several runs has a spread
		t.Fatalf("%d whiskers, want 1", whiskers)
	}
	for _, want := range []string{"0.5x", "throughput &lt;&amp;&gt;"} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("chart lacks %q", want)
		}
	}
	if r := relative(rep.Figures[1], rep.Figures[1].Ratio); r != 0.5 {
		t.Fatalf("a latency twice the baseline is 0.5x, got %v", r)
	}
}
