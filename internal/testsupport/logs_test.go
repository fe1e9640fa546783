package testsupport

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/protoshard/protoshard/testkit"
)

func TestLogsRecordEveryLevelWithTheLoggersAttributes(t *testing.T) {
	var logs Logs
	log := logs.Logger().With(slog.String("component", "x")).WithGroup("g").With(slog.Int("n", 1))
	log.Debug("quiet", slog.String("k", "v"))
	log.Info("loud", slog.Group("sub", slog.Bool("b", true)))
	logs.Logger().Warn("plain")

	got := make([]string, 0, 3)
	for _, l := range logs.Lines() {
		got = append(got, l.String())
	}
	want := []string{
		`DEBUG quiet component="x" g.k="v" g.n="1"`,
		`INFO loud component="x" g.n="1" g.sub.b="true"`,
		`WARN plain`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("recorded\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if f := logs.Lines()[0].Func; f != "github.com/protoshard/protoshard/internal/testsupport.TestLogsRecordEveryLevelWithTheLoggersAttributes" {
		t.Fatalf("Func = %q, want this test", f)
	}
}

func TestLogsPassOnWhatTheNextHandlerTakes(t *testing.T) {
	var logs Logs
	var out bytes.Buffer
	next := slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo})
	log := slog.New(logs.Handler(next)).With(slog.String("node", "a"))
	log.Debug("recorded only")
	log.Info("both")
	if n := len(logs.Lines()); n != 2 {
		t.Fatalf("recorded %d lines, want 2", n)
	}
	if s := out.String(); strings.Contains(s, "recorded only") || !strings.Contains(s, "msg=both node=a") {
		t.Fatalf("the next handler wrote %q", s)
	}
}

// A node started WithLogHandler(logs.Handler) records its system's logs, tagged with its name.
func TestWithLogHandlerRecordsTheNodesSystem(t *testing.T) {
	var logs Logs
	c := testkit.NewCluster(t, nil)
	n := c.StartNode(testkit.WithName("logged"), testkit.WithLogHandler(logs.Handler))
	n.System.Logger().Debug("hello")
	i := slices.IndexFunc(logs.Lines(), func(l LogLine) bool { return l.Message == "hello" })
	if i < 0 {
		t.Fatalf("no line hello in %v", logs.Lines())
	}
	if l := logs.Lines()[i]; l.Attrs["node"] != "logged" || l.Attrs["system"] != n.System.ID {
		t.Fatalf("line %s lacks the node's attributes", l)
	}
}
