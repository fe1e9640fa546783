package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/protoshard/protoshard/internal/raceflag"
)

// TestShortRun runs the example as `go run ./examples/sharding -short`
// does and checks the story it tells: the distributions before and after
// the join and the leave, and the final line saying nothing was lost.
func TestShortRun(t *testing.T) {
	if raceflag.Enabled {
		t.Skip("several proto.actor remotes in one process race on grpc's global logger; runs in the non-race pass")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := defaultConfig()
	cfg.entities = 300
	var out bytes.Buffer
	err := run(ctx, &out, cfg)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	story := out.String()
	for _, want := range []string{
		"3 nodes up",
		"shards balanced over 4 nodes",
		"node-d: ",
		"node-a left after",
		"the coordinator now runs on node-b",
		"shards balanced over 3 nodes",
	} {
		if !strings.Contains(story, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	// Three distributions: after round 1, after the join, after the leave.
	if got := strings.Count(story, "where the shards live:"); got != 3 {
		t.Errorf("%d distributions printed, want 3", got)
	}
	if !regexp.MustCompile(`(?m)^all \d+ messages answered; \d+ retries during hand-offs$`).MatchString(story) {
		t.Errorf("the output lacks the final line")
	}
}
