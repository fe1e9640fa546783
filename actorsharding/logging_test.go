package actorsharding_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/protoshard/protoshard/internal/testsupport"
	"github.com/protoshard/protoshard/testkit"
)

// maxInfoLinesPerPhase bounds what protoshard logs at info level on all
// nodes in one phase of a healthy cluster's life: membership changes and
// rebalance summaries, whatever the number of shards (100 here).
const maxInfoLinesPerPhase = 10

// A healthy cluster logs nothing per shard, entity, registration or state
// change at info level: not while two nodes start and their 100 shards are
// allocated, nor while a third node joins and the coordinator hands shards
// off to rebalance (about a hundred hand-offs in some thirty rounds, as
// nothing asks for the shards handed off), nor while it leaves again.
// Those lines are at debug level, with the states' names.
func TestHealthyClusterLogsNoLinePerShardAtInfo(t *testing.T) {
	var logs testsupport.Logs
	w := newLocalWorld(t)
	w.nodeOpts = append(w.nodeOpts, testkit.WithLogHandler(logs.Handler))
	mark := 0
	// phase checks protoshard's lines since the last phase and returns
	// those at info level.
	phase := func(name string) []testsupport.LogLine {
		t.Helper()
		lines := logs.Lines()
		var info []testsupport.LogLine
		for _, l := range lines[mark:] {
			if !isProtoshards(l) || l.Level < slog.LevelInfo {
				continue
			}
			info = append(info, l)
			if l.Level > slog.LevelInfo {
				t.Errorf("%s: a healthy cluster logged %s", name, l)
			}
			if _, ok := l.Attrs["shard"]; ok {
				t.Errorf("%s: a line per shard at info level: %s", name, l)
			}
			if _, ok := l.Attrs["entity"]; ok {
				t.Errorf("%s: a line per entity at info level: %s", name, l)
			}
		}
		if len(info) > maxInfoLinesPerPhase {
			t.Errorf("%s: %d info lines, want at most %d:\n%s", name, len(info), maxInfoLinesPerPhase, render(info))
		}
		t.Logf("%s: %d lines, %d of protoshard at info level", name, len(lines)-mark, len(info))
		mark = len(lines)
		return info
	}

	first := w.startNode(false)
	w.startNode(false)
	w.waitRegistered(2)
	phase("start")

	homesOf(t, first, w, entityIDs(1000), 0) // 1000 IDs hit all 100 shards
	if _, total := spread(w.coordinatorState()); total != 100 {
		t.Fatalf("%d shards allocated, want 100", total)
	}
	phase("allocation")

	w.startNode(false)
	w.waitBalanced(3)
	rebalanceDone := func() bool {
		return slices.ContainsFunc(logs.Lines()[mark:], func(l testsupport.LogLine) bool {
			return l.Message == "shard coordinator: rebalance done" && l.Level == slog.LevelInfo
		})
	}
	testkit.WaitFor(t, 30*time.Second, rebalanceDone, "no rebalance summary after the shards spread")
	info := phase("rebalance")
	for _, msg := range []string{"shard coordinator: rebalance started", "shard coordinator: rebalance done"} {
		if !slices.ContainsFunc(info, func(l testsupport.LogLine) bool { return l.Message == msg }) {
			t.Errorf("rebalance: no info line %q in\n%s", msg, render(info))
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := w.cluster.Running()[2].Leave(ctx); err != nil {
		t.Fatal(err)
	}
	homesOf(t, first, w, entityIDs(1000), 1)
	phase("leave")

	// What moved to debug level still names the states.
	all := logs.Lines()
	for _, want := range []struct{ msg, key, value string }{
		{"shard coordinator state change", "to", "active"},
		{"singleton manager state change", "to", "Oldest"},
		{"shard region started", "state", "active"},
	} {
		if !slices.ContainsFunc(all, func(l testsupport.LogLine) bool {
			return l.Level == slog.LevelDebug && l.Message == want.msg && l.Attrs[want.key] == want.value
		}) {
			t.Errorf("no debug line %q with %s=%s", want.msg, want.key, want.value)
		}
	}
}

// isProtoshards tells protoshard's log lines from proto.actor's, which go
// through the same logger.
func isProtoshards(l testsupport.LogLine) bool {
	return strings.HasPrefix(l.Func, "github.com/protoshard/protoshard/")
}

func render(lines []testsupport.LogLine) string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.String()
	}
	return strings.Join(out, "\n")
}
