// Package consulagent starts a throwaway Consul dev agent for a test.
//
// The agent listens on free loopback ports only, logs to a file in the test's
// temporary directory (its tail is printed when the test fails) and is stopped
// by t.Cleanup. It is a single in-memory server (`consul agent -dev`): a
// Restart loses every registration, KV key and session, which is exactly what
// tests of "Consul lost its state" want.
//
// The binary is found through PROTOSHARD_CONSUL, then the cache that
// scripts/install-consul.sh fills, then PATH. Without one, the test is
// skipped, except in CI (CI=true) where a missing binary is a failure.
package consulagent

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/internal/childproc"
)

// Version is the Consul version scripts/install-consul.sh installs.
const Version = "v1.20.6"

// startTimeout bounds how long a start may take until a leader is elected.
// A dev agent needs a second or two, but a loaded CI machine may be slow.
const startTimeout = 60 * time.Second

// stopTimeout bounds a graceful stop before the process is killed.
const stopTimeout = 10 * time.Second

// Binary returns the path of the Consul binary to use: $PROTOSHARD_CONSUL,
// else $PROTOSHARD_CACHE/bin/consul-<Version> (PROTOSHARD_CACHE defaulting to
// ${XDG_CACHE_HOME:-$HOME/.cache}/protoshard, as in scripts/install-consul.sh),
// else consul on PATH. It returns an error when none is usable.
func Binary() (string, error) {
	if p := os.Getenv("PROTOSHARD_CONSUL"); p != "" {
		if err := executable(p); err != nil {
			return "", fmt.Errorf("PROTOSHARD_CONSUL=%s: %w", p, err)
		}
		return p, nil
	}
	var tried []string
	if cache := cacheDir(); cache != "" {
		p := filepath.Join(cache, "bin", "consul-"+Version)
		if executable(p) == nil {
			return p, nil
		}
		tried = append(tried, p)
	}
	if p, err := exec.LookPath("consul"); err == nil {
		return p, nil
	}
	tried = append(tried, "consul on PATH")
	return "", fmt.Errorf("no Consul binary (tried PROTOSHARD_CONSUL, %v)", tried)
}

// cacheDir mirrors CACHE in scripts/install-consul.sh.
func cacheDir() string {
	if c := os.Getenv("PROTOSHARD_CACHE"); c != "" {
		return c
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "protoshard")
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}

// RequireBinary returns the Consul binary or ends the test: Fatalf in CI
// (CI=true), where a missing binary is a broken set-up, Skipf elsewhere.
func RequireBinary(t testing.TB) string {
	t.Helper()
	p, err := Binary()
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("consulagent: %v; CI must provide Consul (run scripts/install-consul.sh)", err)
	}
	t.Skipf("consulagent: %v; run scripts/install-consul.sh to run this test", err)
	return ""
}

// Agent is a running (or stopped) Consul dev agent owned by one test.
type Agent struct {
	bin     string
	logPath string
	ports   ports

	mu     sync.Mutex
	proc   *childproc.Process // nil while stopped
	starts int
	client *api.Client
}

type ports struct {
	http, serfLAN, server int
}

// Start starts a dev agent on free loopback ports and waits until it has
// elected itself leader. The agent is stopped when the test ends.
func Start(t testing.TB) *Agent {
	t.Helper()
	bin := RequireBinary(t)
	a := &Agent{
		bin:     bin,
		logPath: filepath.Join(t.TempDir(), "consul.log"),
	}
	// Registered before the first start so that a failed start is cleaned up
	// too. It runs before t.TempDir's own clean-up (LIFO), so the log is
	// still there to be printed.
	t.Cleanup(func() {
		a.Stop()
		if t.Failed() {
			t.Logf("consulagent: tail of %s:\n%s", a.logPath, a.LogTail(60))
		}
	})
	if err := a.launch(func(msg string) { t.Log(msg) }); err != nil {
		t.Fatalf("%v\nlog tail:\n%s", err, a.LogTail(60))
	}
	return a
}

// Launch is Start for a program rather than a test (the benchmark): it
// starts a dev agent of the Consul binary bin on free loopback ports,
// logging to logPath, and waits until it is ready. The caller stops it
// with Stop.
func Launch(bin, logPath string) (*Agent, error) {
	a := &Agent{bin: bin, logPath: logPath}
	if err := a.launch(func(string) {}); err != nil {
		return nil, fmt.Errorf("%w; log tail:\n%s", err, a.LogTail(30))
	}
	return a, nil
}

// launch picks ports and starts the agent. A port picked free can be taken
// by another process (other test binaries run in parallel) before Consul
// binds it; Consul then exits at once. New ports are picked for the next
// attempt, and retrying says why.
func (a *Agent) launch(retrying func(msg string)) error {
	for attempt := 1; ; attempt++ {
		p, err := freePorts()
		if err != nil {
			return fmt.Errorf("consulagent: picking ports: %w", err)
		}
		a.ports = p
		cfg := api.DefaultConfig()
		cfg.Address = a.Addr()
		cfg.Scheme = "http"
		cfg.Token = ""
		if a.client, err = api.NewClient(cfg); err != nil {
			return fmt.Errorf("consulagent: client: %w", err)
		}
		err = a.start()
		if err == nil {
			return nil
		}
		if !errors.Is(err, errExitedDuringStart) || attempt == startAttempts {
			return fmt.Errorf("consulagent: %w (attempt %d)", err, attempt)
		}
		retrying(fmt.Sprintf("consulagent: start attempt %d failed (%v); retrying on other ports", attempt, err))
	}
}

// startAttempts bounds the tries of Start and Launch on fresh ports.
const startAttempts = 3

// errExitedDuringStart: the agent process ended before it was ready, most
// often because one of its ports was taken meanwhile.
var errExitedDuringStart = errors.New("consul exited during start")

// Addr returns the agent's HTTP address (host:port).
func (a *Agent) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(a.ports.http))
}

// Client returns an API client for the agent. It keeps working across
// restarts (same address).
func (a *Agent) Client() *api.Client { return a.client }

// LogPath returns the path of the agent's log file (all starts append to it).
func (a *Agent) LogPath() string { return a.logPath }

// Running reports whether the agent process is running.
func (a *Agent) Running() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.proc != nil && !a.proc.Exited()
}

// Stop stops the agent (SIGTERM, then SIGKILL after a grace period) and waits
// for the process to exit. Stopping a stopped agent does nothing.
func (a *Agent) Stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.proc == nil {
		return
	}
	a.proc.Stop(stopTimeout)
	a.proc = nil
}

// Kill kills the agent at once (SIGKILL) and waits for the process to exit.
func (a *Agent) Kill() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.proc == nil {
		return
	}
	a.proc.Stop(0)
	a.proc = nil
}

// Restart stops the agent if it runs and starts it again on the same ports.
// A dev agent keeps nothing: registrations, KV and sessions are lost, and the
// Raft index starts again from a small number.
func (a *Agent) Restart(t testing.TB) {
	t.Helper()
	a.Stop()
	if err := a.Relaunch(); err != nil {
		t.Fatalf("%v\nlog tail:\n%s", err, a.LogTail(60))
	}
}

// Relaunch starts a stopped agent again on the same ports and waits until
// it is ready: Restart for a program, which stops the agent (Stop or Kill)
// and starts it with Relaunch when it chooses, to keep Consul away for a
// while. Like Restart, it comes back empty.
func (a *Agent) Relaunch() error {
	if err := a.start(); err != nil {
		return fmt.Errorf("consulagent: restart: %w", err)
	}
	return nil
}

// LogTail returns the last n lines of the agent's log.
func (a *Agent) LogTail(n int) string {
	b, err := os.ReadFile(a.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

func (a *Agent) args() []string {
	return []string{
		"agent", "-dev",
		"-bind", "127.0.0.1",
		"-client", "127.0.0.1",
		"-advertise", "127.0.0.1",
		"-node", fmt.Sprintf("protoshard-test-%d", a.ports.http),
		"-http-port", strconv.Itoa(a.ports.http),
		"-serf-lan-port", strconv.Itoa(a.ports.serfLAN),
		// -1 disables the listeners a test has no use for, so that they can
		// neither collide with another agent nor with anything else.
		"-serf-wan-port", "-1",
		"-server-port", strconv.Itoa(a.ports.server),
		"-dns-port", "-1",
		"-grpc-port", "-1",
		"-grpc-tls-port", "-1",
		"-https-port", "-1",
		"-log-level", "debug",
	}
}

func (a *Agent) start() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.proc != nil && !a.proc.Exited() {
		return errors.New("agent already running")
	}
	a.starts++
	logf, err := os.OpenFile(a.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening log: %w", err)
	}
	fmt.Fprintf(logf, "==== consulagent: start #%d: %s %v\n", a.starts, a.bin, a.args())
	cmd := exec.Command(a.bin, a.args()...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	// No update check against checkpoint.hashicorp.com from a test.
	cmd.Env = append(os.Environ(), "CHECKPOINT_DISABLE=1")
	proc, err := childproc.Start(cmd)
	// The child has its own copy of the descriptor.
	_ = logf.Close()
	if err != nil {
		return fmt.Errorf("starting %s: %w", a.bin, err)
	}
	a.proc = proc
	if err := a.waitReady(proc); err != nil {
		proc.Stop(0)
		a.proc = nil
		return err
	}
	return nil
}

// waitReady waits until the agent is leader and has registered its own node
// in the catalog: before that, service registrations are accepted by the
// agent but not yet visible in the catalog.
func (a *Agent) waitReady(proc *childproc.Process) error {
	deadline := time.Now().Add(startTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		if proc.Exited() {
			return fmt.Errorf("%w: %v", errExitedDuringStart, proc.Err())
		}
		leader, err := a.client.Status().Leader()
		switch {
		case err != nil:
			lastErr = err
		case leader == "":
			lastErr = errors.New("no leader yet")
		default:
			nodes, _, err := a.client.Catalog().Nodes(&api.QueryOptions{RequireConsistent: true})
			if err == nil && len(nodes) > 0 {
				return nil
			}
			lastErr = fmt.Errorf("own node not in the catalog yet (err %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("consul at %s not ready after %v: %v", a.Addr(), startTimeout, lastErr)
}

// freePorts picks three distinct free loopback ports; the serf port is free
// for both TCP and UDP (serf gossips over both). All are held until all are
// picked so that they differ; another process may still grab one before
// Consul binds it, which the start then reports.
func freePorts() (ports, error) {
	var closers []func() error
	defer func() {
		for _, c := range closers {
			_ = c()
		}
	}()
	pick := func(udpToo bool) (int, error) {
		for range 50 {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return 0, fmt.Errorf("listen tcp: %w", err)
			}
			port := l.Addr().(*net.TCPAddr).Port
			if !udpToo {
				closers = append(closers, l.Close)
				return port, nil
			}
			u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				_ = l.Close()
				continue
			}
			closers = append(closers, l.Close, u.Close)
			return port, nil
		}
		return 0, errors.New("no port free for both TCP and UDP")
	}
	var p ports
	var err error
	if p.http, err = pick(false); err != nil {
		return p, err
	}
	if p.serfLAN, err = pick(true); err != nil {
		return p, err
	}
	if p.server, err = pick(false); err != nil {
		return p, err
	}
	return p, nil
}
