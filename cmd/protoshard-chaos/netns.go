package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The network lab: every node process runs in a network namespace of its
// own, joined by a veth pair to a bridge on the host, so that one node can
// be cut off the network (its host-side veth set down) while it keeps
// running. Everything it creates is named with these prefixes, so that a
// run can remove what an earlier one left behind.
const (
	labBridge   = "pschaos0"
	labNSPrefix = "pschaos-"
	labVethHost = "pscv-" // host side of a node's veth pair
	labVethPeer = "pscp-" // the node's side before it is renamed eth0
	labSubnet   = "10.77.0"
	labHostIP   = labSubnet + ".1"
	// labLockFile serialises runs that use the lab: a run removes the
	// lab's leftovers, which must not be a running one's.
	labLockFile = "protoshard-chaos-netns.lock"
	// labLockWait bounds the wait for another run to finish.
	labLockWait = 10 * time.Minute
)

// netLab creates and removes the namespaces, links and the bridge.
type netLab struct {
	lock *os.File
	mu   sync.Mutex
	ns   map[string]string // node name -> namespace
	fwd  []net.Listener
}

// labUnavailable says why the lab cannot be used here, or returns nil.
func labUnavailable() error {
	if os.Geteuid() != 0 {
		return errors.New("network namespaces need root (this process is not root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("network namespaces need iproute2's ip: %w", err)
	}
	if out, err := exec.Command("ip", "netns", "list").CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns list: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// startLab takes the lab's lock (waiting for another run, saying so on
// out), removes any leftovers and creates the bridge with the host's
// address.
func startLab(ctx context.Context, out io.Writer) (*netLab, error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), labLockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lab lock: %w", err)
	}
	deadline := time.Now().Add(labLockWait)
	for said := false; ; {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) || ctx.Err() != nil {
			_ = f.Close()
			return nil, fmt.Errorf("lab lock %s: %w", f.Name(), errors.Join(err, ctx.Err()))
		}
		if !said {
			fmt.Fprintf(out, "waiting for another chaos run to release %s\n", f.Name())
			said = true
		}
		time.Sleep(time.Second)
	}
	l := &netLab{lock: f, ns: map[string]string{}}
	l.removeLeftovers()
	if out, err := exec.Command("ip", "-4", "route", "show", labSubnet+".0/24").CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		l.close()
		return nil, fmt.Errorf("%s.0/24 is in use on this host (%s): the lab needs it", labSubnet, strings.TrimSpace(string(out)))
	}
	if err := ipCmds(
		[]string{"link", "add", labBridge, "type", "bridge"},
		[]string{"addr", "add", labHostIP + "/24", "dev", labBridge},
		[]string{"link", "set", labBridge, "up"},
	); err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

// removeLeftovers deletes the namespaces and links an earlier run (killed
// before it could clean up) left behind. The lab's lock is held, so none of
// them belongs to a running run.
func (l *netLab) removeLeftovers() {
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], labNSPrefix) {
				_ = exec.Command("ip", "netns", "del", f[0]).Run()
			}
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if name == labBridge || strings.HasPrefix(name, labVethHost) || strings.HasPrefix(name, labVethPeer) {
				_ = exec.Command("ip", "link", "del", name).Run()
			}
		}
	}
}

// addNode creates node's namespace with address labSubnet.<10+n> on eth0,
// joined to the bridge, and returns the namespace and the address.
func (l *netLab) addNode(node string, n int) (ns, ip string, err error) {
	if n < 1 || n > 240 {
		return "", "", fmt.Errorf("node number %d outside the lab's addresses", n)
	}
	ns = labNSPrefix + node
	ip = fmt.Sprintf("%s.%d", labSubnet, 10+n)
	host, peer := labVethHost+node, labVethPeer+node
	if err := ipCmds(
		[]string{"netns", "add", ns},
		[]string{"link", "add", host, "type", "veth", "peer", "name", peer},
		[]string{"link", "set", peer, "netns", ns},
		[]string{"-n", ns, "link", "set", peer, "name", "eth0"},
		[]string{"-n", ns, "addr", "add", ip + "/24", "dev", "eth0"},
		[]string{"-n", ns, "link", "set", "eth0", "up"},
		[]string{"-n", ns, "link", "set", "lo", "up"},
		[]string{"link", "set", host, "master", labBridge},
		[]string{"link", "set", host, "up"},
	); err != nil {
		_ = exec.Command("ip", "netns", "del", ns).Run()
		_ = exec.Command("ip", "link", "del", host).Run()
		return "", "", err
	}
	l.mu.Lock()
	l.ns[node] = ns
	l.mu.Unlock()
	return ns, ip, nil
}

// removeNode deletes node's namespace (its veth pair goes with it).
func (l *netLab) removeNode(node string) {
	l.mu.Lock()
	ns, ok := l.ns[node]
	delete(l.ns, node)
	l.mu.Unlock()
	if ok {
		_ = exec.Command("ip", "netns", "del", ns).Run()
		_ = exec.Command("ip", "link", "del", labVethHost+node).Run()
	}
}

// cut takes node off the network: its host-side veth goes down, so its
// packets are dropped without a reset, as in a real partition.
func (l *netLab) cut(node string) error {
	return ipCmds([]string{"link", "set", labVethHost + node, "down"})
}

// heal puts node back on the network.
func (l *netLab) heal(node string) error {
	return ipCmds([]string{"link", "set", labVethHost + node, "up"})
}

// forward makes the TCP service at 127.0.0.1:port (Consul's HTTP API, which
// listens on loopback only) reachable from the namespaces at
// labHostIP:port, and returns that address.
func (l *netLab) forward(port string) (string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(labHostIP, port))
	if err != nil {
		return "", fmt.Errorf("forwarder: %w", err)
	}
	l.mu.Lock()
	l.fwd = append(l.fwd, ln)
	l.mu.Unlock()
	target := net.JoinHostPort("127.0.0.1", port)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go pipe(c, target)
		}
	}()
	return ln.Addr().String(), nil
}

// pipe copies between c and a new connection to target until either side
// closes.
func pipe(c net.Conn, target string) {
	defer c.Close()
	t, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		return
	}
	defer t.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(t, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, t); done <- struct{}{} }()
	<-done
}

// close removes everything the lab created and releases its lock.
func (l *netLab) close() {
	l.mu.Lock()
	for _, ln := range l.fwd {
		_ = ln.Close()
	}
	l.fwd = nil
	l.mu.Unlock()
	l.removeLeftovers()
	if l.lock != nil {
		_ = syscall.Flock(int(l.lock.Fd()), syscall.LOCK_UN)
		_ = l.lock.Close()
		l.lock = nil
	}
}

// ipCmds runs ip with each argument list in turn, stopping at the first
// failure.
func ipCmds(cmds ...[]string) error {
	for _, args := range cmds {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
