package coordinator

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
)

func TestFateOfAnEarlyRegistration(t *testing.T) {
	start := time.Unix(1000, 0)
	wait := 30 * time.Second
	live := func(m string) bool { return m == "up" }
	removed := func(m string) bool { return m == "gone" }
	register := func(member string) stashed {
		return stashed{message: &messages.Register{ShardRegion: stRegion(1), MemberId: member}, sender: stRegion(1), at: start}
	}
	cases := []struct {
		name  string
		e     stashed
		after time.Duration
		want  earlyFate
		why   string
	}{
		{"its member is live: handled", register("up"), time.Second, earlyReady, ""},
		{"live, even after the wait", register("up"), time.Hour, earlyReady, ""},
		{"a proxy's, live", stashed{message: &messages.RegisterProxy{ShardRegionProxy: stProxy(1), MemberId: "up"}, at: start}, 0, earlyReady, ""},
		{"not seen yet: waits", register("new"), wait - time.Millisecond, earlyWaits, ""},
		{"not seen in the wait: dropped", register("new"), wait, earlyDropped, "has not seen live in 30s"},
		{"removed: dropped at once", register("gone"), 0, earlyDropped, "removed before the coordinator saw it live"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, why := fateOf(tc.e, live, removed, start.Add(tc.after), wait)
			if got != tc.want || !strings.Contains(why, tc.why) || (tc.why == "") != (why == "") {
				t.Fatalf("fate %v (%q), want %v (%q)", got, why, tc.want, tc.why)
			}
		})
	}
}

// A node that joins may register before its MemberUp reaches the
// coordinator's node. The coordinator holds that registration, once
// however often the region repeats it, and registers the region when its
// member shows up: no dead letter, one RegisterAck. What it still holds
// when it stops is dropped with a dead-letter event.
func TestCoordinatorHoldsARegistrationUntilItsMemberIsUp(t *testing.T) {
	system, cluster := ctMember(t)
	var mu sync.Mutex
	var dropped []string
	sub := system.EventStream.Subscribe(func(e any) {
		if d, ok := e.(*deadletter.Event); ok && strings.HasPrefix(d.Reason, "shard coordinator Early:") {
			mu.Lock()
			dropped = append(dropped, d.Reason)
			mu.Unlock()
		}
	})
	t.Cleanup(func() { system.EventStream.Unsubscribe(sub) })
	drops := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), dropped...)
	}
	coordinator, err := system.Root.SpawnNamed(Props("Early", cluster, Settings{RebalanceInterval: time.Hour}, nil, coordinatoractor.NewMemoryStore()), "early-coordinator")
	if err != nil {
		t.Fatal(err)
	}
	probe := newCTProbe()
	region, err := system.Root.SpawnNamed(probe.props(), "early-region")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { system.Root.Stop(region) })
	// Active: a registration that comes while it reads its state waits in
	// its stash, whatever the member.
	ctWaitFor(t, "the coordinator active", func() bool { return ctState(t, system, coordinator).Name == StateActive })
	joining := membership.Member{ID: "joining-1", Address: region.Address, Status: membership.Up}
	register := func(member string) {
		system.Root.RequestWithCustomSender(coordinator, &messages.Register{ShardRegion: region, MemberId: member}, region)
	}
	register(joining.ID)
	register(joining.ID)
	// Behind the registrations in the coordinator's mailbox.
	if st := ctState(t, system, coordinator); st.State.IsRegion(region) {
		t.Fatal("registered before its member is up")
	}
	if acks, _, _ := probe.counts(t, system, region); acks != 0 || len(drops()) != 0 {
		t.Fatalf("before the member is up: %d RegisterAcks, dead letters %q", acks, drops())
	}
	system.Root.Send(coordinator, membership.MemberUp{Member: joining})
	ctWaitFor(t, "the RegisterAck once the member is up", func() bool { acks, _ := probe.answers(); return acks >= 1 })
	if !ctState(t, system, coordinator).State.IsRegion(region) {
		t.Fatal("acknowledged, not registered")
	}
	if acks, _, _ := probe.counts(t, system, region); acks != 1 || len(drops()) != 0 {
		t.Fatalf("after the member is up: %d RegisterAcks, want 1; dead letters %q", acks, drops())
	}

	// Held when the coordinator stops: dropped, with the reason.
	register("never-up")
	ctState(t, system, coordinator)
	if err := system.Root.StopFuture(coordinator).Wait(); err != nil {
		t.Fatal(err)
	}
	ctWaitFor(t, "the dead letter of the registration held at the stop", func() bool { return len(drops()) == 1 })
	if got := drops()[0]; !strings.Contains(got, "stopping") {
		t.Fatalf("dead letter %q does not say the coordinator stops", got)
	}
}
