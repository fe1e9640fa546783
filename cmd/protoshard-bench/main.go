// Command protoshard-bench measures protoshard against baselines measured in
// the same run on the same machine, and prints every figure next to its
// baseline and their ratio. The sections:
//
//   - local: fire-and-forget messages/s through a region to 1,000 entities
//     vs a direct Send to plain actors of the same entity type.
//   - memory: heap per idle entity through sharding vs per bare actor.
//   - latency: first-message latency for a never-seen shard vs a request to
//     an entity already started; the time to rebalance shards from 1 to 3
//     nodes vs the time to place the same shards on one node from scratch.
//   - remote: two nodes in two OS processes on loopback (the program runs
//     itself again with -role=peer; membership through a throwaway Consul
//     dev agent): region msgs/s and request/response latency vs raw
//     proto.actor remote Send and RequestFuture between the same nodes.
//     Skipped, with the reason, when no Consul binary is found.
//   - grains: proto.actor's own cluster (grains of a Kind, disthash
//     identity lookup, the in-memory test provider), the alternative a
//     proto.actor user would pick: a region on a one-node cluster (the
//     local section's workload) against the grains, both in this process.
//   - grains-remote: the remote workloads on proto.actor's cluster across
//     two OS processes: the peer (-role=grains-peer) is a member hosting
//     the grains, registered in a throwaway Consul agent through
//     proto.actor's Consul provider, this process a cluster client, so
//     every message crosses the wire. Against the remote section's region
//     (its peer runs too). Skipped, with the reason, when no Consul binary
//     is found.
//   - delivery: reliable delivery (package actorsharding/delivery) against
//     at-most-once EntityRefs to the same entities: messages/s until the
//     producer counts every message confirmed vs until the entities
//     received every message, and the latency of SendWithConfirmation vs
//     EntityRef.Request, on one node and to 1,000 entities in a peer
//     process (-role=delivery-peer; skipped, with the reason, when no
//     Consul binary is found).
//   - failover: two nodes in two OS processes with Consul membership and
//     the coordinator's state in Consul KV; the peer (-role=failover-peer)
//     joins first, so it is the oldest and runs the coordinator. The time
//     from a kill -9 of the peer until a request to a never-seen shard is
//     answered through this node's region, vs the time until this node's
//     membership reports the peer removed (the floor that the Consul TTL
//     sets). Skipped, with the reason, when no Consul binary is found.
//   - recovery: a coordinator starts with a state that places remembered
//     shards on the region of a member that crashed, and allocates them to
//     the live region; the time until the store confirms the write that
//     places them all there, with the state in Consul KV (a throwaway dev
//     agent) vs in memory, after an uncounted warm-up round of each.
//     Skipped, with the reason, when no Consul binary is found.
//   - scale: 100 regions, each on a node (an actor system with its remote
//     on loopback) of this process, with in-process membership: the time
//     to allocate 10,000 shards and to rebalance after 10 regions join, and
//     on 50 regions the time to fail the coordinator over after its node
//     crashed, each against the same on a tenth of the cluster; the rebalance rounds and their sizes
//     against the allocation strategy alone and its per-round limit; the
//     encoded coordinator state (and that of a 10x cluster, built in
//     memory) against Consul's limit.
//   - peers: the Go heap and resident set of one node (actorsharding.Join,
//     in a process of its own, -role=peers-node) that has exchanged a
//     message with each of 20 and of 50 nodes (actor systems with a remote
//     each, in this process), against the same node with one peer.
//     -peers-endpoint-queue sets its remote's endpoint queue.
//   - soak (only when named: it runs for -soak-duration, 10 minutes): this
//     process's node in a cluster of three peer processes (Consul
//     membership), one of which leaves or is killed every -soak-churn
//     (40 s) and is replaced; the node's resident set and heap at the end
//     against after its first two minutes. Skipped without Consul.
//
// Usage:
//
//	go run ./cmd/protoshard-bench -short
//	go run ./cmd/protoshard-bench -json out.json
//	go run ./cmd/protoshard-bench -sections local,latency
//
// Every throughput and latency is measured in -reps runs (failover and
// recovery: their own rounds), each measuring protoshard and its baseline
// back to back, which first alternating; a figure is the median of the
// runs, its ratio the median of the runs' ratios, with their lowest and
// highest (ratio_min, ratio_max in the JSON file).
//
// Every ratio is protoshard / baseline: below 1 for a throughput means
// slower than the baseline, above 1 for a latency, memory or time means
// more. PROTOSHARD_LOG=1 shows the nodes' logs on stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"
)

// config is what a run measures; parseFlags fills it.
type config struct {
	short bool
	// sections to run; run lists their order of execution.
	sections map[string]bool

	entities          int           // entities of the local, remote and grain workloads
	shards            int           // the extractor's number of shards
	messages          int           // fire-and-forget messages per local measurement
	memEntities       int           // idle entities of the memory section
	latencySamples    int           // new shards (and warm requests) in the latency section
	rebalanceShards   int           // shards moved from 1 to 3 nodes
	rebalanceInterval time.Duration // the coordinator's rebalance interval there
	remoteMessages    int           // fire-and-forget messages per remote measurement
	remoteSamples     int           // requests per remote latency measurement
	deliveryMessages  int           // reliable (and at-most-once) messages per delivery measurement, local and remote
	deliverySamples   int           // confirmed sends (and requests) per delivery latency measurement
	failoverRounds    int           // kills of the coordinator's node in the failover section
	recoveryShards    int           // remembered shards allocated again in the recovery section
	recoveryRounds    int           // rounds of the recovery section (each store): the median, and the p99 from 50 on
	scaleRegions      int           // regions (nodes) of the scale section's cluster
	scaleShards       int           // shards allocated over them
	scaleRounds       int           // rounds of the scale section (each size), the median counts
	scaleFailover     int           // regions (nodes) of the scale section's failover cluster
	peersQueue        int           // the endpoint queue size of the peers section's node (0: Join's)
	soakDuration      time.Duration // how long the soak section runs
	soakChurn         time.Duration // how often a peer of the soak leaves or is killed
	reps              int           // interleaved repetitions of each figure with a baseline (the medians count)
	sectionTimeout    time.Duration // bounds each section
	jsonPath          string
	svgPath           string
	cpuProfile        string // a CPU profile of this process (and of each peer, with the role appended)

	// The hidden peer role (the second process of the remote, failover and
	// grains-remote sections).
	role       string
	consulAddr string
	service    string
	peerAddrs  string // the peers section's node: the addresses of its peers, comma-separated
}

var allSections = []string{"local", "memory", "latency", "remote", "grains", "grains-remote", "delivery", "failover", "recovery", "scale", "peers"}

// optInSections run only when named: they take many minutes.
var optInSections = []string{"soak"}

func parseFlags(args []string, errOut io.Writer) (config, error) {
	fs := flag.NewFlagSet("protoshard-bench", flag.ContinueOnError)
	fs.SetOutput(errOut)
	short := fs.Bool("short", false, "a quick run (well under a minute): smaller sets and counts")
	sections := fs.String("sections", "all", "comma-separated sections to run: "+strings.Join(allSections, ",")+" or all; and "+strings.Join(optInSections, ",")+", which all leaves out")
	entities := fs.Int("entities", 1000, "entities of the local, remote and grain workloads")
	shards := fs.Int("shards", 100, "number of shards of the extractor")
	messages := fs.Int("messages", 0, "fire-and-forget messages per local measurement (default 1000000, 100000 with -short)")
	memEntities := fs.Int("mem-entities", 0, "idle entities of the memory section (default 1000000, 20000 with -short)")
	latencySamples := fs.Int("latency-samples", 0, "new shards measured for first-message latency (default 2000, 300 with -short)")
	rebalanceShards := fs.Int("rebalance-shards", 0, "shards rebalanced from 1 to 3 nodes (default 1000, 100 with -short)")
	rebalanceInterval := fs.Duration("rebalance-interval", 100*time.Millisecond, "the coordinator's rebalance interval in the rebalance workload")
	remoteMessages := fs.Int("remote-messages", 0, "fire-and-forget messages per remote measurement (default 200000, 30000 with -short)")
	remoteSamples := fs.Int("remote-samples", 0, "requests per remote latency measurement (default 5000, 1000 with -short)")
	deliveryMessages := fs.Int("delivery-messages", 0, "messages per delivery throughput measurement, rounded up to whole flow-control half-windows per entity (default 200000, 25000 with -short)")
	deliverySamples := fs.Int("delivery-samples", 0, "confirmed sends per delivery latency measurement (default 5000, 500 with -short)")
	failoverRounds := fs.Int("failover-rounds", 0, "kills of the coordinator's node in the failover section, the median counts (default 3, 1 with -short)")
	recoveryShards := fs.Int("recovery-shards", 0, "remembered shards allocated again in the recovery section (default 1000, 200 with -short)")
	recoveryRounds := fs.Int("recovery-rounds", 0, "rounds of the recovery section with each store: their median, and with 50 or more their p99 (default 100, 1 with -short)")
	scaleRegions := fs.Int("scale-regions", 0, "regions (nodes, in this process) of the scale section (default 100, 20 with -short); its baseline has a tenth")
	scaleShards := fs.Int("scale-shards", 0, "shards allocated in the scale section (default 10000, 2000 with -short); its baseline has a tenth")
	scaleFailover := fs.Int("scale-failover-regions", 0, "regions (nodes, in this process) of the scale section's failover (default 50, 10 with -short; after a failover every node connects to every other: about 4 file descriptors per pair); its baseline has a tenth")
	scaleRounds := fs.Int("scale-rounds", 0, "rounds of the scale section with each size, the median counts (default 3, 1 with -short)")
	peersQueue := fs.Int("peers-endpoint-queue", 0, "the initial endpoint queue size (messages per peer) of the peers section's node (default: actorsharding.Join's; 1000000 is proto.actor's)")
	soakDuration := fs.Duration("soak-duration", 10*time.Minute, "how long the soak section runs (more than its 2 minutes of warm-up)")
	soakChurn := fs.Duration("soak-churn", 40*time.Second, "how often a peer of the soak section leaves or is killed (in turn) and is replaced")
	reps := fs.Int("reps", 0, "interleaved repetitions of each throughput and latency figure and its baseline, the medians count (default 5, 3 with -short)")
	sectionTimeout := fs.Duration("section-timeout", 5*time.Minute, "bounds each section")
	jsonPath := fs.String("json", "", "write the figures as JSON to this file")
	svgPath := fs.String("svg", "", "draw the figures as an SVG bar chart into this file")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file (each peer process writes its own, named with its role appended)")
	role := fs.String("role", "", "internal: the role of this process ("+strings.Join([]string{remoteRole, failoverRole, failoverLeaseRole, failoverCASLeaseRole, grainsRole, deliveryRole, peersRole}, ", ")+")")
	consulAddr := fs.String("consul-addr", "", "internal: the Consul agent of the peer")
	service := fs.String("service", "", "internal: the Consul service name of the peer")
	peerAddrs := fs.String("peers", "", "internal: the addresses of the peers section node's peers, comma-separated")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	pick := func(v, long, quick int) int {
		switch {
		case v > 0:
			return v
		case *short:
			return quick
		default:
			return long
		}
	}
	cfg := config{
		short:             *short,
		sections:          map[string]bool{},
		entities:          *entities,
		shards:            *shards,
		messages:          pick(*messages, 1_000_000, 100_000),
		memEntities:       pick(*memEntities, 1_000_000, 20_000),
		latencySamples:    pick(*latencySamples, 2000, 300),
		rebalanceShards:   pick(*rebalanceShards, 1000, 100),
		rebalanceInterval: *rebalanceInterval,
		remoteMessages:    pick(*remoteMessages, 200_000, 30_000),
		remoteSamples:     pick(*remoteSamples, 5000, 1000),
		deliveryMessages:  pick(*deliveryMessages, 200_000, 25_000),
		deliverySamples:   pick(*deliverySamples, 5000, 500),
		failoverRounds:    pick(*failoverRounds, 3, 1),
		recoveryShards:    pick(*recoveryShards, 1000, 200),
		recoveryRounds:    pick(*recoveryRounds, 100, 1),
		scaleRegions:      pick(*scaleRegions, 100, 20),
		scaleShards:       pick(*scaleShards, 10_000, 2000),
		scaleRounds:       pick(*scaleRounds, 3, 1),
		scaleFailover:     pick(*scaleFailover, 50, 10),
		peersQueue:        *peersQueue,
		soakDuration:      *soakDuration,
		soakChurn:         *soakChurn,
		reps:              pick(*reps, 5, 3),
		sectionTimeout:    *sectionTimeout,
		jsonPath:          *jsonPath,
		svgPath:           *svgPath,
		cpuProfile:        *cpuProfile,
		role:              *role,
		consulAddr:        *consulAddr,
		service:           *service,
		peerAddrs:         *peerAddrs,
	}
	for _, s := range strings.Split(*sections, ",") {
		s = strings.TrimSpace(s)
		switch {
		case s == "all":
			for _, a := range allSections {
				cfg.sections[a] = true
			}
		case contains(allSections, s), contains(optInSections, s):
			cfg.sections[s] = true
		case s == "":
		default:
			return config{}, fmt.Errorf("unknown section %q (want %s, %s or all)", s, strings.Join(allSections, ","), strings.Join(optInSections, ","))
		}
	}
	if cfg.entities < 1 || cfg.shards < 1 || cfg.messages < 1 || cfg.memEntities < 1 || cfg.latencySamples < 1 ||
		cfg.rebalanceShards < 3 || cfg.rebalanceInterval <= 0 || cfg.remoteMessages < 1 || cfg.remoteSamples < 1 || cfg.failoverRounds < 1 ||
		cfg.deliveryMessages < 1 || cfg.deliverySamples < 1 ||
		cfg.recoveryShards < 1 || cfg.recoveryRounds < 1 || cfg.scaleRegions < 1 || cfg.scaleShards < 1 || cfg.scaleRounds < 1 || cfg.scaleFailover < 2 || cfg.peersQueue < 0 || cfg.soakChurn <= 0 || cfg.reps < 1 {
		return config{}, errors.New("every count must be positive (rebalance-shards at least 3, scale-failover-regions at least 2) and the rebalance interval above zero")
	}
	return cfg, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(2)
	}
	stopProfile, err := startCPUProfile(cfg.cpuProfile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(2)
	}
	code := 0
	if cfg.role != "" {
		code = peerMain(cfg)
	} else if _, err := run(context.Background(), os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		code = 1
	}
	stopProfile()
	os.Exit(code)
}

// startCPUProfile starts writing a CPU profile to path, if there is one,
// and returns the function that ends it.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "cpu profile:", err)
		}
	}, nil
}

// figure is one row of the table: a protoshard figure, its baseline
// measured in the same run, and their ratio; paired fills in the figures.
type figure struct {
	Section  string `json:"section"`
	Workload string `json:"workload"`
	Unit     string `json:"unit"`
	// Protoshard and Baseline are the medians of the repetitions.
	Protoshard float64 `json:"protoshard"`
	Baseline   float64 `json:"baseline"`
	// BaselineName says what the baseline is.
	BaselineName string `json:"baseline_name"`
	// Ratio is the median of the repetitions' ratios protoshard /
	// baseline, each of two values measured back to back; RatioMin and
	// RatioMax are the lowest and highest of them.
	Ratio    float64 `json:"ratio"`
	RatioMin float64 `json:"ratio_min"`
	RatioMax float64 `json:"ratio_max"`
	// Reps is the number of repetitions, ProtoshardRuns and BaselineRuns
	// their values in the order measured.
	Reps           int       `json:"reps"`
	ProtoshardRuns []float64 `json:"protoshard_runs"`
	BaselineRuns   []float64 `json:"baseline_runs"`
	// HigherIsBetter tells a chart which way is good.
	HigherIsBetter bool `json:"higher_is_better"`
}

// report is the outcome of a run.
type report struct {
	GoVersion string   `json:"go_version"`
	GOOS      string   `json:"goos"`
	GOARCH    string   `json:"goarch"`
	CPUs      int      `json:"cpus"`
	Short     bool     `json:"short"`
	Started   string   `json:"started"`
	Settings  any      `json:"settings"`
	Figures   []figure `json:"figures"`
	// Extra are figures that are not a protoshard-vs-baseline row (such as
	// proto.actor grains against a direct Send), kept for the chart.
	Extra   []figure          `json:"extra,omitempty"`
	Skipped map[string]string `json:"skipped,omitempty"`
	Failed  map[string]string `json:"failed,omitempty"`
}

func (r *report) add(f figure) { r.Figures = append(r.Figures, f) }

func (r *report) addExtra(f figure) { r.Extra = append(r.Extra, f) }

// run runs the sections, prints the table on out, writes the JSON file if
// asked, and returns an error if a section failed.
func run(ctx context.Context, out io.Writer, cfg config) (*report, error) {
	rep := &report{
		GoVersion: runtime.Version(),
		GOOS:      runtime.GOOS,
		GOARCH:    runtime.GOARCH,
		CPUs:      runtime.NumCPU(),
		Short:     cfg.short,
		Started:   time.Now().UTC().Format(time.RFC3339),
		Settings: map[string]any{
			"entities":           cfg.entities,
			"shards":             cfg.shards,
			"messages":           cfg.messages,
			"mem_entities":       cfg.memEntities,
			"latency_samples":    cfg.latencySamples,
			"rebalance_shards":   cfg.rebalanceShards,
			"rebalance_interval": cfg.rebalanceInterval.String(),
			"remote_messages":    cfg.remoteMessages,
			"remote_samples":     cfg.remoteSamples,
			"delivery_messages":  cfg.deliveryMessages,
			"delivery_samples":   cfg.deliverySamples,
			"failover_rounds":    cfg.failoverRounds,
			"recovery_shards":    cfg.recoveryShards,
			"recovery_rounds":    cfg.recoveryRounds,
			"scale_regions":      cfg.scaleRegions,
			"scale_shards":       cfg.scaleShards,
			"scale_rounds":       cfg.scaleRounds,
			"scale_failover":     cfg.scaleFailover,
			"peers_queue":        cfg.peersQueue,
			"soak_duration":      cfg.soakDuration.String(),
			"soak_churn":         cfg.soakChurn.String(),
			"reps":               cfg.reps,
		},
		Skipped: map[string]string{},
		Failed:  map[string]string{},
	}
	fmt.Fprintf(out, "protoshard-bench: %s %s/%s, %d CPUs%s\n", rep.GoVersion, rep.GOOS, rep.GOARCH, rep.CPUs, map[bool]string{true: ", -short", false: ""}[cfg.short])
	type section struct {
		name string
		fn   func(context.Context, config, *report) error
	}
	// Memory runs first: the nodes of the other sections go on freeing
	// memory for a while after they stop (pending timers of their remotes),
	// which made the bare actors' heap grow less than it does alone (615
	// against 679 bytes per actor).
	for _, s := range []section{
		{"memory", benchMemory},
		{"local", benchLocal},
		{"latency", benchLatency},
		{"remote", benchRemote},
		{"grains", benchGrains},
		{"grains-remote", benchGrainsRemote},
		{"delivery", benchDelivery},
		{"failover", benchFailover},
		{"recovery", benchRecovery},
		{"scale", benchScale},
		{"peers", benchPeers},
		{"soak", benchSoak},
	} {
		if !cfg.sections[s.name] {
			continue
		}
		fmt.Fprintf(out, "running %s...\n", s.name)
		start := time.Now()
		timeout := cfg.sectionTimeout
		if s.name == "soak" {
			timeout = max(timeout, cfg.soakDuration+5*time.Minute)
		}
		sctx, cancel := context.WithTimeout(ctx, timeout)
		err := s.fn(sctx, cfg, rep)
		cancel()
		var skip *skipError
		switch {
		case errors.As(err, &skip):
			rep.Skipped[s.name] = skip.reason
			fmt.Fprintf(out, "  skipped %s: %s\n", s.name, skip.reason)
		case err != nil:
			rep.Failed[s.name] = err.Error()
			fmt.Fprintf(out, "  FAILED %s: %v\n", s.name, err)
		default:
			fmt.Fprintf(out, "  %s done in %v\n", s.name, time.Since(start).Round(100*time.Millisecond))
		}
		runtime.GC()
	}
	fmt.Fprintln(out)
	printTable(out, rep)
	var errs []error
	for _, f := range append(slices.Clone(rep.Figures), rep.Extra...) {
		if !validFigure(f) {
			errs = append(errs, fmt.Errorf("%s: %s: bad figure %v / %v, ratio %v (%v..%v) of %d runs",
				f.Section, f.Workload, f.Protoshard, f.Baseline, f.Ratio, f.RatioMin, f.RatioMax, f.Reps))
		}
	}
	for name, msg := range rep.Failed {
		errs = append(errs, fmt.Errorf("section %s: %s", name, msg))
	}
	if cfg.jsonPath != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err == nil {
			err = os.WriteFile(cfg.jsonPath, append(b, '\n'), 0o644)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("writing %s: %w", cfg.jsonPath, err))
		} else {
			fmt.Fprintf(out, "\nfigures written to %s\n", cfg.jsonPath)
		}
	}
	if cfg.svgPath != "" {
		f, err := os.Create(cfg.svgPath)
		if err == nil {
			err = writeSVG(f, rep)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("writing %s: %w", cfg.svgPath, err))
		} else {
			fmt.Fprintf(out, "chart written to %s\n", cfg.svgPath)
		}
	}
	return rep, errors.Join(errs...)
}

func valid(v float64) bool { return v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }

// validFigure: every value positive and finite, measured at least once,
// the ratio within its spread.
func validFigure(f figure) bool {
	return valid(f.Protoshard) && valid(f.Baseline) && valid(f.Ratio) && valid(f.RatioMin) && valid(f.RatioMax) &&
		f.Reps > 0 && f.RatioMin <= f.Ratio && f.Ratio <= f.RatioMax
}

// skipError skips a section with a reason (not a failure).
type skipError struct{ reason string }

func (e *skipError) Error() string { return "skipped: " + e.reason }

func printTable(out io.Writer, rep *report) {
	fmt.Fprintln(out, "| workload | protoshard | baseline | ratio |")
	fmt.Fprintln(out, "|---|---:|---:|---:|")
	for _, f := range rep.Figures {
		printRow(out, f)
	}
	for name, why := range rep.Skipped {
		fmt.Fprintf(out, "| %s: skipped (%s) | | | |\n", name, why)
	}
	for name, why := range rep.Failed {
		fmt.Fprintf(out, "| %s: FAILED (%s) | | | |\n", name, why)
	}
	if len(rep.Extra) > 0 {
		fmt.Fprintln(out)
		fmt.Fprintln(out, "proto.actor grains against their own baseline (for reference):")
		fmt.Fprintln(out)
		fmt.Fprintln(out, "| workload | grains | baseline | ratio |")
		fmt.Fprintln(out, "|---|---:|---:|---:|")
		for _, f := range rep.Extra {
			printRow(out, f)
		}
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "protoshard and baseline: medians of the runs, each run measuring both back to back, which first alternating.")
	fmt.Fprintln(out, "ratio = protoshard / baseline: the median of the runs' ratios, the lowest and highest in brackets.")
}

func printRow(out io.Writer, f figure) {
	fmt.Fprintf(out, "| %s: %s (baseline: %s) | %s %s | %s %s | %s |\n",
		f.Section, f.Workload, f.BaselineName, num(f.Protoshard), f.Unit, num(f.Baseline), f.Unit, ratioText(f))
}

// ratioText is the ratio with the spread of the runs' ratios:
// "0.52 (0.41–0.63)", or the ratio alone when there is one run.
func ratioText(f figure) string {
	if f.Reps < 2 {
		return fmt.Sprintf("%.2f", f.Ratio)
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", f.Ratio, f.RatioMin, f.RatioMax)
}

// num formats a figure with 3 significant digits, without exponents.
func num(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}
