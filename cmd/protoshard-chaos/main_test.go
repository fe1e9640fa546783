package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/protoshard/protoshard/internal/consulagent"
	"github.com/protoshard/protoshard/internal/raceflag"
)

// TestMain lets the test binary play the processes of a run: the
// orchestrator runs os.Executable again with -role=<role> as the first
// argument, which here is this test binary.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && strings.HasPrefix(os.Args[1], "-role=") {
		cfg, err := parseFlags(os.Args[1:], os.Stderr)
		if err != nil {
			os.Stderr.WriteString("chaos process: " + err.Error() + "\n")
			os.Exit(2)
		}
		os.Exit(roleMain(cfg))
	}
	os.Exit(m.Run())
}

// TestShortRun runs the program in -short mode: every fault once against
// four node processes, a load generator and a real Consul agent. It
// asserts sharding's promises (no overlapping activations or singletons,
// no unaccounted message, per-sender order kept), durable state's (no
// acknowledged update lost but to a Consul wipe, no stale write accepted)
// and that every fault was injected. The partition fault needs root and network namespaces: without
// them it is skipped with the reason, except in CI (CI=true), where that
// fails the test.
func TestShortRun(t *testing.T) {
	rep := shortRun(t)
	f := rep.Findings
	if f.Unaccounted != 0 {
		t.Errorf("%d unaccounted messages", f.Unaccounted)
	}
	if f.OrderViolations != 0 {
		t.Errorf("%d order violations", f.OrderViolations)
	}
	if f.Delivered == 0 {
		t.Errorf("sent %d, delivered %d: the load did not run", f.Sent, f.Delivered)
	}
	st := rep.State
	switch {
	case st == nil:
		t.Error("no durable state findings")
	case st.Lost != 0 || st.StaleAccepted != 0 || st.RevisionClashes != 0 || st.Acknowledged == 0 || st.FinalError != "":
		t.Errorf("durable state: %d acknowledged, %d lost, %d stale writes accepted, %d revision clashes, final records: %q",
			st.Acknowledged, st.Lost, st.StaleAccepted, st.RevisionClashes, st.FinalError)
	}
	if !t.Failed() {
		t.Logf("%d sent, %d delivered, %d dropped, %d lost to crashes", f.Sent, f.Delivered, f.Dropped, f.LostToCrash)
		t.Logf("durable state: %d updates acknowledged, %d saves, %d fenced refusals, %d lost to Consul wipes",
			st.Acknowledged, st.Saves, st.Fenced, st.LostToWipe)
	}
}

// TestShortReliableRun runs the program in -short -reliable mode: the same
// faults, with the senders sending through reliable delivery to entities
// that store their progress with their effects. Every message accepted is
// applied exactly once, in order, and none is left unconfirmed.
func TestShortReliableRun(t *testing.T) {
	rep := shortRun(t, "-reliable")
	rel := rep.Reliable
	if rel == nil {
		t.Fatal("a reliable run without reliable findings")
	}
	if rel.Lost != 0 || rel.Twice != 0 || rel.Gaps != 0 {
		t.Errorf("%d lost, %d processed twice, %d gaps", rel.Lost, rel.Twice, rel.Gaps)
	}
	if rel.UnconfirmedAtEnd != 0 {
		t.Errorf("%d messages unconfirmed at the end (-1: unknown)", rel.UnconfirmedAtEnd)
	}
	if rel.Sent == 0 || rel.Applied != int64(rel.Sent) {
		t.Errorf("%d accepted, %d applied", rel.Sent, rel.Applied)
	}
	if !t.Failed() {
		t.Logf("%d accepted and applied once, %d resent, %d duplicates discarded, %d fenced incarnations",
			rel.Sent, rel.Resent, rel.DuplicatesDropped, rel.Fenced)
	}
}

// shortRun runs the program with -short and args, and checks what every
// run must show: no overlapping activations or singletons, messages sent,
// every fault injected, under 3 minutes, and the JSON file matching the
// report.
func shortRun(t *testing.T, args ...string) *Report {
	t.Helper()
	if testing.Short() {
		t.Skip("a chaos run of one to three minutes with Consul and six processes")
	}
	if raceflag.Enabled {
		t.Skip("the run's processes would be race-instrumented copies of this binary, too slow for its timing; runs in the non-race pass")
	}
	consulagent.RequireBinary(t)
	ci := os.Getenv("CI") == "true"
	if why := labUnavailable(); why != nil {
		if ci {
			t.Fatalf("the partition fault needs root and network namespaces (ip netns), which CI must provide: %v", why)
		}
		t.Logf("the partition fault will be skipped: it needs root and network namespaces (ip netns): %v", why)
	}
	// The ledgers and logs outlive a failed run, for the diagnosis (a
	// passing run's are removed).
	dir, err := os.MkdirTemp("", "protoshard-chaos-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the run's ledgers and logs are kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	jsonPath := filepath.Join(dir, "report.json")
	cfg, err := parseFlags(append([]string{"-short", "-json", jsonPath, "-dir", filepath.Join(dir, "run")}, args...), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	// Generous: the machine is shared, and a fault the cluster does not
	// recover from waits out its probe deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	var out bytes.Buffer
	began := time.Now()
	rep, err := run(ctx, &out, cfg)
	took := time.Since(began)
	if err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d, output:\n%s", rep.Seed, out.String())
		} else {
			t.Logf("seed %d, took %v", rep.Seed, took.Round(time.Second))
		}
	})
	f := rep.Findings
	if f.OverlappingActivations != 0 {
		t.Errorf("%d overlapping activations (%d entities)", f.OverlappingActivations, f.EntitiesWithOverlap)
	}
	if f.OverlappingSingletons != 0 {
		t.Errorf("%d overlapping singletons", f.OverlappingSingletons)
	}
	if f.Sent == 0 {
		t.Errorf("no message sent: the load did not run")
	}
	injected := map[string]bool{}
	for _, ft := range rep.Faults {
		switch {
		case ft.Error == "":
			injected[ft.Kind] = true
		case needsLab(ft.Kind) && rep.Skipped[ft.Kind] != "" && !ci:
			t.Logf("fault %d (%s) skipped: %s", ft.N, ft.Kind, ft.Error)
			injected[ft.Kind] = true
		default:
			t.Errorf("fault %d (%s) was not injected: %s", ft.N, ft.Kind, ft.Error)
		}
	}
	for _, kind := range faultKinds {
		if !injected[kind] {
			t.Errorf("no %s fault was injected", kind)
		}
	}
	for _, ft := range rep.Faults {
		if ft.Singleton != nil {
			t.Logf("fault %d (%s): singleton %s", ft.N, ft.Kind, ft.Singleton)
		}
	}
	if took > 3*time.Minute {
		t.Errorf("the -short run took %v, want under 3 minutes", took.Round(time.Second))
	}
	if len(rep.Failures) > 0 {
		t.Errorf("the run failed: %q", rep.Failures)
	}

	// Judging the ledgers again (-analyze) gives the same findings, the
	// run's lease and the singleton's moves.
	again, err := reanalyze(io.Discard, config{ttl: cfg.ttl}, rep.Dir)
	if err != nil {
		t.Fatalf("judging the ledgers again: %v", err)
	}
	if again.Findings.Counts != f.Counts || again.Settings.Lease != rep.Settings.Lease {
		t.Errorf("judged again: %+v, lease %q; the run: %+v, lease %q", again.Findings.Counts, again.Settings.Lease, f.Counts, rep.Settings.Lease)
	}
	// A skipped fault left no record: match the faults by number.
	byN := map[int]*Fault{}
	for _, ft := range again.Faults {
		byN[ft.N] = ft
	}
	for _, ft := range rep.Faults {
		if ft.Singleton == nil {
			continue
		}
		if a := byN[ft.N]; a == nil || a.Singleton == nil || *a.Singleton != *ft.Singleton {
			t.Errorf("fault %d: singleton %v; judged again: %+v", ft.N, ft.Singleton, a)
		}
	}

	// The JSON file holds the same report.
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var fromFile Report
	if err := json.Unmarshal(b, &fromFile); err != nil {
		t.Fatalf("%s: %v", jsonPath, err)
	}
	if fromFile.Findings.Counts != f.Counts || len(fromFile.Faults) != len(rep.Faults) || fromFile.Seed != rep.Seed ||
		(rep.Reliable != nil) != (fromFile.Reliable != nil) {
		t.Errorf("the JSON file differs from the run's report")
	}
	return rep
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-short"}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.entities != 400 || cfg.duration != 0 || cfg.nodes != 4 || cfg.senders != 3 || cfg.seed == 0 {
		t.Errorf("-short gave %+v", cfg)
	}
	cfg, err = parseFlags([]string{"-seed", "7", "-entities", "50"}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.entities != 50 || cfg.duration != 5*time.Minute || cfg.seed != 7 || cfg.quiet != 15*time.Second || cfg.reliable ||
		cfg.lease != leaseCAS || cfg.shardLease {
		t.Errorf("defaults gave %+v", cfg)
	}
	if cfg.stateEntities != 20 || cfg.stateRate != 10 {
		t.Errorf("durable state defaults: %d entities, %d updates a second", cfg.stateEntities, cfg.stateRate)
	}
	if cfg, err = parseFlags([]string{"-reliable"}, os.Stderr); err != nil || !cfg.reliable || cfg.stateEntities != 0 {
		t.Errorf("-reliable gave %+v, %v", cfg, err)
	}
	if cfg, err = parseFlags([]string{"-lease", leaseSession, "-shard-lease"}, os.Stderr); err != nil || cfg.lease != leaseSession || !cfg.shardLease {
		t.Errorf("-lease %s -shard-lease gave %+v, %v", leaseSession, cfg, err)
	}
	for _, bad := range [][]string{{"-nodes", "1"}, {"-rate", "0"}, {"-ttl", "10ms"}, {"-role=node"}, {"extra"},
		{"-lease", "etcd"}, {"-lease", leaseNone, "-shard-lease"}, {"-state-entities", "1000"}, {"-state-rate", "0"}} {
		if _, err := parseFlags(bad, &bytes.Buffer{}); err == nil {
			t.Errorf("%v was accepted", bad)
		}
	}
}
