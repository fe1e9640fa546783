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
	// Skipped names fault kinds that could not run here, with the reason.
	Skipped  map[string]string `json:"skipped,omitempty"`
	Findings Findings          `json:"findings"`
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
	// Counts are the findings in this fault's window.
	Counts Counts `json:"counts"`
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
func (r *Report) judge(ci bool) {
	r.Failures = nil
	f := r.Findings
	if f.OverlappingActivations > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%d overlapping activations (%d entities)", f.OverlappingActivations, f.EntitiesWithOverlap))
	}
	if f.OverlappingSingletons > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%d overlapping singletons", f.OverlappingSingletons))
	}
	if f.Unaccounted > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%d unaccounted messages", f.Unaccounted))
	}
	if f.OrderViolations > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%d order violations", f.OrderViolations))
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
		if f.Note != "" {
			p("      note: %s", f.Note)
		}
	}
	if byKind := r.recoveryByKind(); len(byKind) > 0 {
		p("")
		p("until every entity answered again, from the fault's start (median / max over the faults of a kind):")
		for _, k := range faultKinds {
			if line, ok := byKind[k]; ok {
				p("  %-17s %s", k, line)
			}
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
	p("  lost in flight to crashed node: %d", f.LostToCrash)
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
	messages := func(title string, list []MessageEvidence) {
		if len(list) == 0 {
			return
		}
		p("")
		p("%s (first %d):", title, len(list))
		for _, m := range list {
			p("  [fault %d] %s -> %s #%d sent %s: %s", m.Fault, m.Sender, m.Entity, m.Seq, m.Sent, m.Detail)
		}
	}
	messages("unaccounted messages", f.UnaccountedList)
	if len(f.OrderList) > 0 {
		p("")
		p("order violations (first %d):", len(f.OrderList))
		for _, o := range f.OrderList {
			p("  [fault %d] %s -> %s: #%d (sent %s) received at %s by %s after #%d", o.Fault, o.Sender, o.Entity, o.Seq, o.Sent, o.At, o.Incarnation, o.After)
		}
	}
	messages("duplicated messages", f.DuplicateList)
	messages("lost in flight to a crashed node", f.LostList)
	for _, w := range r.Warnings {
		p("")
		p("warning: %s", w)
	}
	p("")
	if len(r.Failures) == 0 {
		p("PASS: no overlapping activations or singletons, every message accounted for, order kept, every fault injected")
		return
	}
	p("FAIL: %s", strings.Join(r.Failures, "; "))
}

// recoveryByKind summarises the recovery times of each fault kind.
func (r *Report) recoveryByKind() map[string]string {
	times := map[string][]float64{}
	failed := map[string]int{}
	for _, f := range r.Faults {
		switch {
		case f.Recovery == nil:
		case f.Recovery.AllAnswered:
			times[f.Kind] = append(times[f.Kind], f.Recovery.SinceStartS)
		default:
			failed[f.Kind]++
		}
	}
	out := map[string]string{}
	for _, k := range faultKinds {
		ts := times[k]
		if len(ts) == 0 && failed[k] == 0 {
			continue
		}
		line := "-"
		if len(ts) > 0 {
			sort.Float64s(ts)
			med := ts[len(ts)/2]
			if len(ts)%2 == 0 {
				med = (ts[len(ts)/2-1] + med) / 2
			}
			line = fmt.Sprintf("%.1fs / %.1fs over %d", med, ts[len(ts)-1], len(ts))
		}
		if failed[k] > 0 {
			line += fmt.Sprintf("; %d not recovered within the probe deadline", failed[k])
		}
		out[k] = line
	}
	return out
}
