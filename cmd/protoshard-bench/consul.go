package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/protoshard/protoshard/testkit/consulagent"
)

// consulAgent is a throwaway Consul dev agent on free loopback ports (as
// testkit/consulagent starts one for a test), for the membership of the two
// processes of the remote section.
type consulAgent struct {
	addr   string
	client *api.Client
	cmd    *exec.Cmd
	dir    string
	exited chan struct{}
}

// consulBinary finds the Consul binary the two-process sections need;
// without one the section is skipped, with the reason.
func consulBinary() (string, error) {
	bin, err := consulagent.Binary()
	if err != nil {
		return "", &skipError{reason: fmt.Sprintf("two processes need Consul membership, and %v (run scripts/install-consul.sh or set PROTOSHARD_CONSUL)", err)}
	}
	return bin, nil
}

func startConsul(ctx context.Context, bin string) (*consulAgent, error) {
	// A port picked free can be taken by another process before Consul
	// binds it; Consul then exits at once, and new ports are tried.
	for attempt := 1; ; attempt++ {
		a, err := startConsulOnce(ctx, bin)
		if err == nil || !errors.Is(err, errConsulExited) || attempt == 3 {
			return a, err
		}
	}
}

// errConsulExited: the agent ended before it was ready.
var errConsulExited = errors.New("consul exited during start")

func startConsulOnce(ctx context.Context, bin string) (*consulAgent, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "protoshard-bench-consul-")
	if err != nil {
		return nil, err
	}
	a := &consulAgent{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), dir: dir, exited: make(chan struct{})}
	logf, err := os.Create(filepath.Join(dir, "consul.log"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	a.cmd = exec.Command(bin, "agent", "-dev",
		"-bind", "127.0.0.1", "-client", "127.0.0.1", "-advertise", "127.0.0.1",
		"-node", fmt.Sprintf("protoshard-bench-%d", ports[0]),
		"-http-port", strconv.Itoa(ports[0]),
		"-serf-lan-port", strconv.Itoa(ports[1]),
		"-server-port", strconv.Itoa(ports[2]),
		"-serf-wan-port", "-1", "-dns-port", "-1", "-grpc-port", "-1", "-grpc-tls-port", "-1", "-https-port", "-1",
	)
	a.cmd.Stdout, a.cmd.Stderr = logf, logf
	a.cmd.Env = append(os.Environ(), "CHECKPOINT_DISABLE=1")
	err = a.cmd.Start()
	_ = logf.Close()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		_ = a.cmd.Wait()
		close(a.exited)
	}()
	cfg := api.DefaultConfig()
	cfg.Address, cfg.Scheme, cfg.Token = a.addr, "http", ""
	if a.client, err = api.NewClient(cfg); err != nil {
		a.stop()
		return nil, err
	}
	// Ready once it is leader and lists its own node.
	deadline := time.Now().Add(60 * time.Second)
	for {
		leader, err := a.client.Status().Leader()
		if err == nil && leader != "" {
			nodes, _, err := a.client.Catalog().Nodes(&api.QueryOptions{RequireConsistent: true})
			if err == nil && len(nodes) > 0 {
				return a, nil
			}
		}
		select {
		case <-a.exited:
			err := fmt.Errorf("%w; see its log: %s", errConsulExited, a.tail())
			a.stop()
			return nil, err
		case <-ctx.Done():
			a.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			err := fmt.Errorf("consul not ready after a minute: %s", a.tail())
			a.stop()
			return nil, err
		}
	}
}

func (a *consulAgent) tail() string {
	b, _ := os.ReadFile(filepath.Join(a.dir, "consul.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// stop interrupts the agent, kills it after 5s, and removes its directory.
func (a *consulAgent) stop() {
	_ = a.cmd.Process.Signal(os.Interrupt)
	select {
	case <-a.exited:
	case <-time.After(5 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.exited
	}
	_ = os.RemoveAll(a.dir)
}

// freePorts picks n distinct free loopback ports, free for TCP and UDP
// (serf gossips over both). Another process may take one before Consul
// binds it; the start then fails.
func freePorts(n int) ([]int, error) {
	var closers []func() error
	defer func() {
		for _, c := range closers {
			_ = c()
		}
	}()
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries > 50 {
			return nil, errors.New("no free loopback ports")
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			_ = l.Close()
			continue
		}
		closers = append(closers, l.Close, u.Close)
		out = append(out, port)
	}
	return out, nil
}
