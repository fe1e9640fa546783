package coordinator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/messages"
)

// A deploy that changes the number of shards must not run entities twice:
// the coordinator refuses a region whose extractor differs from the
// registered regions', the stored ones included (it took over from a
// coordinator that registered them), for as long as they are there; a
// region of an older version, which does not say, is accepted; and once
// the regions it disagreed with are gone, the new extractor is the one the
// others must agree with.
func TestCoordinatorRefusesAnotherExtractor(t *testing.T) {
	system, cluster := ctMember(t)
	self := cluster.Self().ID
	hundred := ExtractorIdentity{Name: "hash-code", NumberOfShards: 100}
	thousand := ExtractorIdentity{Name: "hash-code", NumberOfShards: 1000}

	spawn := func(name string) (*actor.PID, *ctProbe) {
		p := newCTProbe()
		pid, err := system.Root.SpawnNamed(p.props(), "compat-"+name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { system.Root.Stop(pid) })
		return pid, p
	}
	// The state a coordinator that ran before wrote: region a, with 100
	// shards, hosts s1.
	a, _ := spawn("a")
	st := NewState(false)
	for _, e := range []Event{ShardRegionRegistered{Region: a, MemberID: self, Extractor: hundred}, ShardHomeAllocated{Shard: "s1", Region: a}} {
		if err := st.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	store := coordinatoractor.NewMemoryStore()
	if _, err := SaveState(context.Background(), store, st, 0); err != nil {
		t.Fatal(err)
	}
	coordinator, err := system.Root.SpawnNamed(Props("Compat", cluster, Settings{RebalanceInterval: time.Hour}, nil, store), "compat-coordinator")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = system.Root.StopFuture(coordinator).Wait() })

	register := func(region *actor.PID, id ExtractorIdentity) {
		system.Root.RequestWithCustomSender(coordinator, &messages.Register{ShardRegion: region, MemberId: self,
			Extractor: id.Name, NumberOfShards: uint32(id.NumberOfShards)}, region)
	}
	registerProxy := func(proxy *actor.PID, id ExtractorIdentity) {
		system.Root.RequestWithCustomSender(coordinator, &messages.RegisterProxy{ShardRegionProxy: proxy, MemberId: self,
			Extractor: id.Name, NumberOfShards: uint32(id.NumberOfShards)}, proxy)
	}
	waitAcks := func(p *ctProbe, n int, what string) {
		t.Helper()
		ctWaitFor(t, what, func() bool { acks, _ := p.answers(); return acks >= n })
	}
	waitRefused := func(p *ctProbe, n int, what string) string {
		t.Helper()
		ctWaitFor(t, what, func() bool { _, refused := p.answers(); return len(refused) >= n })
		_, refused := p.answers()
		return refused[n-1]
	}

	c, cProbe := spawn("c")
	register(c, thousand)
	reason := waitRefused(cProbe, 1, "the refusal of the region with 1000 shards")
	for _, want := range []string{"hash-code with 1000 shards", "hash-code with 100 shards at " + a.Address, "new entity type name"} {
		if !strings.Contains(reason, want) {
			t.Errorf("the refusal %q does not say %q", reason, want)
		}
	}
	register(c, thousand)
	waitRefused(cProbe, 2, "the second refusal: it is refused while a is registered")
	p, pProbe := spawn("proxy")
	registerProxy(p, thousand)
	waitRefused(pProbe, 1, "the refusal of the proxy with 1000 shards")

	// A region that does not say (an older version) and one that agrees
	// are accepted.
	u, uProbe := spawn("u")
	register(u, ExtractorIdentity{})
	waitAcks(uProbe, 1, "the RegisterAck of the region of an older version")
	b, bProbe := spawn("b")
	register(b, hundred)
	waitAcks(bProbe, 1, "the RegisterAck of a region that agrees")
	registerProxy(p, hundred)
	waitAcks(pProbe, 1, "the RegisterAck of a proxy that agrees")
	cur := ctState(t, system, coordinator)
	if cur.State.IsRegion(c) || !cur.State.IsProxy(p) || cur.State.Regions[RegionKey(b)].Extractor != hundred {
		t.Fatalf("state after the registrations: %+v", cur.State)
	}
	if acks, _ := cProbe.answers(); acks != 0 {
		t.Fatalf("the refused region got %d RegisterAcks", acks)
	}

	// The regions with 100 shards go; u now says it has 1000, which is
	// recorded (it registered without saying); c is accepted, and a
	// region with 100 shards is refused from then on.
	system.Root.Stop(a)
	system.Root.Stop(b)
	ctWaitFor(t, "a and b terminated", func() bool {
		st := ctState(t, system, coordinator).State
		return !st.IsRegion(a) && !st.IsRegion(b)
	})
	register(u, thousand)
	waitAcks(uProbe, 2, "the second RegisterAck of u")
	register(c, thousand)
	waitAcks(cProbe, 1, "the RegisterAck of the region with 1000 shards once the others are gone")
	d, dProbe := spawn("d")
	register(d, hundred)
	waitRefused(dProbe, 1, "the refusal of a region with 100 shards")

	// What the next coordinator starts from.
	stored, _, err := LoadState(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	if got := stored.Regions[RegionKey(u)].Extractor; got != thousand {
		t.Errorf("stored extractor of u = %v, want %v", got, thousand)
	}
	if got := stored.Regions[RegionKey(c)].Extractor; got != thousand {
		t.Errorf("stored extractor of c = %v, want %v", got, thousand)
	}
	if stored.IsRegion(d) {
		t.Errorf("the refused region d is stored")
	}
}
