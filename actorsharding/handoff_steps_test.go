package actorsharding

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// TestHandOffsReport drives an old home's debts of HandOffForwarded
// reports input by input: what it sends, where it resends on a tick, and
// which shards it still has to report.
func TestHandOffsReport(t *testing.T) {
	newHome := actor.NewPID("127.0.0.1:2", "sharding/T")
	goneHome := actor.NewPID("127.0.0.1:3", "sharding/T")
	live := func(addr string) bool { return addr != goneHome.Address }
	name := func(p *actor.PID) string {
		switch {
		case p == nil:
			return "coordinator"
		case p.Equal(newHome):
			return "new"
		case p.Equal(goneHome):
			return "gone"
		}
		return p.String()
	}
	type step struct {
		op         string     // handedOff, report, reportUnregistered, acked
		shard      string     // all steps
		via        *actor.PID // report
		want       string     // report/acked: "true"/"false"
		resends    string     // after the step: shard->route, sorted
		unreported string     // after the step, with every child gone
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"report through the new home, once, resent until acked", []step{
			{op: "report", shard: "1", via: newHome, want: "false", resends: "", unreported: ""},
			{op: "handedOff", shard: "1", resends: "", unreported: "1"},
			{op: "report", shard: "1", via: newHome, want: "true", resends: "1->new", unreported: ""},
			{op: "report", shard: "1", via: newHome, want: "false", resends: "1->new", unreported: ""},
			{op: "report", shard: "1", want: "false", resends: "1->new", unreported: ""},
			{op: "acked", shard: "1", want: "true", resends: "", unreported: ""},
			{op: "acked", shard: "1", want: "false", resends: "", unreported: ""},
		}},
		{"no coordinator: the direct report waits for one", []step{
			{op: "handedOff", shard: "2", resends: "", unreported: "2"},
			{op: "reportUnregistered", shard: "2", want: "false", resends: "", unreported: "2"},
			{op: "reportUnregistered", shard: "2", via: newHome, want: "true", resends: "2->new", unreported: ""},
		}},
		{"a report through a home that is gone is resent to the coordinator", []step{
			{op: "handedOff", shard: "3", resends: "", unreported: "3"},
			{op: "handedOff", shard: "4", resends: "", unreported: "3 4"},
			{op: "report", shard: "3", via: goneHome, want: "true", resends: "3->coordinator", unreported: "4"},
			{op: "report", shard: "4", want: "true", resends: "3->coordinator 4->coordinator", unreported: ""},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHandOffs()
			for i, s := range tt.steps {
				got := ""
				switch s.op {
				case "handedOff":
					h.handedOff(s.shard, time.Now())
				case "report":
					got = fmt.Sprint(h.report(s.shard, s.via, true))
				case "reportUnregistered":
					got = fmt.Sprint(h.report(s.shard, s.via, false))
				case "acked":
					got = fmt.Sprint(h.acked(s.shard))
				}
				if got != s.want {
					t.Fatalf("step %d (%s %s): %s, want %s", i, s.op, s.shard, got, s.want)
				}
				var resends []string
				for shard, via := range h.resendsTo(live) {
					resends = append(resends, shard+"->"+name(via))
				}
				sort.Strings(resends)
				if r := strings.Join(resends, " "); r != s.resends {
					t.Fatalf("step %d (%s %s): resends %q, want %q", i, s.op, s.shard, r, s.resends)
				}
				if u := strings.Join(h.unreported(func(string) bool { return false }), " "); u != s.unreported {
					t.Fatalf("step %d (%s %s): unreported %q, want %q", i, s.op, s.shard, u, s.unreported)
				}
			}
		})
	}
	h := newHandOffs()
	h.handedOff("5", time.Now())
	if u := h.unreported(func(string) bool { return true }); len(u) != 0 {
		t.Fatalf("a shard whose child still stops is reported: %v", u)
	}
}

func TestRelayRejection(t *testing.T) {
	coordinator := actor.NewPID("127.0.0.1:9", "sharding/TCoordinator/singleton/coordinator")
	worker := actor.NewPID("127.0.0.1:9", "sharding/TCoordinator/singleton/coordinator/$4")
	tests := []struct {
		replyTo, coordinator *actor.PID
		want                 string // "" or a word of the reason
	}{
		{worker, coordinator, ""},
		{nil, coordinator, "without a worker"},
		{worker, nil, "not a worker"},
		{coordinator, coordinator, "not a worker"},
		{actor.NewPID("127.0.0.1:8", worker.Id), coordinator, "not a worker"},
	}
	for _, tt := range tests {
		why := relayRejection(tt.replyTo, tt.coordinator)
		if (tt.want == "") != (why == "") || !strings.Contains(why, tt.want) {
			t.Errorf("relayRejection(%v, %v) = %q, want %q", tt.replyTo, tt.coordinator, why, tt.want)
		}
	}
}
