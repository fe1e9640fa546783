package management

import (
	"fmt"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/messages"
)

func TestRegionReadiness(t *testing.T) {
	coordinator := actor.NewPID("10.0.0.1:8090", "sharding/CounterCoordinator/singleton/coordinator")
	timeout := fmt.Errorf("%w: time-out", errUnavailable)
	for _, tc := range []struct {
		name   string
		st     *messages.ShardRegionStatus
		err    error
		self   string
		status string
		ready  bool
	}{
		{"registered as this member", &messages.ShardRegionStatus{RegisteredWithCoordinator: true, Coordinator: coordinator, Epoch: 3, RegisteredMemberId: "m2"},
			nil, "m2", regionRegistered, true},
		{"registering again as this member", &messages.ShardRegionStatus{RegisteredMemberId: "m2"}, nil, "m2", regionReregistering, true},
		{"never registered", &messages.ShardRegionStatus{}, nil, "m2", regionRegistering, false},
		{"registered as an earlier incarnation", &messages.ShardRegionStatus{RegisteredMemberId: "m1"}, nil, "m2", regionRegistering, false},
		{"registered, the node rejoined since", &messages.ShardRegionStatus{RegisteredWithCoordinator: true, Coordinator: coordinator, RegisteredMemberId: "m1"},
			nil, "m2", regionRegistering, false},
		{"not joined", &messages.ShardRegionStatus{}, nil, "", regionRegistering, false},
		{"not started", nil, nil, "m2", regionNotStarted, false},
		{"stopped", nil, fmt.Errorf("%w: %w", errUnavailable, actor.ErrDeadLetter), "m2", regionStopped, false},
		{"no answer", nil, timeout, "m2", regionUnresponsive, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := regionReadiness("Counter", false, tc.st, tc.err, tc.self)
			if v.Type != "Counter" || v.Status != tc.status || v.Ready != tc.ready {
				t.Fatalf("%+v, want status %s, ready %v", v, tc.status, tc.ready)
			}
			if v.Registered != tc.st.GetRegisteredWithCoordinator() {
				t.Errorf("registered %v, want %v", v.Registered, tc.st.GetRegisteredWithCoordinator())
			}
			if wantAddr := ""; v.Registered {
				wantAddr = coordinator.Address
				if v.Coordinator != wantAddr || v.Epoch != tc.st.GetEpoch() {
					t.Errorf("coordinator %q epoch %d, want %q %d", v.Coordinator, v.Epoch, wantAddr, tc.st.GetEpoch())
				}
			} else if v.Coordinator != "" {
				t.Errorf("coordinator %q while not registered", v.Coordinator)
			}
			if (v.Error != "") != (tc.status == regionUnresponsive) {
				t.Errorf("error %q with status %s", v.Error, v.Status)
			}
		})
	}
}

func TestReadiness(t *testing.T) {
	ready := regionReadyView{Type: "Counter", Ready: true, Status: regionRegistered}
	waiting := regionReadyView{Type: "Orders", Status: regionRegistering}
	joined := memberState{ID: "m1", Address: "10.0.0.1:8090", Joined: true}
	with := func(f func(*memberState)) memberState { m := joined; f(&m); return m }
	for _, tc := range []struct {
		name    string
		member  memberState
		regions []regionReadyView
		status  string
		reason  string // in the reason
	}{
		{"ready", joined, []regionReadyView{ready}, readyStatus, ""},
		{"ready without regions", joined, nil, readyStatus, ""},
		{"not joined", memberState{}, nil, startingStatus, "not joined"},
		{"region registering", joined, []regionReadyView{ready, waiting}, startingStatus, "Orders (registering)"},
		{"stale", with(func(m *memberState) { m.Stale = true }), []regionReadyView{ready}, staleStatus, "failure detection timeout"},
		{"removed", with(func(m *memberState) { m.Removed, m.Stale = true, true }), []regionReadyView{ready}, removedStatus, "removed"},
		{"leaving", with(func(m *memberState) { m.Leaving = true }), []regionReadyView{ready}, leavingStatus, "leaving"},
		{"left", with(func(m *memberState) { m.Leaving, m.Removed, m.Stale = true, true, true }), nil, leavingStatus, "left"},
		{"stale before regions", with(func(m *memberState) { m.Stale = true }), []regionReadyView{waiting}, staleStatus, "paused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := readiness(tc.member, tc.regions)
			if v.Status != tc.status || !strings.Contains(v.Reason, tc.reason) || (tc.status == readyStatus) != (v.Reason == "") {
				t.Fatalf("%s: %q, want %s with %q", v.Status, v.Reason, tc.status, tc.reason)
			}
			if v.Regions == nil || len(v.Regions) != len(tc.regions) {
				t.Errorf("regions %v, want %v", v.Regions, tc.regions)
			}
			if v.Member.ID != tc.member.ID || v.Member.Stale != tc.member.Stale || v.Member.Leaving != tc.member.Leaving ||
				v.Member.Removed != tc.member.Removed || v.Member.Joined != tc.member.Joined {
				t.Errorf("member %+v, want %+v", v.Member, tc.member)
			}
		})
	}
}

func TestLiveness(t *testing.T) {
	silent := fmt.Errorf("%w: time-out", errUnavailable)
	stopped := fmt.Errorf("%w: %w", errUnavailable, actor.ErrDeadLetter)
	up := partView{Status: responsiveStatus}
	for _, tc := range []struct {
		name    string
		system  partView
		errs    []error // one region each
		status  string
		reason  string
		regions []string // their statuses
	}{
		{"alive", up, []error{nil, nil}, aliveStatus, "", []string{responsiveStatus, responsiveStatus}},
		{"alive without regions", up, nil, aliveStatus, "", nil},
		{"a region stopped", up, []error{stopped, nil}, aliveStatus, "", []string{regionStopped, responsiveStatus}},
		{"a region silent", up, []error{nil, silent}, unresponsiveStatus, "region R1", []string{responsiveStatus, unresponsiveStatus}},
		{"the system silent", partView{Status: unresponsiveStatus, Error: errSystemStopped.Error()}, []error{nil},
			unresponsiveStatus, "the actor system", []string{responsiveStatus}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var regions []partView
			for i, err := range tc.errs {
				regions = append(regions, regionLiveness(fmt.Sprintf("R%d", i), false, err))
			}
			v := liveness(tc.system, regions)
			if v.Status != tc.status || !strings.Contains(v.Reason, tc.reason) || (tc.status == aliveStatus) != (v.Reason == "") {
				t.Fatalf("%s: %q, want %s with %q", v.Status, v.Reason, tc.status, tc.reason)
			}
			if v.Regions == nil || len(v.Regions) != len(tc.regions) {
				t.Fatalf("regions %+v, want %d", v.Regions, len(tc.regions))
			}
			for i, want := range tc.regions {
				if r := v.Regions[i]; r.Status != want || (r.Error != "") != (want == unresponsiveStatus) {
					t.Errorf("region %d: %+v, want %s", i, r, want)
				}
			}
		})
	}
}
