// Command protoshard-chaos runs a real multi-process cluster under faults
// and reports whether cluster sharding's and the cluster singleton's
// promises held.
//
// It starts a Consul dev agent (internal/consulagent; the binary from
// scripts/install-consul.sh or PROTOSHARD_CONSUL), several node processes
// and one load generator process, all this program run again with a
// -role flag:
//
//   - a node is a member with the role "node" over Consul membership (a
//     short TTL, 3s by default, and RejoinAfterRemoval, so a fenced node
//     comes back as a new member), a region of one entity type whose
//     coordinator keeps its state in Consul KV, and a cluster singleton
//     that records a tick of work every 250ms and stops itself after 5 to
//     20s, so that its manager starts it again after the restart back-off;
//     the coordinator and the singleton run only while their node holds
//     a lease (-lease, below);
//   - the load generator is a member without that role, with a proxy
//     region (StartProxy): its senders send numbered messages (sender,
//     entity, a sequence number per sender and entity; every other one in
//     a ShardingEnvelope) to entities picked at random, at a steady rate,
//     and it probes every entity with a
//     request after each fault.
//
// As root, with iproute2, every node runs in a network namespace of its
// own, joined by a veth pair to a bridge (10.77.0.0/24), so that one node
// can be cut off the network; the namespaces, links and bridge are removed
// at the end and at the start of the next run. Elsewhere the processes talk
// over loopback and the partition fault is skipped with the reason (a
// failure when CI=true).
//
// Faults, in a random order (the seed is printed; -seed repeats a run):
//
//   - kill: kill -9 of a random node, then a replacement node;
//   - kill-coordinator: kill -9 of the oldest node (the coordinator's and
//     singleton's; the smallest CreateIndex in Consul), then a replacement;
//   - pause: SIGSTOP of a random node for TTL+5s, then SIGCONT;
//   - leave: SIGTERM to a random node, which leaves gracefully (handing
//     off its shards and the singleton) and exits, then a replacement;
//   - consul-restart: the Consul agent stopped and started again, empty,
//     on the same ports (down for TTL/2 and TTL+2s in turn);
//   - partition: a random node's link down for TTL+5s, then up again;
//   - partition-oldest: the same for the oldest node, which runs the
//     coordinator and the singleton: it must stop both before another
//     node starts them.
//
// The report shows, for kill-coordinator and partition-oldest, when the
// singleton's last incarnation on the node hit ended and when another
// node started one, both from the fault's start.
//
// The coordinator's and the singleton's managers use a lease (Akka's
// use-lease; LeaseRetryInterval 1s, not Akka's 5s, which would add up to
// 5s to every failover), named after the run's Consul service, so under
// protoshard/<service>/lease/:
//
//   - -lease cas (default): lease/consulcas on its defaults, a
//     compare-and-set record renewed every second; a holder cut off from
//     Consul gives up 3.95s after its last renewal, another node takes
//     over no sooner than 6.05s after it;
//   - -lease session: lease/consul, a session of Consul's shortest TTL
//     (10s) renewed every second, safety margin 2s, lock delay 3s;
//   - -lease none: membership's removal margin alone.
//
// Two records, each rewritten every second: with the coordinator's state
// 2 to 5 Raft writes a second in Consul.
//
// -shard-lease puts every shard on the lease too (Akka's sharding
// use-lease). It is off by default: with the compare-and-set lease that
// is one record per shard rewritten every second (measured: 102 records,
// about 80 Raft writes a second to Consul, growing with the shards, for
// one entity type); a Consul restart takes every record away at once, so
// that every shard of the cluster stops with its entities; and a shard
// counts the takeover wait only from its first acquisition, so the shards
// of a crashed or cut-off node start elsewhere about 6s later (every
// entity answered 14 to 15s after a kill of the oldest or a cut, against
// 7 to 8s). Without it, entities stay single by the regions' fencing
// (docs/fencing.md): a node whose membership is stale (no confirmed
// refresh within the TTL) starts and delivers nothing and stops its
// shards before the others' removal margin has passed.
//
// The full run (5 minutes by default) injects every fault several times;
// -short injects each once and takes under 3 minutes. After each fault the
// load generator asks every entity until each answered: the time from the
// fault's start until the last first answer is its recovery time.
//
// Every process writes a ledger (one JSON line per event, each line one
// write(2) to an O_APPEND file, so that what was written survives a kill
// -9): entity and singleton starts, stops and activity, receipts, messages
// sent, the shard homes the coordinator picks (evidence only, for a shard
// allocated to a node that was cut off before any of its entities
// started there), dead-letter events naming a message (protoshard's
// *deadletter.Event with its reason, proto.actor's *actor.DeadLetterEvent),
// probe answers, and the orchestrator's kills, freezes, cuts and process
// exits. After the senders stop and a quiet period passes, the merged
// ledgers are judged by these rules:
//
//   - An incarnation (one activation of an entity, or of the singleton,
//     named by node, actor id and a per-process counter) is alive from its
//     start record to its stop record. Without a stop record it ends when
//     its node was killed with -9, else when its process exited, else at
//     the end of the observation.
//   - A node frozen by SIGSTOP still holds its incarnations. One alive when
//     the freeze began that, after SIGCONT, records nothing but its stop
//     (no receipt, probe answer or singleton tick) counts as ended when the
//     freeze began: it did nothing anybody could see. One that records
//     activity after the freeze began counts as alive until its last such
//     record, so it overlaps an incarnation that started before that
//     record.
//   - Overlapping activations (overlapping singletons): pairs of
//     incarnations of one entity (of the singleton) alive at once.
//   - Sent: messages the load generator recorded before sending. Delivered:
//     received at least once. Duplicated: received more than once. Dropped:
//     not received, and a dead-letter event names it (by reason). Lost in
//     flight to a crashed node: not received, no dead-letter event, and an
//     incarnation of the entity that started before the send (or within 5s
//     after it) was ended by a kill -9 of its node within 5s after the
//     send, or shortly before it (up to TTL+2s, at least 5s: senders route
//     to a dead node until membership removes it); or whose node was
//     frozen or cut off while the message was on its way (sent during the
//     isolation or up to 5s before it): the others removed that node as
//     crashed, and what was in flight to it is lost the same way (a region
//     cannot tell a paused node from a dead one). Where the message's own
//     entity had no incarnation there yet, the other entities of its shard
//     tell where the shard lived (they all live on the shard's node). A
//     message sent while its shard had no home the ledgers show (between a
//     hand-off and the next start, or while the old home stopped within a
//     second: passed on to the next) counts as lost to a kill -9 within 5s
//     after the send, or up to TTL+2s before it, when the shard started
//     again only after that kill; or to a node cut off the network while
//     the message was on its way (as above), when the load generator saw
//     that node removed after the send and the shard started again only
//     after that: it had been allocated to the cut-off node (a shard
//     handed off to a live node starts there at once), and the load
//     generator routed the message there. Not for a freeze (a frozen
//     node reads what was sent to it after SIGCONT) nor a cut of the
//     oldest node (the coordinator's: the others hold such messages
//     until a new coordinator answers).
//     Unaccounted: all other messages that were not received.
//   - Order violations: receipts by an entity (any incarnation) of a lower
//     sequence number from a sender after a higher one; counted in the
//     window of the late message's send.
//
// Each finding is also counted in the window of the fault during which it
// happened (from that fault's start to the next one's), with examples
// from the ledgers. The exit status is 1 when there were overlapping
// activations or singletons, unaccounted messages or order violations, or
// a fault could not be injected.
//
// Every run but a reliable one also checks durable entity state (package
// durablestate): entities st-000 to st-019 (-state-entities) of the same
// entity type keep their state in durablestate/consul, under the run's
// cluster (protoshard/<service>/durable-state/Chaos/). The load
// generator sends them 10 update requests a second in all (-state-rate;
// cheap next to the numbered messages, so part of the default run), each
// a request for its answer. An entity recovers its record when it starts
// (durablestate.Recover: a claim with the stored token plus one), appends
// the update's (sender, seq) to its stored list, persists the list, and
// answers only after the save succeeded; a refused save stops it
// unanswered. The ledgers get every claim and save with its token and
// revision, every refusal (ErrFenced, or another failure), every request
// and every answer; after the processes stop, the orchestrator reads the
// records from Consul (state-final.json in -dir). The judge:
//
//   - stale writes accepted: an entity's accepted writes (claims and
//     saves), ordered by revision, whose token is lower than an earlier
//     one's; with two at one revision (a revision clash);
//   - lost updates: answered updates missing from the final record;
//   - a Consul restart starts it empty: records, revisions and tokens
//     start again, and what the entities saved before is gone (the
//     store's documented limit). A write belongs to the Consul epoch of
//     its ledger time (a write recorded while Consul was down was
//     accepted before); revisions and tokens are compared within an epoch.
//     Just before each Consul stop the orchestrator reads the records
//     (state-before-wipe-<n>.json): an answered update saved in an
//     earlier epoch, recorded before that read began, must be in what it
//     read; one missing from the final record is counted as lost to the
//     Consul wipe, no failure (as unchecked when it was saved after the
//     read);
//   - answered updates without a save record and stored updates never
//     requested are failures, as a final state that could not be read.
//
// With -reliable the run checks reliable delivery with stored progress
// (package actorsharding/delivery) instead of at-most-once sends:
//
//   - each sender sends through a ShardingProducerController of its own
//     (producer ID = sender name; ResendFirstUnconfirmedIdleTimeout 2s),
//     and a message counts as sent when Send returned nil (a full buffer
//     refuses it: not counted, the sender waits);
//   - each entity embeds a ShardingConsumerController and keeps a record,
//     per sender the highest seq applied, how many it applied, how many
//     it processed twice and its gaps, together with the consumer's
//     progress, in a file of the run's directory (entities/<id>.state)
//     replaced only by compare-and-set (flock without blocking, bounded,
//     so a frozen holder cannot wedge the others). It survives kill -9 and
//     Consul restarts. Each delivery is one write of the record with
//     ProgressAfter, then the receipt in the ledger, then Confirm; a
//     failed write (another incarnation wrote since: a zombie after a
//     pause) stops the incarnation without confirming (a "fenced" record);
//   - after the senders stop, the load generator waits until its
//     producers hold nothing unconfirmed (at most 60s, 30s with -short);
//   - the judge reads the records: lost = Σ over (sender, entity) of the
//     highest seq accepted minus the seqs applied, processed twice, gaps,
//     and the messages still unconfirmed; each must be 0. It reports the
//     copies of applied messages the consumers discarded, the resends
//     and the fenced incarnations. The ledger's unaccounted messages and
//     order violations are reported but no failure: the records, not the
//     receipt lines, hold what was applied and in what order.
//
// Usage:
//
//	go run ./cmd/protoshard-chaos              # about 5 minutes
//	go run ./cmd/protoshard-chaos -short       # under 3 minutes
//	go run ./cmd/protoshard-chaos -short -reliable
//	go run ./cmd/protoshard-chaos -short -lease none
//	go run ./cmd/protoshard-chaos -json report.json -seed 42
//
// The ledgers and the processes' logs stay in -dir (a new temporary
// directory by default), named in the report.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// config is what a run (or one of its processes) does.
type config struct {
	short    bool
	nodes    int
	senders  int
	entities int
	rate     int // messages a second per sender
	shards   int
	duration time.Duration
	seed     int64
	ttl      time.Duration
	quiet    time.Duration
	jsonPath string
	dir      string
	netns    bool
	// reliable: the senders send through reliable delivery and the
	// entities store their progress with their effects.
	reliable bool
	// stateEntities durable state entities get stateRate update requests
	// a second in all (none in a reliable run, whose entities are others).
	stateEntities int
	stateRate     int
	// lease: the lease the coordinator and the singleton run on
	// (leaseCAS, leaseSession or leaseNone); shardLease puts every shard
	// on it as well.
	lease      string
	shardLease bool
	// analyzeDir: judge an earlier run's ledgers instead of running.
	analyzeDir string

	// A process of the run (-role): its name, where it binds, its Consul
	// and the run's Consul service.
	role       string
	name       string
	bind       string
	consulAddr string
	service    string
}

// Roles of the processes of a run.
const (
	roleNode    = "node"
	roleLoadgen = "loadgen"
)

func parseFlags(args []string, errOut io.Writer) (config, error) {
	fs := flag.NewFlagSet("protoshard-chaos", flag.ContinueOnError)
	fs.SetOutput(errOut)
	short := fs.Bool("short", false, "inject each fault once, with fewer entities: under 3 minutes")
	nodes := fs.Int("nodes", 4, "node processes")
	senders := fs.Int("senders", 3, "senders in the load generator")
	entities := fs.Int("entities", 0, "entities (default 2000, 400 with -short)")
	rate := fs.Int("rate", 100, "numbered messages a second per sender")
	shards := fs.Int("shards", 100, "number of shards")
	duration := fs.Duration("duration", -1, "inject faults for this long, every fault at least twice (default 5m; with -short one of each)")
	seed := fs.Int64("seed", 0, "seed of the fault order, targets and senders (default: from the clock)")
	ttl := fs.Duration("ttl", 3*time.Second, "Consul check TTL of the members, also the removal margin")
	quiet := fs.Duration("quiet", 0, "quiet period after the senders stop, before judging (default 15s, 10s with -short)")
	jsonPath := fs.String("json", "", "also write the report as JSON to this file")
	dir := fs.String("dir", "", "directory for the ledgers and logs (default: a new temporary directory)")
	netns := fs.Bool("netns", true, "run nodes in network namespaces (needs root) so that the partition fault can run")
	reliable := fs.Bool("reliable", false, "send through reliable delivery to entities that store their progress; judge exactly-once processing")
	stateEntities := fs.Int("state-entities", 20, "durable state entities (state in Consul KV) that apply update requests; 0: none (always none with -reliable)")
	stateRate := fs.Int("state-rate", 10, "update requests a second to the durable state entities, in all")
	leaseKind := fs.String("lease", leaseCAS, "the lease the coordinator and the singleton run on: "+leaseCAS+" (lease/consulcas), "+leaseSession+" (lease/consul) or "+leaseNone)
	shardLease := fs.Bool("shard-lease", false, "also put every shard on the lease (Akka's sharding use-lease)")
	analyzeDir := fs.String("analyze", "", "judge the ledgers an earlier run left in this directory again, instead of running (with that run's -ttl)")
	role := fs.String("role", "", "internal: the role of this process ("+roleNode+", "+roleLoadgen+")")
	name := fs.String("name", "", "internal: the name of this process")
	bind := fs.String("bind", "127.0.0.1", "internal: the address the process's remote binds")
	consulAddr := fs.String("consul", "", "internal: the Consul HTTP address")
	service := fs.String("service", "", "internal: the Consul service of the run")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	cfg := config{
		short: *short, nodes: *nodes, senders: *senders, entities: *entities, rate: *rate, shards: *shards,
		duration: *duration, seed: *seed, ttl: *ttl, quiet: *quiet, jsonPath: *jsonPath, dir: *dir, netns: *netns,
		reliable: *reliable, stateEntities: *stateEntities, stateRate: *stateRate, lease: *leaseKind, shardLease: *shardLease, analyzeDir: *analyzeDir, role: *role, name: *name, bind: *bind, consulAddr: *consulAddr, service: *service,
	}
	if cfg.entities == 0 {
		cfg.entities = 2000
		if cfg.short {
			cfg.entities = 400
		}
	}
	if cfg.duration < 0 {
		cfg.duration = 5 * time.Minute
		if cfg.short {
			cfg.duration = 0
		}
	}
	if cfg.quiet == 0 {
		cfg.quiet = 15 * time.Second
		if cfg.short {
			cfg.quiet = 10 * time.Second
		}
	}
	if cfg.reliable {
		cfg.stateEntities = 0
	}
	if cfg.seed == 0 {
		cfg.seed = time.Now().UnixNano() % 1_000_000_007
	}
	switch {
	case cfg.nodes < 2:
		return config{}, errors.New("-nodes must be at least 2 (a fault takes one away)")
	case cfg.nodes > 200:
		return config{}, errors.New("-nodes must be at most 200")
	case cfg.senders < 1 || cfg.entities < 1 || cfg.rate < 1 || cfg.shards < 1:
		return config{}, errors.New("-senders, -entities, -rate and -shards must be positive")
	case cfg.stateEntities < 0 || cfg.stateEntities > 999 || cfg.stateRate < 1:
		return config{}, errors.New("-state-entities must be within 0 and 999, -state-rate positive")
	case cfg.ttl < time.Second:
		return config{}, errors.New("-ttl must be at least 1s")
	case cfg.lease != leaseCAS && cfg.lease != leaseSession && cfg.lease != leaseNone:
		return config{}, fmt.Errorf("-lease %q: want %s, %s or %s", cfg.lease, leaseCAS, leaseSession, leaseNone)
	case cfg.shardLease && cfg.lease == leaseNone:
		return config{}, errors.New("-shard-lease needs a lease (-lease " + leaseCAS + " or " + leaseSession + ")")
	case cfg.role != "" && (cfg.name == "" || cfg.consulAddr == "" || cfg.service == "" || cfg.dir == ""):
		return config{}, errors.New("a process of a run needs -name, -consul, -service and -dir")
	}
	return cfg, nil
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
	if cfg.role != "" {
		os.Exit(roleMain(cfg))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var rep *Report
	if cfg.analyzeDir != "" {
		rep, err = reanalyze(os.Stdout, cfg, cfg.analyzeDir)
	} else {
		rep, err = run(ctx, os.Stdout, cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	if len(rep.Failures) > 0 {
		os.Exit(1)
	}
}

// roleMain runs one process of a run.
func roleMain(cfg config) int {
	switch cfg.role {
	case roleNode:
		return nodeMain(cfg)
	case roleLoadgen:
		return loadgenMain(cfg)
	}
	fmt.Fprintf(os.Stderr, "unknown role %q (want %s)\n", cfg.role, strings.Join([]string{roleNode, roleLoadgen}, " or "))
	return 2
}
