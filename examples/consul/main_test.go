package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/protoshard/protoshard/internal/consulagent"
)

// TestThreeProcesses runs the example as README.md tells: three node
// processes against one Consul dev agent, node-2 sending requests. It waits
// for the shards to spread over all three nodes, kills node-1 (the oldest:
// it runs the coordinator) with SIGKILL, waits until the cluster view shows
// the two others and node-2's requests are answered again, then stops node-3
// and node-2 together with SIGTERM (a graceful leave of the whole cluster),
// waiting for each to exit. It asserts on the printed events only, with
// generous deadlines.
func TestThreeProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Consul and three processes")
	}
	agent := consulagent.Start(t)

	bin := filepath.Join(t.TempDir(), "consul-example")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	start := func(name string, args ...string) *proc {
		t.Helper()
		return startProc(t, bin, append([]string{"-consul", agent.Addr(), "-name", name, "-entities", "300", "-stats", "1s"}, args...)...)
	}
	// One after the other, so that node-1 is the oldest (the coordinator).
	n1 := start("node-1")
	n1.waitLine(t, 0, 60*time.Second, "node-1 joined", func(l string) bool { return strings.Contains(l, "joined as member") })
	n2 := start("node-2", "-send", "100")
	n3 := start("node-3")

	// The shards spread over all three nodes, and node-2's requests are
	// answered.
	n2.waitLine(t, 0, 90*time.Second, "a cluster view with shards on 3 nodes", func(l string) bool {
		v, ok := parseView(l)
		return ok && len(v) == 3 && v["node-1"] > 0 && v["node-2"] > 0 && v["node-3"] > 0
	})
	n2.waitLine(t, 0, 60*time.Second, "answered requests", func(l string) bool {
		a, _, ok := parseSent(l)
		return ok && a > 0
	})

	// A crash: node-1 (the coordinator) is killed.
	n1.kill(t, syscall.SIGKILL)
	n1.wait(t, 30*time.Second)
	mark := n2.lineCount()
	t.Logf("node-1 killed; node-2's output from line %d on", mark)
	view := n2.waitLine(t, mark, 90*time.Second, "a cluster view of node-2 and node-3 only", func(l string) bool {
		v, ok := parseView(l)
		return ok && len(v) == 2 && v["node-2"] > 0 && v["node-3"] > 0
	})
	n2.waitLine(t, view, 60*time.Second, "answered requests without failures after the crash", func(l string) bool {
		a, f, ok := parseSent(l)
		return ok && a > 0 && f == 0
	})

	// The last two nodes stop together (SIGTERM to both, node-2 runs the
	// coordinator): nobody is left to take the shards, so each region
	// stops its own shards instead of waiting for a hand-off, and both
	// leave gracefully, well before their graceful-shutdown timeout.
	for _, p := range []*proc{n3, n2} {
		p.kill(t, syscall.SIGTERM)
	}
	for _, p := range []*proc{n3, n2} {
		if err := p.wait(t, 90*time.Second); err != nil {
			t.Errorf("%s exited with %v", p.name, err)
		}
		p.waitLine(t, 0, 5*time.Second, "the graceful leave", func(l string) bool { return strings.Contains(l, "left the cluster after") })
	}
}

var (
	viewRE = regexp.MustCompile(`cluster: \d+ nodes, \d+ shards: (.*) \[coordinator on`)
	sentRE = regexp.MustCompile(`sent: answered=(\d+) failed=(\d+)`)
)

// parseView returns the shards per node of a "cluster:" line.
func parseView(line string) (map[string]int, bool) {
	m := viewRE.FindStringSubmatch(line)
	if m == nil {
		return nil, false
	}
	v := map[string]int{}
	for _, part := range strings.Fields(m[1]) {
		name, count, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.SplitN(count, "(", 2)[0])
		if err != nil {
			return nil, false
		}
		v[name] = n
	}
	return v, true
}

// parseSent returns the answered and failed counts of a "sent:" line.
func parseSent(line string) (answered, failed int, ok bool) {
	m := sentRE.FindStringSubmatch(line)
	if m == nil {
		return 0, 0, false
	}
	answered, _ = strconv.Atoi(m[1])
	failed, _ = strconv.Atoi(m[2])
	return answered, failed, true
}

// proc is one node process; it keeps every line the node printed.
type proc struct {
	name string
	cmd  *exec.Cmd

	mu     sync.Mutex
	lines  []string
	done   chan struct{} // closed when the process exited and its output was read
	err    error
	stderr *os.File
}

func startProc(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	name := args[3]
	errPath := filepath.Join(t.TempDir(), name+".stderr")
	errFile, err := os.Create(errPath)
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{}), stderr: errFile}
	p.cmd.Stderr = errFile
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
		err := p.cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		_ = errFile.Close()
		if t.Failed() {
			p.mu.Lock()
			lines := p.lines[max(0, len(p.lines)-40):]
			p.mu.Unlock()
			stderr, _ := os.ReadFile(errPath)
			t.Logf("%s: last stdout lines:\n%s\nstderr:\n%s", name, strings.Join(lines, "\n"), stderr)
		}
	})
	return p
}

func (p *proc) lineCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.lines)
}

// waitLine waits for a line at index from or later that matches, and
// returns the index after it. It fails the test after timeout or when the
// process exits without printing one.
func (p *proc) waitLine(t *testing.T, from int, timeout time.Duration, what string, match func(string) bool) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		p.mu.Lock()
		for i := from; i < len(p.lines); i++ {
			if match(p.lines[i]) {
				t.Logf("%s: %s", what, p.lines[i])
				p.mu.Unlock()
				return i + 1
			}
		}
		from = len(p.lines)
		p.mu.Unlock()
		select {
		case <-p.done:
			p.mu.Lock()
			exited := len(p.lines) == from
			p.mu.Unlock()
			if exited {
				t.Fatalf("%s exited (%v) without printing %s", p.name, p.err, what)
			}
			continue
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s printed no %s within %v", p.name, what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *proc) kill(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to %s: %v", sig, p.name, err)
	}
}

// wait waits for the process to exit and returns its exit error.
func (p *proc) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.err
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %v", p.name, timeout)
		return fmt.Errorf("%s still running", p.name)
	}
}

// TestCLISampleUsesThisExample: the CLI sample of docs/operations.md runs
// against this example, so its service, cluster and type names are this
// example's.
func TestCLISampleUsesThisExample(t *testing.T) {
	page, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(page), "\n## CLI\n")
	if !ok {
		t.Fatal(`docs/operations.md has no "## CLI" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	n := 0
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "$ protoshard ") {
			continue
		}
		n++
		fields := strings.Fields(line)
		for i, f := range fields[:len(fields)-1] {
			want := ""
			switch f {
			case "-service", "-cluster":
				want = serviceName
			case "-type":
				want = typeName
			}
			if want != "" && fields[i+1] != want {
				t.Errorf("docs/operations.md: %q: %s %s, but examples/consul uses %s", line, f, fields[i+1], want)
			}
		}
		if !strings.Contains(line, "-service "+serviceName) && !strings.Contains(line, "-cluster "+serviceName) {
			t.Errorf("docs/operations.md: %q names neither the example's service nor its cluster", line)
		}
	}
	if n == 0 {
		t.Fatal("the CLI section of docs/operations.md runs no protoshard command")
	}
}
