package main

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/protoshard/protoshard/internal/raceflag"
)

// TestRun runs the example and checks its story: the singleton starts on
// node-a, moves to node-b when node-a leaves, and none of the 8 messages
// (3 before, 3 sent during the hand-over, 2 after) is lost: node-a's
// singleton and node-b's together counted all 8.
func TestRun(t *testing.T) {
	if raceflag.Enabled {
		t.Skip("several proto.actor remotes in one process race on grpc's global logger; runs in the non-race pass")
	}
	var out bytes.Buffer
	err := run(&out)
	story := out.String()
	t.Log("\n" + story)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, want := range []string{"[singleton started on node-a]", "[singleton started on node-b]", "after the hand-over:"} {
		if !strings.Contains(story, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	stopped := regexp.MustCompile(`\[singleton on node-a stopped after (\d+) messages\]`).FindStringSubmatch(story)
	last := regexp.MustCompile(`node-c's proxy -> node-b \(message (\d+) here\) got "hello again from node-c"`).FindStringSubmatch(story)
	if stopped == nil || last == nil {
		t.Fatalf("the output lacks node-a's stop line or node-c's last answer from node-b")
	}
	onA, _ := strconv.Atoi(stopped[1])
	onB, _ := strconv.Atoi(last[1])
	if onA+onB != 8 {
		t.Errorf("node-a's singleton counted %d and node-b's %d messages: %d in all, want 8", onA, onB, onA+onB)
	}
}
