package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Record is one line of a ledger. Every process of a run writes its own
// ledger; the fields used depend on Ev (see the ev* constants).
type Record struct {
	// T is the wall-clock time of the event in Unix nanoseconds. All
	// processes run on one machine, so their clocks agree.
	T  int64  `json:"t"`
	Ev string `json:"ev"`
	// Node is the process that wrote the record ("n3", "loadgen"), or, in
	// the orchestrator's records, the node process the record is about.
	Node string `json:"node,omitempty"`
	// Ent is an entity id.
	Ent string `json:"ent,omitempty"`
	// Shard is a shard id (evAlloc).
	Shard string `json:"shard,omitempty"`
	// Inc is an incarnation: node name, actor id and a per-process counter.
	Inc string `json:"inc,omitempty"`
	// Snd and Seq name a numbered message: the sender and its sequence
	// number for (Snd, Ent).
	Snd string `json:"snd,omitempty"`
	Seq int64  `json:"seq,omitempty"`
	// Reason is why a message was dropped, or a note.
	Reason string `json:"reason,omitempty"`
	// Src is where a drop was reported: srcDeadletter or srcProto.
	Src string `json:"src,omitempty"`
	// Probe is the number of a probe round.
	Probe int `json:"probe,omitempty"`
	// Fault is the number of a fault (orchestrator records).
	Fault int `json:"fault,omitempty"`
	// PID is an OS process id (orchestrator records).
	PID int `json:"pid,omitempty"`
	// Lease is the run's lease (evRun: -lease), ShardLease whether the
	// shards were on it too.
	Lease      string `json:"lease,omitempty"`
	ShardLease bool   `json:"shard_lease,omitempty"`
	// Addr is a proto.actor address; Member a membership member id.
	Addr   string `json:"addr,omitempty"`
	Member string `json:"member,omitempty"`
	// Unconfirmed and Resent are the reliable producers' counts at the
	// end of the drain (evDrained).
	Unconfirmed int64 `json:"unconfirmed,omitempty"`
	Resent      int64 `json:"resent,omitempty"`
	// Token and Rev are a durable state entity's fencing token and the
	// revision of the record it wrote (evClaim, evSave), or, in evFencedSave
	// and evSaveFailed, the token it tried to write with.
	Token uint64 `json:"token,omitempty"`
	Rev   uint64 `json:"rev,omitempty"`
}

// Time returns T as a time.Time.
func (r Record) Time() time.Time { return time.Unix(0, r.T) }

// Events of the ledgers.
const (
	// Written by node processes.
	evReady   = "ready"  // the node (or the load generator) joined and serves; Addr, Member
	evStart   = "start"  // an entity incarnation started; Ent, Inc
	evStop    = "stop"   // an entity incarnation stopped; Ent, Inc
	evRecv    = "recv"   // an entity received a numbered message; Ent, Inc, Snd, Seq
	evProbe   = "probe"  // an entity answered a probe; Ent, Inc, Probe
	evSStart  = "sstart" // the singleton started; Inc
	evSStop   = "sstop"  // the singleton stopped; Inc
	evSTick   = "stick"  // the singleton did its periodic work; Inc
	evMember  = "member" // a membership event seen by the node; Reason (kind), Addr, Member
	evLeaving = "leaving"
	evLeft    = "left" // the graceful leave finished; Reason holds an error if it failed
	// evAlloc: the coordinator on this node picked a home for a shard
	// (its allocation strategy's choice, before the coordinator's state
	// was written); Shard, Addr (the home region's address).
	evAlloc = "alloc"
	// evFenced: a reliable entity's incarnation stopped without applying
	// or confirming a message because its record's write failed (another
	// incarnation wrote since: it was a zombie; or the lock stayed busy);
	// Ent, Inc, Snd, Seq, Reason.
	evFenced = "fenced"

	// Written by the durable state entities (stateEntity). evClaim: an
	// incarnation recovered and claimed its record; Ent, Inc, Token, Rev.
	// evSave: an update was saved; Ent, Inc, Token, Rev, Snd and Seq (the
	// update). evFencedSave: a save refused with durablestate.ErrFenced;
	// evSaveFailed: a recovery or save that failed otherwise (Consul down
	// or wiped); both Ent, Inc, Token, Reason, and Snd, Seq of a save.
	evClaim      = "claim"
	evSave       = "save"
	evFencedSave = "save-fenced"
	evSaveFailed = "save-failed"

	// Written by every process that runs an actor system.
	evDrop = "drop" // a dead-letter event naming a numbered message; Src, Reason, Snd, Ent, Seq

	// Written by the load generator.
	evSent   = "sent"   // a numbered message, just before it was sent; Snd, Ent, Seq
	evAnswer = "answer" // a probe answer arrived; Ent, Inc, Probe
	// In a reliable run a message is recorded as sent once the producer
	// accepted it. evUnsure: a Send whose outcome is unknown (it timed
	// out); Snd, Ent, Seq, Reason. evDrained: the senders stopped and the
	// producers were drained; Unconfirmed (with the buffered ones), Resent.
	evUnsure  = "unsure"
	evDrained = "drained"
	// evUpdate: an update request to a durable state entity, just before
	// it was sent; evUpdated: its answer, sent by the entity only after
	// the update was saved. Both Snd, Ent, Seq.
	evUpdate  = "update"
	evUpdated = "updated"

	// Written by the orchestrator about node processes (Node) and Consul.
	evSpawn       = "spawn"  // a node process started; PID
	evKill        = "kill"   // SIGKILL sent
	evFreeze      = "freeze" // SIGSTOP sent
	evThaw        = "thaw"   // SIGCONT sent
	evCut         = "cut"    // the node's network link went down
	evHeal        = "heal"   // and up again
	evTerm        = "term"   // SIGTERM sent (graceful leave)
	evExit        = "exit"   // the process ended; Reason holds its status
	evConsulStop  = "consul-stop"
	evConsulStart = "consul-start"
	evFault       = "fault"     // a fault began; Fault, Reason (its kind), Node (its target)
	evFaultEnd    = "fault-end" // and ended; Fault, Reason (what happened, or why it could not be injected)
	evEnd         = "end"       // the end of the observation: later records are ignored
	evRun         = "run"       // the run began; Reason: its mode (modeReliable or modeAtMostOnce); Lease, ShardLease
)

// memberRemoved is the Reason of an evMember record of another member
// removed without leaving (failure detection); a graceful removal and the
// node's own removal say so after it.
const memberRemoved = "removed"

// Modes of a run (evRun).
const (
	modeAtMostOnce = "at-most-once"
	modeReliable   = "reliable"
)

// Where a drop was reported.
const (
	srcDeadletter = "deadletter" // protoshard's *deadletter.Event, with a reason
	srcProto      = "proto"      // proto.actor's *actor.DeadLetterEvent, without one
	// srcConsumer: a reliable entity's ShardingConsumerController
	// discarded the message (no dead letter: nothing is lost), with
	// reasonDuplicate or reasonNotYetApplied.
	srcConsumer = "consumer"
)

// Reasons of the drops by a reliable entity's consumer.
const (
	reasonDuplicate     = "duplicate of a message the entity applied"
	reasonNotYetApplied = "out of order, not applied yet (resent)"
)

// ledger appends records to a file. Each record is one write(2) of one
// line on a file opened with O_APPEND and no user-space buffer, so a line
// that was written survives a kill -9 of the process, and lines of
// concurrent writers never interleave.
type ledger struct {
	f    *os.File
	node string
}

func openLedger(path, node string) (*ledger, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening ledger: %w", err)
	}
	return &ledger{f: f, node: node}, nil
}

// write stamps r with the time and the writer's node (unless set) and
// appends it. A failed write is reported on stderr: the ledger is the
// measurement, a gap in it must not pass unnoticed.
func (l *ledger) write(r Record) {
	if r.T == 0 {
		r.T = time.Now().UnixNano()
	}
	if r.Node == "" {
		r.Node = l.node
	}
	b, err := json.Marshal(r)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ledger %s: %v\n", l.node, err)
		return
	}
	b = append(b, '\n')
	if _, err := l.f.Write(b); err != nil {
		fmt.Fprintf(os.Stderr, "ledger %s: %v\n", l.node, err)
	}
}

func (l *ledger) close() error { return l.f.Close() }

// ledgerSuffix ends the name of every ledger file in a run's directory.
const ledgerSuffix = ".ledger.jsonl"

// parseLedger reads one ledger. A line that does not parse (the last line
// of a process killed in the middle of a write, which a kill cannot cut
// short on a regular file, but a full disk could) is counted, not fatal.
func parseLedger(r io.Reader) (recs []Record, bad int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var rec Record
		if err := json.Unmarshal(line, &rec); err != nil || rec.Ev == "" || rec.T == 0 {
			bad++
			continue
		}
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		return recs, bad, fmt.Errorf("reading ledger: %w", err)
	}
	return recs, bad, nil
}

// readLedgers reads every ledger of dir and merges them in time order
// (records of one time keep their order within a file).
func readLedgers(dir string) (recs []Record, bad int, err error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*"+ledgerSuffix))
	if err != nil {
		return nil, 0, fmt.Errorf("listing ledgers: %w", err)
	}
	if len(paths) == 0 {
		return nil, 0, errors.New("no ledgers in " + dir)
	}
	sort.Strings(paths)
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, 0, fmt.Errorf("opening ledger: %w", err)
		}
		rs, b, err := parseLedger(f)
		_ = f.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", filepath.Base(p), err)
		}
		recs = append(recs, rs...)
		bad += b
	}
	sortRecords(recs)
	return recs, bad, nil
}

// sortRecords orders records by time, stably.
func sortRecords(recs []Record) {
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].T < recs[j].T })
}

// ledgerPath is the ledger file of the process named name in dir.
func ledgerPath(dir, name string) string {
	return filepath.Join(dir, strings.ReplaceAll(name, "/", "_")+ledgerSuffix)
}
