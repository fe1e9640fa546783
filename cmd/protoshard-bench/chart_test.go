package main

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
)

func TestWriteSVG(t *testing.T) {
	rep := &report{GoVersion: "go", GOOS: "linux", GOARCH: "amd64", CPUs: 2, Figures: []figure{
		{Section: "local", Workload: "throughput <&>", Protoshard: 50, Baseline: 100, HigherIsBetter: true},
		{Section: "latency", Workload: "p50", Protoshard: 200, Baseline: 100},
	}}
	var b bytes.Buffer
	if err := writeSVG(&b, rep); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	bars := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			bars++
		}
	}
	if bars != 3 { // the background and one bar per figure
		t.Fatalf("%d rects, want 3", bars)
	}
	for _, want := range []string{"0.5x", "throughput &lt;&amp;&gt;"} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("chart lacks %q", want)
		}
	}
	if relative(rep.Figures[1]) != 0.5 {
		t.Fatalf("a latency twice the baseline is 0.5x, got %v", relative(rep.Figures[1]))
	}
}
