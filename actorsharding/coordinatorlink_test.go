package actorsharding

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// linkStep is one input to a coordinatorLink and what it must answer.
type linkStep struct {
	op       string     // ack, command, lose, removed, start, retry (of the series the want names)
	pid      *actor.PID // the acking coordinator (ack) or the sender (command)
	epoch    uint64
	onOldest bool // ack: the coordinator runs on the oldest member
	live     bool // command: the sender is on a live member
	want     string
	// after: the coordinator followed after the step and its epoch, the
	// highest epoch and the incarnation registered as.
	after string
}

func linkApply(l *coordinatorLink, s linkStep, coordinatorID string, retries map[string]registerRetry) string {
	switch s.op {
	case "ack":
		a, err := l.ack(s.pid, s.epoch, s.onOldest, fmt.Sprintf("m%d", s.epoch))
		if err != nil {
			return fmt.Sprintf("stale %v", errors.Is(err, errStaleCoordinator))
		}
		return fmt.Sprintf("repeated %v unwatch %v warn %v", a.repeated, a.unwatch.GetId(), a.warning != "")
	case "command":
		why, missed := l.command(s.pid, s.epoch, coordinatorID, s.live)
		return fmt.Sprintf("obey %v missed %v", why == "", missed)
	case "lose":
		return "unwatch " + l.lose().GetId()
	case "removed":
		return "unwatch " + l.removed().GetId()
	case "start":
		r, _, ok := l.schedule.start()
		retries[s.want[:2]] = r
		return fmt.Sprintf("%s %v", s.want[:2], ok)
	case "retry":
		due, _, _, _ := l.retry(retries[s.want[:2]])
		return fmt.Sprintf("%s %v", s.want[:2], due)
	}
	return "unknown op " + s.op
}

func TestCoordinatorLink(t *testing.T) {
	const id = "sharding/TCoordinator/singleton/coordinator"
	c1 := actor.NewPID("127.0.0.1:1", id)
	c2 := actor.NewPID("127.0.0.1:2", id)
	worker2 := actor.NewPID("127.0.0.1:2", id+"/$3")
	stranger := actor.NewPID("127.0.0.1:2", "someone")
	tests := []struct {
		name  string
		steps []linkStep
	}{
		{"first ack, a repeated one, a command of its own and of a stranger", []linkStep{
			{op: "command", pid: c1, epoch: 1, want: "obey false missed false", after: "<nil> 0 0 "},
			{op: "ack", pid: c1, epoch: 1, want: "repeated false unwatch  warn false", after: id + " 1 1 m1"},
			{op: "ack", pid: c1, epoch: 1, want: "repeated true unwatch  warn false", after: id + " 1 1 m1"},
			{op: "command", pid: c1, epoch: 1, want: "obey true missed false", after: id + " 1 1 m1"},
			{op: "command", pid: c1, epoch: 0, want: "obey false missed false", after: id + " 1 1 m1"},
			{op: "command", pid: stranger, epoch: 1, live: true, want: "obey false missed false", after: id + " 1 1 m1"},
			{op: "command", pid: stranger, epoch: 7, live: true, want: "obey false missed false", after: id + " 1 1 m1"},
		}},
		{"a newer coordinator's worker shows a missed change, on a live member only", []linkStep{
			{op: "ack", pid: c1, epoch: 1, want: "repeated false unwatch  warn false", after: id + " 1 1 m1"},
			{op: "command", pid: worker2, epoch: 2, live: false, want: "obey false missed false", after: id + " 1 1 m1"},
			{op: "command", pid: worker2, epoch: 2, live: true, want: "obey false missed true", after: id + " 1 1 m1"},
			{op: "lose", want: "unwatch " + id, after: "<nil> 1 1 m1"},
			{op: "command", pid: worker2, epoch: 2, live: true, want: "obey false missed false", after: "<nil> 1 1 m1"},
			{op: "ack", pid: c2, epoch: 2, want: "repeated false unwatch  warn false", after: id + " 2 2 m2"},
			{op: "command", pid: worker2, epoch: 2, want: "obey true missed false", after: id + " 2 2 m2"},
		}},
		{"another coordinator's ack replaces the first, which is unwatched", []linkStep{
			{op: "ack", pid: c1, epoch: 1, want: "repeated false unwatch  warn false", after: id + " 1 1 m1"},
			{op: "ack", pid: c2, epoch: 3, want: "repeated false unwatch " + id + " warn false", after: id + " 3 3 m3"},
		}},
		{"a lower epoch is stale, unless on the oldest member (a reset store)", []linkStep{
			{op: "ack", pid: c2, epoch: 5, want: "repeated false unwatch  warn false", after: id + " 5 5 m5"},
			{op: "lose", want: "unwatch " + id, after: "<nil> 5 5 m5"},
			{op: "ack", pid: c1, epoch: 4, want: "stale true", after: "<nil> 5 5 m5"},
			{op: "ack", pid: c1, epoch: 4, onOldest: true, want: "repeated false unwatch  warn true", after: id + " 4 5 m4"},
			{op: "command", pid: c1, epoch: 4, want: "obey true missed false", after: id + " 4 5 m4"},
		}},
		{"a stale ack leaves the coordinator followed", []linkStep{
			{op: "ack", pid: c2, epoch: 5, want: "repeated false unwatch  warn false", after: id + " 5 5 m5"},
			{op: "ack", pid: c1, epoch: 2, want: "stale true", after: id + " 5 5 m5"},
		}},
		{"losing nothing unwatches nothing; removal ends the retries", []linkStep{
			{op: "lose", want: "unwatch ", after: "<nil> 0 0 "},
			{op: "start", want: "s1 true", after: "<nil> 0 0 "},
			{op: "retry", want: "s1 true", after: "<nil> 0 0 "},
			{op: "start", want: "s2 true", after: "<nil> 0 0 "},
			{op: "removed", want: "unwatch ", after: "<nil> 0 0 "},
			{op: "retry", want: "s2 false", after: "<nil> 0 0 "},
			{op: "retry", want: "s1 false", after: "<nil> 0 0 "},
		}},
		{"a registered region's retry is not due and ends the series", []linkStep{
			{op: "start", want: "s1 true", after: "<nil> 0 0 "},
			{op: "ack", pid: c1, epoch: 1, want: "repeated false unwatch  warn false", after: id + " 1 1 m1"},
			{op: "retry", want: "s1 false", after: id + " 1 1 m1"},
			{op: "removed", want: "unwatch " + id, after: "<nil> 1 1 m1"},
			{op: "ack", pid: c1, epoch: 1, want: "repeated false unwatch  warn false", after: id + " 1 1 m1"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := coordinatorLink{schedule: newRegistrationSchedule(10 * time.Second)}
			retries := map[string]registerRetry{}
			for i, s := range tt.steps {
				if got := linkApply(&l, s, id, retries); got != s.want {
					t.Fatalf("step %d (%s): %q, want %q", i, s.op, got, s.want)
				}
				after := fmt.Sprintf("%v %d %d %s", l.coordinator.GetId(), l.epoch, l.maxEpoch, l.registeredAs)
				if l.coordinator == nil {
					after = fmt.Sprintf("<nil> %d %d %s", l.epoch, l.maxEpoch, l.registeredAs)
				}
				if after != s.after {
					t.Fatalf("step %d (%s): link %q, want %q", i, s.op, after, s.after)
				}
			}
		})
	}
}
