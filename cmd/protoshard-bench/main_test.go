package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/protoshard/protoshard/internal/consulagent"
	"github.com/protoshard/protoshard/internal/raceflag"
)

// TestMain lets the test binary play the peer of the remote, failover and
// grains-remote sections: the program runs os.Executable again with -role=<role> as the
// first argument, which here is this test binary.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && strings.HasPrefix(os.Args[1], "-role=") {
		cfg, err := parseFlags(os.Args[1:], os.Stderr)
		if err != nil {
			os.Stderr.WriteString("peer: " + err.Error() + "\n")
			os.Exit(2)
		}
		os.Exit(peerMain(cfg))
	}
	os.Exit(m.Run())
}

// TestShortRun runs the whole program in -short mode and checks that every
// figure was produced (positive and finite), not how fast anything is.
func TestShortRun(t *testing.T) {
	if raceflag.Enabled {
		t.Skip("several proto.actor remotes in one process race on grpc's global logger; runs in the non-race pass")
	}
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	cfg, err := parseFlags([]string{"-short", "-json", jsonPath}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	rep, err := run(ctx, &out, cfg)
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	// The figures each section must produce.
	// (the grains and grains-remote sections both add "vs grains" figures.)
	want := map[string]int{"local": 3, "latency": 3, "remote": 4, "vs grains": 6, "delivery": 6, "failover": 3, "recovery": 1, "memory": 1, "scale": 7, "peers": 4}
	// The delivery section's rows to another process are skipped without
	// Consul, its one-node rows are not.
	for _, section := range []string{"remote", "grains-remote", "delivery", "failover", "recovery"} {
		if _, err := consulagent.Binary(); err != nil {
			if _, ok := rep.Skipped[section]; !ok {
				t.Errorf("no Consul binary (%v), but the %s section was not skipped", err, section)
			}
			t.Logf("%s section skipped: %v", section, err)
		} else if why, ok := rep.Skipped[section]; ok {
			t.Errorf("a Consul binary is there, but the %s section was skipped: %s", section, why)
		}
	}
	// Grains against their own baseline: one node, and across processes.
	wantExtra := 6
	if _, err := consulagent.Binary(); err != nil {
		delete(want, "remote")
		delete(want, "failover")
		delete(want, "recovery")
		want["vs grains"] = 3 // the one-node figures only
		want["delivery"] = 3
		wantExtra = 3
	}
	got := map[string]int{}
	for _, f := range rep.Figures {
		got[f.Section]++
		if !validFigure(f) || f.Unit == "" || f.BaselineName == "" {
			t.Errorf("bad figure: %+v", f)
		}
		// The throughput and latency figures are medians of cfg.reps
		// interleaved runs (failover, recovery and memory count their own).
		if contains([]string{"local", "latency", "remote", "vs grains", "delivery", "peers"}, f.Section) && f.Reps != cfg.reps {
			t.Errorf("%s: %s: %d runs, want %d", f.Section, f.Workload, f.Reps, cfg.reps)
		}
	}
	for section, n := range want {
		if got[section] != n {
			t.Errorf("section %q produced %d figures, want %d", section, got[section], n)
		}
	}
	if len(rep.Extra) != wantExtra {
		t.Errorf("%d grain reference figures, want %d", len(rep.Extra), wantExtra)
	}
	for _, f := range rep.Extra {
		if !validFigure(f) || f.Reps != cfg.reps {
			t.Errorf("bad grain figure: %+v", f)
		}
	}
	if len(rep.Failed) > 0 {
		t.Errorf("failed sections: %v", rep.Failed)
	}
	if !bytes.Contains(out.Bytes(), []byte("| workload | protoshard | baseline | ratio |")) {
		t.Error("no table in the output")
	}

	if !bytes.Contains(out.Bytes(), []byte("median of 3 runs")) {
		t.Error("the table does not say the figures are medians of the runs")
	}

	// The JSON file holds the same figures.
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var fromFile report
	if err := json.Unmarshal(b, &fromFile); err != nil {
		t.Fatalf("%s: %v", jsonPath, err)
	}
	if len(fromFile.Figures) != len(rep.Figures) || len(fromFile.Extra) != len(rep.Extra) {
		t.Errorf("the JSON file has %d+%d figures, the run %d+%d", len(fromFile.Figures), len(fromFile.Extra), len(rep.Figures), len(rep.Extra))
	}
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-sections", "local,grains"}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.sections["local"] || !cfg.sections["grains"] || cfg.sections["memory"] || cfg.memEntities != 1_000_000 || cfg.reps != 5 {
		t.Errorf("parsed %+v", cfg)
	}
	if cfg.deliveryMessages != 200_000 || cfg.deliverySamples != 5000 {
		t.Errorf("delivery: %d messages, %d samples, want 200000, 5000", cfg.deliveryMessages, cfg.deliverySamples)
	}
	if cfg, err := parseFlags([]string{"-short"}, os.Stderr); err != nil || cfg.reps != 3 || cfg.deliveryMessages != 25_000 || cfg.deliverySamples != 500 {
		t.Errorf("-short: %d runs, %d delivery messages, %d samples (%v), want 3, 25000, 500", cfg.reps, cfg.deliveryMessages, cfg.deliverySamples, err)
	}
	if cfg.scaleRegions != 100 || cfg.scaleShards != 10_000 || cfg.scaleFailover != 50 {
		t.Errorf("scale: %d regions, %d shards, failover on %d regions, want 100, 10000, 50", cfg.scaleRegions, cfg.scaleShards, cfg.scaleFailover)
	}
	if cfg, err := parseFlags([]string{"-short"}, os.Stderr); err != nil || cfg.scaleRegions != 20 || cfg.scaleShards != 2000 || cfg.scaleFailover != 10 || cfg.scaleRounds != 1 {
		t.Errorf("-short scale: %d regions, %d shards, failover on %d regions, %d rounds (%v), want 20, 2000, 10, 1", cfg.scaleRegions, cfg.scaleShards, cfg.scaleFailover, cfg.scaleRounds, err)
	}
	if _, err := parseFlags([]string{"-scale-failover-regions", "1"}, &bytes.Buffer{}); err == nil {
		t.Error("a failover cluster of one region was accepted")
	}
	if cfg, err := parseFlags([]string{"-short", "-reps", "7"}, os.Stderr); err != nil || cfg.reps != 7 {
		t.Errorf("-short -reps 7: %d runs (%v), want 7", cfg.reps, err)
	}
	if _, err := parseFlags([]string{"-sections", "nope"}, &bytes.Buffer{}); err == nil {
		t.Error("an unknown section was accepted")
	}
	if cfg, err := parseFlags(nil, os.Stderr); err != nil || !cfg.sections["peers"] || cfg.sections["soak"] {
		t.Errorf("all: %v (%v), want the peers section and not the soak", cfg.sections, err)
	}
	if cfg, err := parseFlags([]string{"-sections", "soak", "-soak-duration", "3m"}, os.Stderr); err != nil || !cfg.sections["soak"] || cfg.soakDuration != 3*time.Minute || cfg.soakChurn != 40*time.Second {
		t.Errorf("-sections soak: %v, %v, churn %v (%v)", cfg.sections, cfg.soakDuration, cfg.soakChurn, err)
	}
}
