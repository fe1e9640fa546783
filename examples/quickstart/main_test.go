package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// maxLogLines is "a few": a healthy quickstart logs no line at its warning
// level, but a shutdown race may drop a protocol message with a warning.
const maxLogLines = 2

// TestQuickstart: the program prints its result, and around it at most a
// few log lines.
func TestQuickstart(t *testing.T) {
	var out bytes.Buffer
	// A file, not a buffer: the actors' goroutines write to it.
	logFile, err := os.CreateTemp(t.TempDir(), "logs")
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	if err := run(&out, logFile); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "balance of acc-42: 15\n"; got != want {
		t.Fatalf("printed %q, want %q", got, want)
	}
	logs, err := os.ReadFile(logFile.Name())
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(logs)), "\n"); len(logs) > 0 && len(lines) > maxLogLines {
		t.Fatalf("logged %d lines, want at most %d:\n%s", len(lines), maxLogLines, logs)
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
