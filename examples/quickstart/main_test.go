package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestQuickstart(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "balance of acc-42: 15\n"; got != want {
		t.Fatalf("printed %q, want %q", got, want)
	}
}

// TestREADMEShowsThisProgram: the README's sharding quickstart is this
// file, so what users copy compiles and runs as shown.
func TestREADMEShowsThisProgram(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	program, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Quickstart: cluster sharding\n")
	if !ok {
		t.Fatal(`README has no "## Quickstart: cluster sharding" section`)
	}
	_, block, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatal("the quickstart section has no Go code block")
	}
	block, _, ok = strings.Cut(block, "```\n")
	if !ok {
		t.Fatal("the quickstart's code block does not end")
	}
	if block != string(program) {
		t.Fatalf("README's quickstart differs from examples/quickstart/main.go; paste the file into the README.\nREADME:\n%s", block)
	}
}
