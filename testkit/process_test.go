package testkit

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/protoshard/protoshard/internal/raceflag"
)

// errorRecorder is a testing.TB that records Errorf instead of failing,
// so that a test can check the failures Process reports.
type errorRecorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *errorRecorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *errorRecorder) recorded() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.errors, "\n")
}

// The harness of child processes: a child answers commands, and a child
// that fails, or (under -race) has a data race, fails its parent's test.
func TestProcess(t *testing.T) {
	if child := ThisProcess(); child != nil {
		playChild(t, child)
		return
	}
	cases := []struct {
		role string
		want string // in the parent's failure; "" for none
		race bool   // only with the race detector
	}{
		{role: "echo"},
		{role: "fail", want: "exited: exit status 1"},
		{role: "race", want: "the race detector reported 1 data race(s)", race: true},
	}
	for _, tc := range cases {
		if tc.race && !raceflag.Enabled {
			continue
		}
		rec := &errorRecorder{TB: t}
		p := StartProcess(rec, ProcessConfig{Name: "child-" + tc.role, Role: tc.role})
		if got := p.Await(t, time.Minute); got != "ready "+tc.role {
			t.Fatalf("%s: first reply %q", tc.role, got)
		}
		if got := p.Call(t, "echo one two", time.Minute); got != "one two" {
			t.Fatalf("%s: echo replied %q", tc.role, got)
		}
		p.Exit(rec)
		got := rec.recorded()
		switch {
		case tc.want == "" && got != "":
			t.Errorf("%s: the parent failed: %s", tc.role, got)
		case tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("%s: the parent's failure %q does not say %q", tc.role, got, tc.want)
		}
		if tc.race && !strings.Contains(got, "playChild") {
			t.Errorf("race: the failure does not show the race report: %s", got)
		}
	}
}

// playChild echoes commands ("echo <text>" replies text) until the parent
// ends it; then, as its role says, it fails its test or has a data race.
func playChild(t *testing.T, child *ChildProcess) {
	child.Reply("ready %s", child.Role)
	for cmd := range child.Commands() {
		text, ok := strings.CutPrefix(cmd, "echo ")
		if !ok {
			t.Fatalf("unknown command %q", cmd)
		}
		child.Reply("%s", text)
	}
	switch child.Role {
	case "fail":
		t.Fatal("told to fail")
	case "race":
		var n int
		done := make(chan struct{})
		go func() {
			n++ // the data race
			close(done)
		}()
		n++
		<-done
	}
}
