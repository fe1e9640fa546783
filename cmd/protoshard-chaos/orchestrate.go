package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/consul/api"

	statestore "github.com/protoshard/protoshard/durablestate/consul"
	"github.com/protoshard/protoshard/internal/backoff"
	"github.com/protoshard/protoshard/internal/consulagent"
	"github.com/protoshard/protoshard/internal/consulmember"
)

// Kinds of faults.
const (
	faultKill            = "kill"
	faultKillCoordinator = "kill-coordinator"
	faultPause           = "pause"
	faultLeave           = "leave"
	faultConsulRestart   = "consul-restart"
	faultPartition       = "partition"
	faultPartitionOldest = "partition-oldest"
)

// faultKinds is every kind, in the order a round starts from before it is
// shuffled.
var faultKinds = []string{faultKill, faultKillCoordinator, faultPause, faultLeave, faultConsulRestart, faultPartition, faultPartitionOldest}

// skipLabFaults marks every kind that needsLab as skipped, for why.
func skipLabFaults(skipped map[string]string, why string) {
	for _, kind := range faultKinds {
		if needsLab(kind) {
			skipped[kind] = why
		}
	}
}

// needsLab reports whether a fault of kind cuts a node off the network, so
// needs the network namespaces.
func needsLab(kind string) bool {
	return kind == faultPartition || kind == faultPartitionOldest
}

const (
	// readyTimeout bounds the start of a process until it serves.
	readyTimeout = 60 * time.Second
	// exitTimeout bounds the wait for a killed process to be reaped.
	exitTimeout = 15 * time.Second
	// answerSlack is how much longer than a probe's deadline the load
	// generator may take to report it.
	answerSlack = 30 * time.Second
)

// proc is one process of the run that the orchestrator started.
type proc struct {
	name   string
	role   string
	n      int // the node's number (its lab address)
	cmd    *exec.Cmd
	pid    int
	addr   string
	member string
	stdin  io.WriteCloser
	lines  chan string // stdout after the READY line
	exited chan struct{}
	status string // how it exited, once exited
}

func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// orchestrator runs one chaos run.
type orchestrator struct {
	cfg     config
	out     io.Writer
	dir     string
	service string
	ledger  *ledger
	rng     *rand.Rand
	self    string // this program, run again for every process

	agent      *consulagent.Agent
	client     *api.Client
	consulPort string
	nsConsul   string // Consul's address from inside a namespace
	lab        *netLab
	labSkip    string // why the partition fault cannot run

	mu       sync.Mutex
	nodes    []*proc // the live nodes, oldest start first
	all      []*proc
	nextNode int
	loadgen  *proc

	faults      []*Fault
	consulStops int
	warnings    []string
}

// run performs a whole chaos run and returns its report; the report's
// Failures say whether the promises held. An error means the run itself
// could not be carried out.
func run(ctx context.Context, out io.Writer, cfg config) (*Report, error) {
	o := &orchestrator{cfg: cfg, out: out, rng: rand.New(rand.NewPCG(uint64(cfg.seed), 0x6368616f73))}
	o.service = fmt.Sprintf("protoshard-chaos-%d", os.Getpid())
	rep := &Report{Seed: cfg.seed, Short: cfg.short, Skipped: map[string]string{}, Started: time.Now().Format(time.RFC3339)}
	defer o.teardown()
	if err := o.setup(ctx); err != nil {
		return nil, err
	}
	rep.Dir = o.dir
	rep.Settings = Settings{
		Nodes: cfg.nodes, Senders: cfg.senders, Entities: cfg.entities, RatePerSender: cfg.rate, Shards: cfg.shards,
		TTL: cfg.ttl.String(), Duration: cfg.duration.String(), Quiet: cfg.quiet.String(), Netns: o.lab != nil,
		Lease: cfg.lease, ShardLease: cfg.shardLease,
	}
	if o.labSkip != "" {
		skipLabFaults(rep.Skipped, o.labSkip)
	}
	mode := modeAtMostOnce
	if cfg.reliable {
		mode = modeReliable
	}
	o.ledger.write(Record{Ev: evRun, Reason: mode, Lease: cfg.lease, ShardLease: cfg.shardLease})
	o.printf("seed %d; %s; lease %s%s; ledgers and logs in %s", cfg.seed, mode, cfg.lease, map[bool]string{true: " (shards too)"}[cfg.shardLease], o.dir)
	if o.lab != nil {
		o.printf("nodes run in network namespaces on %s.0/24", labSubnet)
	} else {
		o.printf("nodes run on loopback; partition faults skipped: %s", o.labSkip)
	}

	if err := o.startCluster(ctx); err != nil {
		return nil, err
	}
	if err := o.command("send", "SENDING", 10*time.Second); err != nil {
		return nil, err
	}
	o.printf("senders started: %d x %d msgs/s over %d entities", cfg.senders, cfg.rate, cfg.entities)
	warm, err := o.probe(ctx, 0, time.Time{}, time.Time{}, 90*time.Second)
	if err != nil {
		return nil, err
	}
	rep.WarmUp = warm
	if !warm.AllAnswered {
		return nil, fmt.Errorf("warm-up: only %d of %d entities answered within 90s", warm.Answered, warm.Total)
	}
	o.printf("warm-up: all %d entities answered", warm.Total)

	if err := o.faultLoop(ctx); err != nil {
		return nil, err
	}

	lines, err := o.stopSenders()
	if err != nil {
		return nil, err
	}
	o.printf("senders stopped after %s messages", lines)
	if cfg.reliable {
		left, resent, err := o.drain()
		if err != nil {
			return nil, err
		}
		o.printf("drained: %d messages unconfirmed or buffered left, %d resent", left, resent)
	}
	o.printf("quiet for %v", cfg.quiet)
	if err := backoff.Sleep(ctx, cfg.quiet); err != nil {
		return nil, err
	}
	o.ledger.write(Record{Ev: evEnd})
	o.stopProcesses()
	if cfg.stateEntities > 0 {
		// Nothing writes any more: what Consul holds now is the final state.
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		fs := readFinalState(rctx, statestore.New(o.client, o.service, typeName), cfg.stateEntities)
		cancel()
		if err := writeFinalState(o.dir, stateFinalFile, fs); err != nil {
			return nil, err
		}
	}

	rep.Faults = o.faults
	rep.Warnings = o.warnings
	return rep, finish(out, cfg, rep)
}

// finish judges the ledgers of rep.Dir against rep.Faults, prints the
// report and writes its JSON.
func finish(out io.Writer, cfg config, rep *Report) error {
	recs, bad, err := readLedgers(rep.Dir)
	if err != nil {
		return err
	}
	starts := make([]time.Time, len(rep.Faults))
	for i, f := range rep.Faults {
		starts[i] = f.Start
	}
	rep.Findings = analyze(recs, starts, crashNoticeWindow(cfg.ttl))
	rep.Findings.BadLines = bad
	if cfg.reliable || reliableRun(recs) {
		rel, err := judgeReliable(rep.Dir, recs, starts)
		if err != nil {
			return err
		}
		rep.Reliable = &rel
		rep.Settings.Reliable = true
	}
	final, err := loadFinalState(rep.Dir, stateFinalFile)
	if err != nil {
		return err
	}
	if final != nil || slices.ContainsFunc(recs, func(r Record) bool { return r.Ev == evUpdate }) {
		beforeWipes, err := loadBeforeWipes(rep.Dir)
		if err != nil {
			return err
		}
		st := analyzeState(recs, final, beforeWipes, starts)
		rep.State = &st
	}
	// The end of the observation: the processes are killed after it.
	end := int64(math.MaxInt64)
	if i := slices.IndexFunc(recs, func(r Record) bool { return r.Ev == evEnd }); i >= 0 {
		end = recs[i].T
	}
	for i, f := range rep.Faults {
		f.Counts = rep.Findings.PerFault[i]
		if rep.Reliable != nil {
			f.Reliable = &rep.Reliable.PerFault[i]
		}
		if (f.Kind == faultKillCoordinator || f.Kind == faultPartitionOldest) && f.Error == "" {
			// The singleton runs where the coordinator does: on the
			// oldest node. The fault must have hit it.
			if on := singletonNodes(recs, f.Start.UnixNano()-1); len(on) != 1 || on[0] != f.Node {
				f.Note = fmt.Sprintf("the singleton (and so the coordinator) ran on %v, not on %s, which the fault hit", on, f.Node)
			}
			until := end
			if i+1 < len(rep.Faults) {
				until = rep.Faults[i+1].Start.UnixNano()
			}
			mv := singletonMove(recs, f.Node, f.Start.UnixNano(), until)
			f.Singleton = &mv
		}
	}
	rep.summarize()
	rep.Ended = time.Now().Format(time.RFC3339)
	rep.judge(os.Getenv("CI") == "true")
	rep.writeText(out)
	if cfg.jsonPath != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return fmt.Errorf("encoding the report: %w", err)
		}
		if err := os.WriteFile(cfg.jsonPath, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("writing the report: %w", err)
		}
	}
	return nil
}

// reanalyze judges the ledgers a run left in dir again: the faults come
// from the orchestrator's ledger, their recovery from the load generator's
// probe answers.
func reanalyze(out io.Writer, cfg config, dir string) (*Report, error) {
	recs, _, err := readLedgers(dir)
	if err != nil {
		return nil, err
	}
	rep := &Report{Dir: dir, Skipped: map[string]string{}}
	byN := map[int]*Fault{}
	for _, r := range recs {
		switch r.Ev {
		case evFault:
			f := &Fault{N: r.Fault, Kind: r.Reason, Node: r.Node, PID: r.PID, Start: r.Time(), End: r.Time()}
			rep.Faults = append(rep.Faults, f)
			byN[f.N] = f
		case evFaultEnd:
			if f := byN[r.Fault]; f != nil {
				f.End, f.Detail = r.Time(), r.Reason
			}
		case evRun:
			rep.Settings.Lease, rep.Settings.ShardLease = r.Lease, r.ShardLease
		}
	}
	// The recovery after each fault, from the load generator's probe
	// answers: every entity that answered the warm-up probe must answer.
	answered := map[int]map[string]bool{}
	last := map[int]int64{}
	for _, r := range recs {
		if r.Ev == evAnswer {
			if answered[r.Probe] == nil {
				answered[r.Probe] = map[string]bool{}
			}
			answered[r.Probe][r.Ent] = true
			last[r.Probe] = max(last[r.Probe], r.T)
		}
	}
	total := len(answered[0])
	for _, f := range rep.Faults {
		rec := &Recovery{Answered: len(answered[f.N]), Total: total}
		rec.AllAnswered = total > 0 && rec.Answered == total
		if rec.AllAnswered {
			rec.SinceStartS = time.Unix(0, last[f.N]).Sub(f.Start).Seconds()
			rec.SinceEndS = time.Unix(0, last[f.N]).Sub(f.End).Seconds()
		}
		f.Recovery = rec
	}
	if len(recs) > 0 {
		rep.Started = recs[0].Time().Format(time.RFC3339)
	}
	rep.Settings.TTL = cfg.ttl.String()
	return rep, finish(out, cfg, rep)
}

func (o *orchestrator) printf(format string, args ...any) {
	fmt.Fprintf(o.out, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// setup creates the run's directory, the lab (when it can) and Consul.
func (o *orchestrator) setup(ctx context.Context) error {
	bin, err := consulagent.Binary()
	if err != nil {
		return fmt.Errorf("a chaos run needs Consul: %w (run scripts/install-consul.sh or set PROTOSHARD_CONSUL)", err)
	}
	if o.self, err = os.Executable(); err != nil {
		return fmt.Errorf("finding this program: %w", err)
	}
	o.dir = o.cfg.dir
	if o.dir == "" {
		if o.dir, err = os.MkdirTemp("", "protoshard-chaos-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	if old, _ := filepath.Glob(filepath.Join(o.dir, "*"+ledgerSuffix)); len(old) > 0 {
		return fmt.Errorf("%s holds ledgers of another run; use an empty directory", o.dir)
	}
	if o.ledger, err = openLedger(ledgerPath(o.dir, "orchestrator"), "orchestrator"); err != nil {
		return err
	}
	switch why := labUnavailable(); {
	case !o.cfg.netns:
		o.labSkip = "network namespaces switched off (-netns=false)"
	case why != nil:
		o.labSkip = why.Error()
	default:
		if o.lab, err = startLab(ctx, o.out); err != nil {
			return fmt.Errorf("network namespaces: %w", err)
		}
	}
	if o.agent, err = consulagent.Launch(bin, filepath.Join(o.dir, "consul.log")); err != nil {
		return fmt.Errorf("consul agent: %w", err)
	}
	o.client = o.agent.Client()
	_, o.consulPort, _ = net.SplitHostPort(o.agent.Addr())
	if o.lab != nil {
		if o.nsConsul, err = o.lab.forward(o.consulPort); err != nil {
			return err
		}
	}
	return nil
}

// startCluster starts the nodes one after the other (so their ages follow
// their names) and then the load generator.
func (o *orchestrator) startCluster(ctx context.Context) error {
	for range o.cfg.nodes {
		if _, err := o.startNode(ctx); err != nil {
			return err
		}
	}
	lg, err := o.spawn(ctx, roleLoadgen, "loadgen", 0)
	if err != nil {
		return err
	}
	o.loadgen = lg
	o.printf("%d nodes and the load generator joined", o.cfg.nodes)
	return nil
}

// startNode starts the next node, n<k>.
func (o *orchestrator) startNode(ctx context.Context) (*proc, error) {
	o.mu.Lock()
	o.nextNode++
	n := o.nextNode
	o.mu.Unlock()
	p, err := o.spawn(ctx, roleNode, fmt.Sprintf("n%d", n), n)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	o.nodes = append(o.nodes, p)
	o.mu.Unlock()
	return p, nil
}

// spawn starts this program again in role and waits for its READY line.
// A node runs in its own network namespace when the lab is up.
func (o *orchestrator) spawn(ctx context.Context, role, name string, n int) (*proc, error) {
	bind, consulAddr := "127.0.0.1", o.agent.Addr()
	argv := []string{o.self}
	if o.lab != nil {
		if role == roleNode {
			ns, ip, err := o.lab.addNode(name, n)
			if err != nil {
				return nil, fmt.Errorf("namespace of %s: %w", name, err)
			}
			argv = []string{"ip", "netns", "exec", ns, o.self}
			bind, consulAddr = ip, o.nsConsul
		} else {
			bind = labHostIP
		}
	}
	// -role first: a test binary recognises a process of the run by it.
	argv = append(argv, "-role="+role, "-name="+name, "-bind="+bind, "-consul="+consulAddr, "-service="+o.service,
		"-dir="+o.dir, "-ttl="+o.cfg.ttl.String(), "-shards="+strconv.Itoa(o.cfg.shards),
		"-entities="+strconv.Itoa(o.cfg.entities), "-senders="+strconv.Itoa(o.cfg.senders),
		"-rate="+strconv.Itoa(o.cfg.rate), "-seed="+strconv.FormatInt(o.cfg.seed, 10),
		"-state-entities="+strconv.Itoa(o.cfg.stateEntities), "-state-rate="+strconv.Itoa(o.cfg.stateRate))
	if o.cfg.reliable {
		argv = append(argv, "-reliable")
	}
	argv = append(argv, "-lease="+o.cfg.lease)
	if o.cfg.shardLease {
		argv = append(argv, "-shard-lease")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	logf, err := os.Create(filepath.Join(o.dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logf
	// If the orchestrator dies, its processes die with it (see start).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		_ = logf.Close()
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		_ = logf.Close()
		return nil, err
	}
	p := &proc{name: name, role: role, n: n, cmd: cmd, stdin: stdin, lines: make(chan string, 64), exited: make(chan struct{})}
	ready := make(chan []string, 1)
	readDone := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that started the child ends, so
		// this goroutine keeps its thread until the child is gone.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		<-readDone
		err := cmd.Wait()
		p.status = "exit 0"
		if err != nil {
			p.status = err.Error()
		}
		o.ledger.write(Record{Ev: evExit, Node: name, PID: cmd.Process.Pid, Reason: p.status})
		_ = logf.Close()
		if o.lab != nil && role == roleNode {
			o.lab.removeNode(name)
		}
		close(p.exited)
	}()
	if err := <-started; err != nil {
		_ = logf.Close()
		if o.lab != nil && role == roleNode {
			o.lab.removeNode(name)
		}
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p.pid = cmd.Process.Pid
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "READY "); ok {
				select {
				case ready <- strings.Fields(rest):
				default:
				}
				continue
			}
			select {
			case p.lines <- line:
			default: // nobody asked: not a reply to a command
			}
		}
	}()
	o.mu.Lock()
	o.all = append(o.all, p)
	o.mu.Unlock()
	select {
	case f := <-ready:
		if len(f) >= 2 {
			p.addr, p.member = f[0], f[1]
		}
		o.ledger.write(Record{Ev: evSpawn, Node: name, PID: p.pid, Addr: p.addr, Member: p.member})
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("%s exited before it was ready (%s); see %s", name, p.status, logf.Name())
	case <-time.After(readyTimeout):
	case <-ctx.Done():
	}
	o.kill(p)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	return nil, fmt.Errorf("%s was not ready within %v; see %s", name, readyTimeout, logf.Name())
}

// kill sends SIGKILL to p and waits until it is reaped.
func (o *orchestrator) kill(p *proc) {
	_ = syscall.Kill(p.pid, syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(exitTimeout):
	}
}

// command sends cmd to the load generator and waits for a line starting
// with want.
func (o *orchestrator) command(cmd, want string, timeout time.Duration) error {
	_, err := o.commandLine(cmd, want, timeout)
	return err
}

func (o *orchestrator) commandLine(cmd, want string, timeout time.Duration) (string, error) {
	lg := o.loadgen
	// Drop replies nobody waited for (a probe that timed out).
	for drained := false; !drained; {
		select {
		case <-lg.lines:
		default:
			drained = true
		}
	}
	if _, err := fmt.Fprintln(lg.stdin, cmd); err != nil {
		return "", fmt.Errorf("load generator: %q: %w", cmd, err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case line := <-lg.lines:
			if strings.HasPrefix(line, want) {
				return line, nil
			}
		case <-lg.exited:
			return "", fmt.Errorf("the load generator exited (%s)", lg.status)
		case <-t.C:
			return "", fmt.Errorf("load generator: no %s after %q within %v", want, cmd, timeout)
		}
	}
}

// probe makes the load generator ask every entity until each answered or
// deadline passed, and measures the recovery from the fault's start (and
// end).
func (o *orchestrator) probe(ctx context.Context, n int, faultStart, faultEnd time.Time, deadline time.Duration) (*Recovery, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	line, err := o.commandLine(fmt.Sprintf("probe %d %d", n, deadline.Milliseconds()), fmt.Sprintf("PROBED %d ", n), deadline+answerSlack)
	if err != nil {
		return nil, err
	}
	f := strings.Fields(line)
	if len(f) != 5 {
		return nil, fmt.Errorf("load generator: bad answer %q", line)
	}
	answered, _ := strconv.Atoi(f[2])
	total, _ := strconv.Atoi(f[3])
	lastNS, _ := strconv.ParseInt(f[4], 10, 64)
	r := &Recovery{Answered: answered, Total: total, AllAnswered: total > 0 && answered == total}
	if r.AllAnswered && !faultStart.IsZero() {
		last := time.Unix(0, lastNS)
		r.SinceStartS = last.Sub(faultStart).Seconds()
		r.SinceEndS = last.Sub(faultEnd).Seconds()
	}
	return r, nil
}

// probeDeadline bounds the wait for every entity to answer after a fault.
func (o *orchestrator) probeDeadline() time.Duration {
	if o.cfg.short {
		return 30 * time.Second
	}
	return 60 * time.Second
}

// faultGap is the steady traffic between two faults.
func (o *orchestrator) faultGap() time.Duration {
	if o.cfg.short {
		return 2 * time.Second
	}
	return 4 * time.Second
}

// faultLoop injects the faults: rounds of every kind in a seeded random
// order, at least one round (-short) or two, and more while -duration has
// not passed.
func (o *orchestrator) faultLoop(ctx context.Context) error {
	minRounds := 2
	if o.cfg.short {
		minRounds = 1
	}
	begin := time.Now()
	for round := 0; ; round++ {
		if round >= minRounds && time.Since(begin) >= o.cfg.duration {
			return nil
		}
		kinds := slices.Clone(faultKinds)
		o.rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
		for _, kind := range kinds {
			if round >= minRounds && time.Since(begin) >= o.cfg.duration {
				return nil
			}
			if err := backoff.Sleep(ctx, o.faultGap()); err != nil {
				return err
			}
			if err := o.checkLoadgen(); err != nil {
				return err
			}
			if err := o.replaceDead(ctx); err != nil {
				return err
			}
			f := &Fault{N: len(o.faults) + 1, Kind: kind}
			if needsLab(kind) && o.lab == nil {
				f.Start = time.Now()
				f.End = f.Start
				f.Error = "skipped: " + o.labSkip
				o.faults = append(o.faults, f)
				o.printf("fault %d %s: %s", f.N, kind, f.Error)
				continue
			}
			o.faults = append(o.faults, f)
			o.inject(ctx, f)
			o.ledger.write(Record{T: f.Start.UnixNano(), Ev: evFault, Fault: f.N, Reason: f.Kind, Node: f.Node, PID: f.PID})
			o.ledger.write(Record{T: f.End.UnixNano(), Ev: evFaultEnd, Fault: f.N, Reason: f.Detail + errSuffix(f.Error)})
			if err := ctx.Err(); err != nil {
				return err
			}
			o.printf("fault %d %s %s: %s%s", f.N, kind, f.Node, f.Detail, errSuffix(f.Error))
			rec, err := o.probe(ctx, f.N, f.Start, f.End, o.probeDeadline())
			if err != nil {
				return fmt.Errorf("probing after fault %d (%s): %w", f.N, kind, err)
			}
			f.Recovery = rec
			if rec.AllAnswered {
				o.printf("fault %d: every entity answered %.1fs after the fault began (%.1fs after it ended)", f.N, rec.SinceStartS, rec.SinceEndS)
			} else {
				o.printf("fault %d: only %d of %d entities answered within %v after the fault ended", f.N, rec.Answered, rec.Total, o.probeDeadline())
			}
		}
	}
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return " (" + e + ")"
}

func (o *orchestrator) checkLoadgen() error {
	if !o.loadgen.alive() {
		return fmt.Errorf("the load generator exited (%s); see %s", o.loadgen.status, filepath.Join(o.dir, "loadgen.log"))
	}
	return nil
}

// inject performs one fault; f.Error says why it could not be.
func (o *orchestrator) inject(ctx context.Context, f *Fault) {
	defer func() {
		if f.End.IsZero() {
			f.End = time.Now()
		}
		if f.Start.IsZero() {
			f.Start = f.End
		}
	}()
	ttl := o.cfg.ttl
	switch f.Kind {
	case faultKill:
		o.killAndReplace(ctx, f, o.randomNode())
	case faultKillCoordinator:
		target, err := o.waitOldest(ctx)
		if err != nil {
			f.Error = err.Error()
			return
		}
		o.killAndReplace(ctx, f, target)
	case faultPause:
		p := o.randomNode()
		f.Node, f.PID = p.name, p.pid
		pause := ttl + 5*time.Second
		f.Start = time.Now()
		o.ledger.write(Record{T: f.Start.UnixNano(), Ev: evFreeze, Node: p.name, PID: p.pid})
		if err := syscall.Kill(p.pid, syscall.SIGSTOP); err != nil {
			f.Error = fmt.Sprintf("SIGSTOP: %v", err)
			return
		}
		_ = backoff.Sleep(ctx, pause)
		o.ledger.write(Record{Ev: evThaw, Node: p.name, PID: p.pid})
		if err := syscall.Kill(p.pid, syscall.SIGCONT); err != nil {
			f.Error = fmt.Sprintf("SIGCONT: %v", err)
		}
		f.Detail = fmt.Sprintf("frozen for %v", pause)
	case faultLeave:
		p := o.randomNode()
		f.Node, f.PID = p.name, p.pid
		f.Start = time.Now()
		o.ledger.write(Record{T: f.Start.UnixNano(), Ev: evTerm, Node: p.name, PID: p.pid})
		if err := syscall.Kill(p.pid, syscall.SIGTERM); err != nil {
			f.Error = fmt.Sprintf("SIGTERM: %v", err)
			return
		}
		wait := leaveTimeout + 15*time.Second
		select {
		case <-p.exited:
			f.Detail = fmt.Sprintf("left and exited after %v (%s)", time.Since(f.Start).Round(time.Millisecond), p.status)
			if p.status != "exit 0" {
				f.Note = "the graceful leave failed: " + p.status + " (see " + p.name + ".log)"
			}
		case <-time.After(wait):
			o.ledger.write(Record{Ev: evKill, Node: p.name, PID: p.pid})
			o.kill(p)
			f.Note = fmt.Sprintf("the graceful leave did not end within %v; killed", wait)
			f.Detail = "killed after a leave that did not end"
		}
		o.dropNode(p)
		o.replace(ctx, f)
	case faultConsulRestart:
		o.consulStops++
		down := ttl / 2
		if o.consulStops%2 == 0 {
			down = ttl + 2*time.Second
		}
		f.Node = "consul"
		o.readStateBeforeWipe(ctx)
		f.Start = time.Now()
		o.ledger.write(Record{T: f.Start.UnixNano(), Ev: evConsulStop})
		o.agent.Stop()
		_ = backoff.Sleep(ctx, down)
		if err := o.agent.Relaunch(); err != nil {
			f.Error = err.Error()
			return
		}
		o.ledger.write(Record{Ev: evConsulStart})
		f.Detail = fmt.Sprintf("Consul down for %v (started again empty after %.1fs)", down, time.Since(f.Start).Seconds())
	case faultPartition:
		o.cutOff(ctx, f, o.randomNode())
	case faultPartitionOldest:
		target, err := o.waitOldest(ctx)
		if err != nil {
			f.Error = err.Error()
			return
		}
		o.cutOff(ctx, f, target)
	default:
		f.Error = "unknown fault kind"
	}
}

// readStateBeforeWipe reads the durable state entities' records before
// Consul is stopped (and loses them), into the stateBeforeWipeFile of this
// stop, so that the judge can check the updates saved before.
func (o *orchestrator) readStateBeforeWipe(ctx context.Context) {
	if o.cfg.stateEntities == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	fs := readFinalState(rctx, statestore.New(o.client, o.service, typeName), o.cfg.stateEntities)
	cancel()
	if err := writeFinalState(o.dir, stateBeforeWipeFile(o.consulStops), fs); err != nil {
		o.warnings = append(o.warnings, err.Error())
	}
}

// cutOff takes p's link down for TTL+5s, so that the others remove it and
// it sees its own removal, then brings it up again.
func (o *orchestrator) cutOff(ctx context.Context, f *Fault, p *proc) {
	f.Node, f.PID = p.name, p.pid
	cut := o.cfg.ttl + 5*time.Second
	f.Start = time.Now()
	o.ledger.write(Record{T: f.Start.UnixNano(), Ev: evCut, Node: p.name, PID: p.pid})
	if err := o.lab.cut(p.name); err != nil {
		f.Error = err.Error()
		return
	}
	_ = backoff.Sleep(ctx, cut)
	if err := o.lab.heal(p.name); err != nil {
		f.Error = err.Error()
		return
	}
	o.ledger.write(Record{Ev: evHeal, Node: p.name, PID: p.pid})
	f.Detail = fmt.Sprintf("cut off the network for %v", cut)
}

// waitOldest returns the oldest node (oldestNode). Right after a Consul
// restart the nodes may not have registered again yet: it waits for them
// a while.
func (o *orchestrator) waitOldest(ctx context.Context) (*proc, error) {
	target, err := o.oldestNode()
	for deadline := time.Now().Add(30 * time.Second); err != nil && time.Now().Before(deadline); {
		if backoff.Sleep(ctx, 500*time.Millisecond) != nil {
			break
		}
		target, err = o.oldestNode()
	}
	return target, err
}

// killAndReplace kills p with SIGKILL and starts a replacement node.
func (o *orchestrator) killAndReplace(ctx context.Context, f *Fault, p *proc) {
	f.Node, f.PID = p.name, p.pid
	f.Start = time.Now()
	o.ledger.write(Record{T: f.Start.UnixNano(), Ev: evKill, Node: p.name, PID: p.pid})
	if err := syscall.Kill(p.pid, syscall.SIGKILL); err != nil {
		f.Error = fmt.Sprintf("SIGKILL: %v", err)
		return
	}
	select {
	case <-p.exited:
	case <-time.After(exitTimeout):
		f.Error = fmt.Sprintf("%s not gone %v after SIGKILL", p.name, exitTimeout)
		return
	}
	o.dropNode(p)
	f.Detail = "killed"
	o.replace(ctx, f)
}

// replace starts a node in place of one that is gone.
func (o *orchestrator) replace(ctx context.Context, f *Fault) {
	n, err := o.startNode(ctx)
	if err != nil {
		f.Error = "the replacement node did not start: " + err.Error()
		return
	}
	f.Replacement = n.name
	f.Detail += "; replaced by " + n.name
}

// replaceDead replaces the nodes that exited although no fault ended them
// (a crash), and reports them.
func (o *orchestrator) replaceDead(ctx context.Context) error {
	o.mu.Lock()
	var dead []*proc
	for _, p := range o.nodes {
		if !p.alive() {
			dead = append(dead, p)
		}
	}
	o.mu.Unlock()
	for _, p := range dead {
		o.dropNode(p)
		msg := fmt.Sprintf("%s exited on its own (%s); see %s", p.name, p.status, filepath.Join(o.dir, p.name+".log"))
		o.warnings = append(o.warnings, msg)
		o.printf("%s", msg)
		if _, err := o.startNode(ctx); err != nil {
			return fmt.Errorf("replacing %s: %w", p.name, err)
		}
	}
	return nil
}

func (o *orchestrator) dropNode(p *proc) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.nodes = slices.DeleteFunc(o.nodes, func(q *proc) bool { return q == p })
}

// randomNode picks a live node (seeded).
func (o *orchestrator) randomNode() *proc {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.nodes[o.rng.IntN(len(o.nodes))]
}

// oldestNode finds the node that runs the coordinator and the singleton:
// the member with the node role and the smallest CreateIndex, as every
// node's Consul membership orders them.
func (o *orchestrator) oldestNode() (*proc, error) {
	entries, _, err := o.client.Health().Service(o.service, "", true, &api.QueryOptions{RequireConsistent: true})
	if err != nil {
		return nil, fmt.Errorf("reading the members from Consul: %w", err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	live := map[string]*proc{}
	for _, p := range o.nodes {
		live[p.name] = p
	}
	// A node killed moments ago stays passing until its TTL runs out; the
	// others are about to see it removed, so the oldest live one counts.
	var (
		best  *proc
		index uint64
	)
	for _, e := range entries {
		s := e.Service
		if s == nil || s.Meta[consulmember.MetaMemberID] != s.ID {
			continue
		}
		roles := strings.Split(s.Meta[consulmember.MetaRoles], ",")
		if !slices.Contains(roles, nodeRole) {
			continue
		}
		name := ""
		for _, r := range roles {
			if n, ok := strings.CutPrefix(r, "name:"); ok {
				name = n
			}
		}
		if p := live[name]; p != nil && (best == nil || s.CreateIndex < index) {
			best, index = p, s.CreateIndex
		}
	}
	if best == nil {
		return nil, fmt.Errorf("no live node of the run is a passing member in Consul (%d entries)", len(entries))
	}
	return best, nil
}

// stopSenders stops the load generator's senders and returns how many
// messages they sent.
func (o *orchestrator) stopSenders() (string, error) {
	line, err := o.commandLine("stop", "STOPPED", 30*time.Second)
	if err != nil {
		return "", err
	}
	return strings.TrimPrefix(line, "STOPPED "), nil
}

// drainTimeout bounds the wait for the producers of a reliable run to
// have every message confirmed once the senders stopped.
func (o *orchestrator) drainTimeout() time.Duration {
	if o.cfg.short {
		return 30 * time.Second
	}
	return 60 * time.Second
}

// drain makes the load generator wait until its producers hold nothing
// unconfirmed (a reliable run) and returns what they still hold and how
// many they resent.
func (o *orchestrator) drain() (left, resent int64, err error) {
	d := o.drainTimeout()
	line, err := o.commandLine(fmt.Sprintf("drain %d", d.Milliseconds()), "DRAINED", d+answerSlack)
	if err != nil {
		return 0, 0, err
	}
	if _, err := fmt.Sscanf(line, "DRAINED %d %d", &left, &resent); err != nil {
		return 0, 0, fmt.Errorf("load generator: bad answer %q: %w", line, err)
	}
	return left, resent, nil
}

// stopProcesses ends the load generator and the nodes at the end of the
// observation: nothing they do from now on counts.
func (o *orchestrator) stopProcesses() {
	o.mu.Lock()
	all := slices.Clone(o.all)
	o.mu.Unlock()
	for _, p := range all {
		if p.alive() {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
	for _, p := range all {
		select {
		case <-p.exited:
		case <-time.After(exitTimeout):
		}
	}
}

// teardown stops whatever runs and removes the lab. It runs on every way
// out of run.
func (o *orchestrator) teardown() {
	o.stopProcesses()
	if o.agent != nil {
		o.agent.Stop()
	}
	if o.lab != nil {
		o.lab.close()
	}
	if o.ledger != nil {
		_ = o.ledger.close()
	}
}
