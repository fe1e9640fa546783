package testkit

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/internal/childproc"
)

// A test whose nodes run in separate processes runs the test binary again,
// once per node, with StartProcess: the child runs the same test function,
// which finds itself a child through ThisProcess and plays the role it was
// given; the parent commands it over the child's stdin and reads its
// replies from its stdout. One proto.actor remote per process is what lets
// such a test run under the race detector (see the package documentation):
// each process sets grpc's global logger once, before any of its grpc
// goroutines reads it.

// The environment of a child: how ThisProcess knows it is one.
const (
	processRoleEnv      = "PROTOSHARD_TEST_PROCESS_ROLE"
	processNameEnv      = "PROTOSHARD_TEST_PROCESS_NAME"
	processConsulEnv    = "PROTOSHARD_TEST_PROCESS_CONSUL"
	processConsulTTLEnv = "PROTOSHARD_TEST_PROCESS_CONSUL_TTL"
)

const (
	// replyPrefix marks the child's replies among what else it writes to
	// stdout (the test framework's lines).
	replyPrefix = "protoshard-process: "
	// raceWarning opens each report of the race detector, on stderr.
	raceWarning = "WARNING: DATA RACE"
	// raceReportEnd closes it (and opens it, a line before the warning).
	raceReportEnd = "=================="
	// processExitTimeout bounds how long a child may take to end its test
	// once its stdin is closed (its node stops first) before it is killed.
	processExitTimeout = 60 * time.Second
	// processCleanupGrace is that bound in the test's cleanup: the test
	// has ended, so only what the child reported until then matters.
	processCleanupGrace = 10 * time.Second
	// outputTail is how many lines of a child's stdout and stderr are kept
	// for the failure message.
	outputTail = 60
	// raceReportsKept is how many race reports are kept whole.
	raceReportsKept = 3
)

// ProcessConfig describes a child process.
type ProcessConfig struct {
	// Name names the child in failure messages; the child reads it as
	// ChildProcess.Name.
	Name string
	// Role is what the child plays (ChildProcess.Role): the test decides.
	Role string
	// Consul, if set, is the backend whose agent the child's
	// ChildProcess.ConsulBackend connects to.
	Consul *ConsulBackend
}

// Process is the parent's handle on a child process started by
// StartProcess.
type Process struct {
	name   string
	proc   *childproc.Process
	stdin  io.WriteCloser
	stdout *outputLog
	stderr *outputLog

	mu      sync.Mutex
	replies []string
	replied chan struct{} // signalled when a reply is added

	endOnce sync.Once
}

// StartProcess runs the test binary again to run the calling test (t's
// test, matched exactly) as a child named and playing the role of cfg. The
// child's output is kept: the test fails (Errorf) when the child exits with
// a status other than 0 or its race detector reports a race, with the race
// reports and the tail of the output. The child is ended by Exit, or when
// the test ends.
func StartProcess(t testing.TB, cfg ProcessConfig) *Process {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatalf("testkit: finding the test binary to start %s: %v", cfg.Name, err)
	}
	args := []string{"-test.run=" + runPattern(t.Name()), "-test.count=1", "-test.v=true"}
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if deadline, ok := d.Deadline(); ok {
			// The child's own timeout panics with every goroutine's stack,
			// which the failure message then shows.
			args = append(args, "-test.timeout="+time.Until(deadline).Round(time.Second).String())
		}
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), processRoleEnv+"="+cfg.Role, processNameEnv+"="+cfg.Name)
	if cfg.Consul != nil {
		cmd.Env = append(cmd.Env, processConsulEnv+"="+cfg.Consul.Agent.Addr(), processConsulTTLEnv+"="+cfg.Consul.TTL.String())
	}
	p := &Process{name: cfg.Name, replied: make(chan struct{}, 1), stderr: &outputLog{}}
	p.stdout = &outputLog{reply: p.addReply}
	// Writers rather than pipes: the child's exit is seen only once all its
	// output was read, so a race reported as it exits is never missed.
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatalf("testkit: %s: %v", cfg.Name, err)
	}
	if p.proc, err = childproc.Start(cmd); err != nil {
		t.Fatalf("testkit: starting %s: %v", cfg.Name, err)
	}
	t.Cleanup(func() { p.end(t, processCleanupGrace) })
	return p
}

// runPattern is the -test.run pattern that matches the test named name
// (with its subtests' names, as t.Name gives them) and nothing else.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// Name is the child's name.
func (p *Process) Name() string { return p.name }

// Send sends command, one line, to the child (ChildProcess.Commands).
func (p *Process) Send(t testing.TB, command string) {
	t.Helper()
	if strings.Contains(command, "\n") {
		t.Fatalf("testkit: %s: a command is one line: %q", p.name, command)
	}
	if _, err := io.WriteString(p.stdin, command+"\n"); err != nil {
		t.Fatalf("testkit: %s: sending %q: %v\n%s", p.name, command, err, p.output())
	}
}

// Await returns the child's next reply (ChildProcess.Reply). It fails the
// test (Fatal) if none comes within timeout or the child exits first, so
// it must be called from the test's goroutine.
func (p *Process) Await(t testing.TB, timeout time.Duration) string {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		p.mu.Lock()
		if len(p.replies) > 0 {
			r := p.replies[0]
			p.replies = p.replies[1:]
			p.mu.Unlock()
			return r
		}
		p.mu.Unlock()
		select {
		case <-p.replied:
		case <-p.proc.Done():
			if p.hasReply() {
				continue
			}
			t.Fatalf("testkit: %s exited (%v) before it replied\n%s", p.name, p.proc.Err(), p.output())
		case <-timer.C:
			t.Fatalf("testkit: %s did not reply within %s\n%s", p.name, timeout, p.output())
		}
	}
}

// Call sends command and returns the child's next reply (see Await).
func (p *Process) Call(t testing.TB, command string, timeout time.Duration) string {
	t.Helper()
	p.Send(t, command)
	return p.Await(t, timeout)
}

func (p *Process) addReply(r string) {
	p.mu.Lock()
	p.replies = append(p.replies, r)
	p.mu.Unlock()
	select {
	case p.replied <- struct{}{}:
	default:
	}
}

func (p *Process) hasReply() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.replies) > 0
}

// Exit closes the child's stdin, which ends its Commands and so its test,
// waits until it exited (killing it after a while) and fails the test
// (Errorf) if it exited with a status other than 0 or reported a race.
// Later calls do nothing.
func (p *Process) Exit(t testing.TB) {
	t.Helper()
	p.end(t, processExitTimeout)
}

func (p *Process) end(t testing.TB, grace time.Duration) {
	t.Helper()
	p.endOnce.Do(func() {
		_ = p.stdin.Close()
		select {
		case <-p.proc.Done():
		case <-time.After(grace):
			t.Errorf("testkit: %s did not exit within %s of its stdin closing; killed", p.name, grace)
			p.proc.Stop(0)
		}
		err := p.proc.Err()
		if races := p.stderr.races(); races > 0 {
			t.Errorf("testkit: %s: the race detector reported %d data race(s) (exit: %v)\n%s", p.name, races, err, p.output())
		} else if err != nil {
			t.Errorf("testkit: %s exited: %v\n%s", p.name, err, p.output())
		}
	})
}

// output describes what the child wrote, for a failure message: its race
// reports and the tails of its stderr and stdout.
func (p *Process) output() string {
	var b strings.Builder
	for i, r := range p.stderr.raceReports() {
		fmt.Fprintf(&b, "--- %s: race report %d:\n%s\n", p.name, i+1, r)
	}
	fmt.Fprintf(&b, "--- %s: tail of stderr:\n%s\n", p.name, p.stderr.tailText())
	fmt.Fprintf(&b, "--- %s: tail of stdout:\n%s", p.name, p.stdout.tailText())
	return b.String()
}

// outputLog takes a child's stdout or stderr as its io.Writer: it keeps
// the last lines, counts and keeps the race detector's reports, and hands
// replies (lines with replyPrefix) to reply, if set.
type outputLog struct {
	reply func(string)

	mu      sync.Mutex
	partial []byte // a line not ended yet
	tail    []string
	nRaces  int
	reports []string
	inRace  *strings.Builder // the report being read
}

// Write implements io.Writer; exec copies the child's output to it from
// one goroutine.
func (l *outputLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	l.partial = append(l.partial, b...)
	var lines []string
	for {
		i := strings.IndexByte(string(l.partial), '\n')
		if i < 0 {
			break
		}
		lines = append(lines, string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	var replies []string
	for _, line := range lines {
		if r, ok := strings.CutPrefix(line, replyPrefix); ok && l.reply != nil {
			replies = append(replies, r)
			continue
		}
		l.addLine(line)
	}
	l.mu.Unlock()
	for _, r := range replies {
		l.reply(r)
	}
	return len(b), nil
}

func (l *outputLog) addLine(line string) {
	l.tail = append(l.tail, line)
	if len(l.tail) > outputTail {
		l.tail = l.tail[len(l.tail)-outputTail:]
	}
	switch {
	case strings.Contains(line, raceWarning):
		l.nRaces++
		if len(l.reports) < raceReportsKept {
			l.inRace = &strings.Builder{}
		}
	case l.inRace != nil && strings.HasPrefix(line, raceReportEnd):
		l.reports = append(l.reports, l.inRace.String())
		l.inRace = nil
		return
	}
	if l.inRace != nil {
		l.inRace.WriteString(line)
		l.inRace.WriteByte('\n')
	}
}

func (l *outputLog) races() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nRaces
}

func (l *outputLog) raceReports() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]string(nil), l.reports...)
	if l.inRace != nil { // cut off: the child was killed while reporting
		out = append(out, l.inRace.String())
	}
	return out
}

func (l *outputLog) tailText() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := append([]string(nil), l.tail...)
	if len(l.partial) > 0 {
		lines = append(lines, string(l.partial))
	}
	return strings.Join(lines, "\n")
}

// ChildProcess is a child's end of the link to the test that started it
// with StartProcess.
type ChildProcess struct {
	// Name is the name the parent gave the child.
	Name string
	// Role is the role the parent gave the child.
	Role string

	consulAddr string
	consulTTL  string
	commands   chan string
	mu         sync.Mutex // replies, one line each
}

// ThisProcess returns this process's link to its parent when StartProcess
// started it, else nil: a test that runs its nodes in child processes
// begins with it, to play the child's role when it is one.
func ThisProcess() *ChildProcess { return thisProcess() }

var thisProcess = sync.OnceValue(func() *ChildProcess {
	role := os.Getenv(processRoleEnv)
	if role == "" {
		return nil
	}
	c := &ChildProcess{
		Name:       os.Getenv(processNameEnv),
		Role:       role,
		consulAddr: os.Getenv(processConsulEnv),
		consulTTL:  os.Getenv(processConsulTTLEnv),
		commands:   make(chan string),
	}
	go func() {
		defer close(c.commands)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			c.commands <- sc.Text()
		}
	}()
	return c
})

// Commands are the parent's commands (Process.Send, Process.Call), one
// line each; the channel is closed when the parent ends the child
// (Process.Exit, or the parent's test ended).
func (c *ChildProcess) Commands() <-chan string { return c.commands }

// Reply sends the parent one reply (Process.Await, Process.Call): one
// line, so line breaks become spaces.
func (c *ChildProcess) Reply(format string, args ...any) {
	line := strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", " ")
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = fmt.Fprint(os.Stdout, replyPrefix+line+"\n")
}

// ConsulBackend returns a backend over the Consul agent of the parent's
// ProcessConfig.Consul; it has no Agent (the parent owns it). It fails the
// test (Fatal) when the parent gave none.
func (c *ChildProcess) ConsulBackend(t testing.TB) *ConsulBackend {
	t.Helper()
	if c.consulAddr == "" {
		t.Fatalf("testkit: %s: the parent gave no Consul agent (ProcessConfig.Consul)", c.Name)
	}
	ttl, err := time.ParseDuration(c.consulTTL)
	if err != nil {
		t.Fatalf("testkit: %s: Consul TTL %q: %v", c.Name, c.consulTTL, err)
	}
	cfg := api.DefaultConfig()
	cfg.Address, cfg.Scheme, cfg.Token = c.consulAddr, "http", ""
	client, err := api.NewClient(cfg)
	if err != nil {
		t.Fatalf("testkit: %s: Consul client: %v", c.Name, err)
	}
	return &ConsulBackend{TTL: ttl, client: client}
}

// Cluster returns the child's cluster over backend: it holds this
// process's one node, so it runs under the race detector too, and its
// StartNode fails the test (Fatal) when called a second time. Its nodes
// are named after the child.
func (c *ChildProcess) Cluster(t testing.TB, backend Backend) *Cluster {
	t.Helper()
	return newCluster(t, backend, c.Name)
}
