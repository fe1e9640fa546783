package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Report is the outcome of a run, printed as text and written as JSON.
type Report struct {
	Seed     int64    `json:"seed"`
	Short    bool     `json:"short"`
	Started  string   `json:"started"`
	Ended    string   `json:"ended"`
	Dir      string   `json:"dir"`
	Settings Settings `json:"settings"`
	// WarmUp is the probe of every entity before the first fault.
	WarmUp *Recovery `json:"warm_up,omitempty"`
	Faults []*Fault  `json:"faults"`
	// ByKind adds up the faults of each kind.
	ByKind []KindSummary `json:"by_kind"`
	// Skipped names fault kinds that could not run here, with the reason.
	Skipped  map[string]string `json:"skipped,omitempty"`
	Findings Findings          `json:"findings"`
	// Reliable holds a reliable run's findings (-reliable), judged from
	// the entities' records.
	Reliable *ReliableFindings `json:"reliable,omitempty"`
	// State holds the durable state entities' findings, judged from the
	// ledgers and the records Consul held at the end.
	State *StateFindings `json:"durable_state,omitempty"`
	// Failures say why the run failed (exit status 1); empty when every
	// promise held and every fault was injected.
	Failures []string `json:"failures,omitempty"`
	// Warnings report what went wrong besides (a node that exited on its
	// own).
	Warnings []string `json:"warnings,omitempty"`
}

// Settings of the run.
type Settings struct {
	Nodes         int    `json:"nodes"`
	Senders       int    `json:"senders"`
	Entities      int    `json:"entities"`
	RatePerSender int    `json:"rate_per_sender"`
	Shards        int    `json:"shards"`
	TTL           string `json:"ttl"`
	Duration      string `json:"duration"`
	Quiet         string `json:"quiet"`
	Netns         bool   `json:"netns"`
	Reliable      bool   `json:"reliable,omitempty"`
	// Lease is what the coordinator and the singleton ran on (-lease);
	// ShardLease: the shards too.
	Lease      string `json:"lease,omitempty"`
	ShardLease bool   `json:"shard_lease,omitempty"`
}

// Fault is one injected fault.
type Fault struct {
	N    int    `json:"n"`
	Kind string `json:"kind"`
	// Node is the node process it hit ("consul" for the agent).
	Node string `json:"node"`
	PID  int    `json:"pid,omitempty"`
	// Start and End span the injection: from the signal (or the cut, or
	// Consul's stop) until the node was replaced, resumed, reconnected,
	// or Consul was back.
	Start       time.Time `json:"start"`
	End         time.Time `json:"end"`
	Detail      string    `json:"detail,omitempty"`
	Replacement string    `json:"replacement,omitempty"`
	// Error says why the fault could not be injected.
	Error string `json:"error,omitempty"`
	// Note reports something the cluster did wrong during the fault
	// that is not one of the counted findings (a leave that failed).
	Note     string    `json:"note,omitempty"`
	Recovery *Recovery `json:"recovery,omitempty"`
	// Singleton is how the singleton (and the coordinator, on the same
	// node) left the node a fault on the oldest node hit.
	Singleton *SingletonMove `json:"singleton,omitempty"`
	// Counts are the findings in this fault's window.
	Counts Counts `json:"counts"`
	// Reliable are a reliable run's findings in this fault's window.
	Reliable *ReliableCounts `json:"reliable,omitempty"`
}

// Recovery is a probe of every entity after a fault.
type Recovery struct {
	Answered    int  `json:"answered"`
	Total       int  `json:"total"`
	AllAnswered bool `json:"all_answered"`
	// SinceStartS and SinceEndS: seconds from the fault's start (end)
	// until the last entity's first answer; set when all answered.
	SinceStartS float64 `json:"since_start_s,omitempty"`
	SinceEndS   float64 `json:"since_end_s,omitempty"`
}

// judge fills Failures: the four promises, and every fault injected. A
// kind skipped because this machine cannot run it is a failure only in CI.
//
// A reliable run is judged by its entities' records instead of the
// receipts in the ledgers: lost, processed twice, gaps, and messages left
// unconfirmed. Its unaccounted messages and order violations (from the
// receipts) are reported but are no failures: a node killed between an
// entity's write and its receipt line leaves a message applied without a
// receipt, and a receipt's time is when the line was written, which a
// pause can delay past a later message's receipt; the records hold what
// was applied, in what order.
func (r *Report) judge(ci bool) {
	r.Failures = nil
	f := r.Findings
	if f.OverlappingActivations > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%d overlapping activations (%d entities)", f.OverlappingActivations, f.EntitiesWithOverlap))
	}
	if f.OverlappingSingletons > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%d overlapping singletons", f.OverlappingSingletons))
	}
	if r.Reliable != nil {
		r.Failures = append(r.Failures, r.Reliable.failures()...)
	} else {
		if f.Unaccounted > 0 {
			r.Failures = append(r.Failures, fmt.Sprintf("%d unaccounted messages", f.Unaccounted))
		}
		if f.OrderViolations > 0 {
			r.Failures = append(r.Failures, fmt.Sprintf("%d order violations", f.OrderViolations))
		}
	}
	if r.State != nil {
		r.Failures = append(r.Failures, r.State.failures()...)
	}
	for _, ft := range r.Faults {
		if ft.Error == "" {
			continue
		}
		if _, skipped := r.Skipped[ft.Kind]; skipped && !ci {
			continue
		}
		r.Failures = append(r.Failures, fmt.Sprintf("fault %d (%s) could not be injected: %s", ft.N, ft.Kind, ft.Error))
	}
	if f.Sent == 0 {
		r.Failures = append(r.Failures, "no messages were sent")
	}
}

// writeText prints the report for people.
func (r *Report) writeText(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	s := r.Settings
	p("")
	p("== protoshard chaos report ==")
	p("seed %d%s; %d nodes, %d senders x %d msgs/s, %d entities in %d shards, TTL %s, network namespaces %v",
		r.Seed, map[bool]string{true: " (-short)", false: ""}[r.Short], s.Nodes, s.Senders, s.RatePerSender, s.Entities, s.Shards, s.TTL, s.Netns)
	if s.Lease != "" {
		p("lease of the coordinator and the singleton: %s%s", s.Lease, map[bool]string{true: "; the shards on it too"}[s.ShardLease])
	}
	if s.Reliable {
		p("reliable delivery: one ShardingProducerController per sender; entities store their progress with their effects")
	}
	p("ledgers and logs: %s", r.Dir)
	for kind, why := range r.Skipped {
		p("skipped %s: %s", kind, why)
	}
	p("")
	p("faults:")
	p("  %-3s %-17s %-7s %-12s %-9s %-9s %s", "n", "kind", "node", "start", "span", "recovery", "in its window: overlaps/singletons/dropped/lost/unaccounted/order/dup")
	for _, f := range r.Faults {
		rec := "-"
		if f.Recovery != nil {
			if f.Recovery.AllAnswered {
				rec = fmt.Sprintf("%.1fs", f.Recovery.SinceStartS)
			} else {
				rec = fmt.Sprintf("%d/%d", f.Recovery.Answered, f.Recovery.Total)
			}
		}
		c := f.Counts
		p("  %-3d %-17s %-7s %-12s %-9s %-9s %d/%d/%d/%d/%d/%d/%d", f.N, f.Kind, f.Node, f.Start.Format("15:04:05.000"),
			fmt.Sprintf("%.1fs", f.End.Sub(f.Start).Seconds()), rec,
			c.OverlappingActivations, c.OverlappingSingletons, c.Dropped, c.LostToCrash, c.Unaccounted, c.OrderViolations, c.Duplicated)
		if f.Detail != "" {
			p("      %s", f.Detail)
		}
		if f.Error != "" {
			p("      NOT INJECTED: %s", f.Error)
		}
		if m := f.Singleton; m != nil {
			p("      singleton: %s", m)
		}
		if f.Note != "" {
			p("      note: %s", f.Note)
		}
	}
	if len(r.ByKind) > 0 {
		p("")
		p("by kind (recovery: until every entity answered again, from the fault's start, median / max):")
		p("  %-17s %6s %8s %10s %7s %5s %11s %5s %4s  %s", "kind", "faults", "overlaps", "singletons", "dropped", "lost", "unaccounted", "order", "dup", "recovery")
		for _, k := range r.ByKind {
			c := k.Counts
			rec := "-"
			if k.Recovered > 0 {
				rec = fmt.Sprintf("%.1fs / %.1fs", k.RecoveryMedianS, k.RecoveryMaxS)
			}
			if k.NotRecovered > 0 {
				rec += fmt.Sprintf(" (%d not recovered)", k.NotRecovered)
			}
			p("  %-17s %6d %8d %10d %7d %5d %11d %5d %4d  %s", k.Kind, k.Faults, c.OverlappingActivations, c.OverlappingSingletons,
				c.Dropped, c.LostToCrash, c.Unaccounted, c.OrderViolations, c.Duplicated, rec)
		}
	}
	f := r.Findings
	p("")
	p("findings:")
	p("  overlapping activations:        %d (%d entities; %d incarnations in all)", f.OverlappingActivations, f.EntitiesWithOverlap, f.Incarnations)
	p("  overlapping singletons:         %d (%d incarnations)", f.OverlappingSingletons, f.SingletonIncarnations)
	p("  sent:                           %d", f.Sent)
	p("  delivered:                      %d", f.Delivered)
	p("  duplicated:                     %d", f.Duplicated)
	p("  dropped with a reason:          %d", f.Dropped)
	p("  lost to a crashed/cut-off node: %d", f.LostToCrash)
	p("  unaccounted:                    %d", f.Unaccounted)
	p("  order violations:               %d", f.OrderViolations)
	if f.DeliveredAndDropped > 0 || f.ReceivedNotSent > 0 || f.BadLines > 0 {
		p("  also: %d delivered although a drop was reported, %d received but never recorded as sent, %d ledger lines unreadable",
			f.DeliveredAndDropped, f.ReceivedNotSent, f.BadLines)
	}
	b := f.BeforeFaults
	if b != (Counts{}) {
		p("  before the first fault: overlaps %d, singletons %d, dropped %d, lost %d, unaccounted %d, order %d, dup %d",
			b.OverlappingActivations, b.OverlappingSingletons, b.Dropped, b.LostToCrash, b.Unaccounted, b.OrderViolations, b.Duplicated)
	}
	if len(f.DroppedByReason) > 0 {
		p("")
		p("dropped, by reason:")
		type kv struct {
			k string
			v int
		}
		var list []kv
		for k, v := range f.DroppedByReason {
			list = append(list, kv{k, v})
		}
		sort.Slice(list, func(i, j int) bool { return list[i].v > list[j].v || list[i].v == list[j].v && list[i].k < list[j].k })
		for _, e := range list {
			p("  %6d  %s", e.v, e.k)
		}
	}
	overlaps := func(title string, list []OverlapEvidence) {
		if len(list) == 0 {
			return
		}
		p("")
		p("%s (first %d):", title, len(list))
		for _, o := range list {
			p("  [fault %d] %s: %s on %s started %s while %s on %s (started %s) was alive until %s (%s): %.1f ms",
				o.Fault, o.Key, o.Second, o.SecondNode, o.SecondStart, o.First, o.FirstNode, o.FirstStart, o.FirstEnd, o.FirstEndBy, o.OverlapMS)
		}
	}
	overlaps("overlapping activations", f.Overlaps)
	overlaps("overlapping singletons", f.SingletonOverlaps)
	messages := func(title string, list []MessageEvidence) { writeMessages(p, title, list) }
	messages("unaccounted messages", f.UnaccountedList)
	if len(f.OrderList) > 0 {
		p("")
		p("order violations (first %d):", len(f.OrderList))
		for _, o := range f.OrderList {
			p("  [fault %d] %s -> %s: #%d (sent %s) received at %s by %s after #%d", o.Fault, o.Sender, o.Entity, o.Seq, o.Sent, o.At, o.Incarnation, o.After)
		}
	}
	messages("duplicated messages", f.DuplicateList)
	messages("lost in flight to a crashed, frozen or cut-off node", f.LostList)
	r.writeReliable(p)
	r.writeState(p)
	for _, w := range r.Warnings {
		p("")
		p("warning: %s", w)
	}
	p("")
	if len(r.Failures) == 0 {
		if r.Reliable != nil {
			p("PASS: no overlapping activations or singletons, every accepted message applied exactly once and in order, none left unconfirmed, every fault injected")
			return
		}
		p("PASS: no overlapping activations or singletons, every message accounted for, order kept, every fault injected")
		return
	}
	p("FAIL: %s", strings.Join(r.Failures, "; "))
}

// KindSummary adds up the faults of one kind.
type KindSummary struct {
	Kind   string `json:"kind"`
	Faults int    `json:"faults"`
	// Counts are the sums of the faults' windows.
	Counts Counts `json:"counts"`
	// Reliable: the same for a reliable run's findings.
	Reliable *ReliableCounts `json:"reliable,omitempty"`
	// Recovered faults had every entity answer again; RecoveryMedianS and
	// RecoveryMaxS are over them, from the fault's start.
	Recovered       int     `json:"recovered"`
	NotRecovered    int     `json:"not_recovered"`
	RecoveryMedianS float64 `json:"recovery_median_s"`
	RecoveryMaxS    float64 `json:"recovery_max_s"`
}

// summarize fills ByKind from the faults (those injected).
func (r *Report) summarize() {
	r.ByKind = nil
	for _, kind := range faultKinds {
		k := KindSummary{Kind: kind}
		var times []float64
		for _, f := range r.Faults {
			if f.Kind != kind || f.Error != "" {
				continue
			}
			k.Faults++
			k.Counts = addCounts(k.Counts, f.Counts)
			if f.Reliable != nil {
				if k.Reliable == nil {
					k.Reliable = &ReliableCounts{}
				}
				*k.Reliable = k.Reliable.add(*f.Reliable)
			}
			switch {
			case f.Recovery == nil:
			case f.Recovery.AllAnswered:
				times = append(times, f.Recovery.SinceStartS)
			default:
				k.NotRecovered++
			}
		}
		if k.Faults == 0 {
			continue
		}
		if len(times) > 0 {
			sort.Float64s(times)
			k.Recovered = len(times)
			k.RecoveryMedianS = times[len(times)/2]
			if len(times)%2 == 0 {
				k.RecoveryMedianS = (times[len(times)/2-1] + times[len(times)/2]) / 2
			}
			k.RecoveryMaxS = times[len(times)-1]
		}
		r.ByKind = append(r.ByKind, k)
	}
}

func addCounts(a, b Counts) Counts {
	a.OverlappingActivations += b.OverlappingActivations
	a.OverlappingSingletons += b.OverlappingSingletons
	a.Sent += b.Sent
	a.Delivered += b.Delivered
	a.Duplicated += b.Duplicated
	a.Dropped += b.Dropped
	a.LostToCrash += b.LostToCrash
	a.Unaccounted += b.Unaccounted
	a.OrderViolations += b.OrderViolations
	return a
}

// writeReliable prints a reliable run's findings: per fault kind, then the
// whole run.
func (r *Report) writeReliable(p func(string, ...any)) {
	rel := r.Reliable
	if rel == nil {
		return
	}
	p("")
	p("reliable delivery (from the entities' records after the drain; each message in the window of its send):")
	p("  %-17s %6s %7s %5s %6s %5s %11s %7s", "kind", "faults", "sent", "lost", "twice", "gaps", "dups dropped", "fenced")
	row := func(kind, faults string, c ReliableCounts) {
		p("  %-17s %6s %7d %5d %6d %5d %11d %7d", kind, faults, c.Sent, c.Lost, c.Twice, c.Gaps, c.DuplicatesDropped, c.Fenced)
	}
	if rel.BeforeFaults != (ReliableCounts{}) {
		row("before faults", "-", rel.BeforeFaults)
	}
	injected := 0
	for _, k := range r.ByKind {
		injected += k.Faults
		if k.Reliable != nil {
			row(k.Kind, fmt.Sprint(k.Faults), *k.Reliable)
		}
	}
	row("all", fmt.Sprint(injected), rel.ReliableCounts)
	unconfirmed := fmt.Sprint(rel.UnconfirmedAtEnd)
	if rel.UnconfirmedAtEnd < 0 {
		unconfirmed = "unknown"
	}
	p("  applied %d; resent %d; unconfirmed or buffered at the end %s; out-of-order copies discarded %d; %d entity records",
		rel.Applied, rel.Resent, unconfirmed, rel.NotYetAppliedDropped, rel.Records)
	if rel.Unsure > 0 || rel.AppliedNotSent > 0 || len(rel.BadRecords) > 0 {
		p("  also: %d sends with an unknown outcome, %d applied but never accepted, %d unreadable records %v",
			rel.Unsure, rel.AppliedNotSent, len(rel.BadRecords), rel.BadRecords)
	}
	writeMessages(p, "reliable: lost messages", rel.LostList)
	writeMessages(p, "reliable: messages processed twice", rel.TwiceList)
}

// writeState prints the durable state entities' findings.
func (r *Report) writeState(p func(string, ...any)) {
	st := r.State
	if st == nil {
		return
	}
	p("")
	p("durable state (entities st-*, state in Consul KV; judged from the ledgers and the final records):")
	p("  updates requested %d, acknowledged %d; claims %d, saves %d, fenced refusals %d, other failed saves or recoveries %d",
		st.Requested, st.Acknowledged, st.Claims, st.Saves, st.Fenced, st.Failed)
	p("  lost updates %d, stale writes accepted %d, revision clashes %d; lost to the %d Consul wipes %d (%d of them saved after the read before the wipe, unchecked)",
		st.Lost, st.StaleAccepted, st.RevisionClashes, st.Wipes, st.LostToWipe, st.Unchecked)
	p("  final records %d%s; acknowledged without a save %d, stored but never requested %d",
		st.Entities, map[bool]string{true: " (read error: " + st.FinalError + ")"}[st.FinalError != ""], st.AckedUnsaved, st.Unrequested)
	p("  %-17s %6s %6s %6s %7s %7s %6s %5s %9s", "kind", "faults", "acked", "saves", "fenced", "failed", "stale", "lost", "lost/wipe")
	row := func(kind, faults string, c StateCounts) {
		p("  %-17s %6s %6d %6d %7d %7d %6d %5d %9d", kind, faults, c.Acknowledged, c.Saves, c.Fenced, c.Failed, c.StaleAccepted, c.Lost, c.LostToWipe)
	}
	row("before faults", "-", st.BeforeFaults)
	for _, kind := range faultKinds {
		var c StateCounts
		n := 0
		for i, f := range r.Faults {
			if f.Kind == kind && i < len(st.PerFault) {
				c, n = c.add(st.PerFault[i]), n+1
			}
		}
		if n > 0 {
			row(kind, fmt.Sprint(n), c)
		}
	}
	for _, e := range append(st.LostList, st.StaleList...) {
		p("  [fault %d] %s %s by %s (token %d, revision %d) at %s: %s", e.Fault, e.Entity, e.Update, e.Incarnation, e.Token, e.Revision, e.At, e.Detail)
	}
}

// writeMessages prints evidence of numbered messages under title.
func writeMessages(p func(string, ...any), title string, list []MessageEvidence) {
	if len(list) == 0 {
		return
	}
	p("")
	p("%s (first %d):", title, len(list))
	for _, m := range list {
		p("  [fault %d] %s -> %s #%d sent %s: %s", m.Fault, m.Sender, m.Entity, m.Seq, m.Sent, m.Detail)
	}
}

func (m *SingletonMove) String() string {
	stopped, started := "ran on", "none started elsewhere"
	if m.StoppedS >= 0 {
		stopped = fmt.Sprintf("stopped after %.1fs", m.StoppedS)
	}
	if m.To != "" {
		started = fmt.Sprintf("started on %s after %.1fs", m.To, m.StartedS)
	}
	return fmt.Sprintf("on %s %s; %s", m.From, stopped, started)
}
