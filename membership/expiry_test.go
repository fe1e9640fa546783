package membership_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/membership"
)

// fakeClock is a time source a test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// removeSelf makes the provider report c's member gone, as failure
// detection does, and waits until c has joined again as a new member.
func removeSelf(t *testing.T, p *fakeProvider, c *membership.Cluster) {
	t.Helper()
	old := c.Self().ID
	p.mu.Lock()
	p.registered = false
	p.mu.Unlock()
	p.deliver()
	waitFor(t, func() bool {
		self := c.Self().ID
		return self != old && slices.ContainsFunc(c.Members(), func(m membership.Member) bool { return m.ID == self })
	}, "the node to join again after its removal")
}

// A node removed and re-joining many times, and members of crashed
// processes that never come back, leave a removed ID (and a quarantined
// actor system and address) behind each: kept as long as they can matter,
// then forgotten, so the bookkeeping shrinks back once the churn stops.
// Meanwhile a removed ID stays refused.
func TestRemovedMembersAndQuarantinesExpire(t *testing.T) {
	p := newFakeProvider()
	q := membership.NewQuarantine()
	c := membership.NewCluster(fakeSystem(), p, membership.Config{RejoinBackoff: time.Millisecond, Quarantine: q})
	clock := &fakeClock{t: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}
	membership.SetClock(c, clock.now)
	if err := c.Join(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	retention, quarantine := membership.RemovedRetention(c), membership.QuarantineRetention(q)
	if retention != 24*time.Hour || quarantine != time.Hour {
		t.Fatalf("retention %v and %v, want Akka's 24h and 1h for a provider without numbers", retention, quarantine)
	}

	const rounds = 300
	const every = time.Minute // 5 hours of churn
	var ownIDs []string
	var crashed []membership.Member
	maxSystems := 0
	for i := range rounds {
		// A member of a process that crashes for good comes and goes...
		m := membership.Member{ID: fmt.Sprintf("crashed-%d", i), Address: fmt.Sprintf("10.0.%d.%d:7000", i/250, i%250),
			SystemID: fmt.Sprintf("system-%d", i), Status: membership.Up, Age: uint64(1000 + i)}
		crashed = append(crashed, m)
		p.setOthers(m)
		p.setOthers()
		// ...and this node is removed, and joins again.
		ownIDs = append(ownIDs, c.Self().ID)
		removeSelf(t, p, c)
		systems, _ := membership.QuarantineSizes(q)
		maxSystems = max(maxSystems, systems)
		clock.advance(every)
	}
	removedBefore := membership.RemovedCount(c)
	systems, addresses := membership.QuarantineSizes(q)
	t.Logf("after %d removals of this node and %d crashed members over %v: %d removed IDs remembered, quarantine %d systems / %d addresses (at most %d)",
		rounds, rounds, rounds*every, removedBefore, systems, addresses, maxSystems)
	if removedBefore != 2*rounds {
		t.Fatalf("%d removed IDs remembered, want all %d: none is older than %v", removedBefore, 2*rounds, retention)
	}
	// A quarantine lasts its hour: about sixty at a time, not three hundred.
	if limit := int(quarantine/every) + 1; maxSystems > limit || addresses > limit {
		t.Fatalf("the quarantine held up to %d systems and %d addresses, want at most %d (one an %v for %v)", maxSystems, addresses, limit, every, quarantine)
	}

	// Within the window a removed ID is refused: the first crashed member,
	// reported live again (a zombie registration), does not come back.
	p.setOthers(crashed[0])
	if slices.ContainsFunc(c.Members(), func(m membership.Member) bool { return m.ID == crashed[0].ID }) {
		t.Fatalf("a member removed %v ago is in the view again", rounds*every)
	}
	if _, ok := membershiphook.Of(c).Removal(crashed[0].ID); !ok {
		t.Fatal("the removal of the first crashed member is forgotten within the window")
	}
	if _, ok := membershiphook.Of(c).Removal(ownIDs[0]); !ok {
		t.Fatal("this node's first removal is forgotten within the window")
	}
	p.setOthers()

	// Once the window has passed, the next write forgets them all.
	clock.advance(retention)
	last := membership.Member{ID: "crashed-last", Address: "10.0.9.9:7000", SystemID: "system-last", Status: membership.Up, Age: 5000}
	p.setOthers(last)
	p.setOthers()
	removedAfter := membership.RemovedCount(c)
	systems, addresses = membership.QuarantineSizes(q)
	t.Logf("a window later, after one more removal: %d removed IDs remembered, quarantine %d systems / %d addresses", removedAfter, systems, addresses)
	if removedAfter != 1 || systems != 1 || addresses != 1 {
		t.Fatalf("%d removed IDs, %d systems, %d addresses remembered; want only the last removal's", removedAfter, systems, addresses)
	}
	if _, ok := membershiphook.Of(c).Removal(ownIDs[0]); ok {
		t.Fatal("a removal older than the window is still remembered")
	}
	if !membership.SystemBlocked(q, last.SystemID) || !membership.AddressBlocked(q, last.Address) || membership.SystemBlocked(q, crashed[rounds-1].SystemID) {
		t.Fatal("the quarantine does not hold exactly the last removal")
	}
}

// lingeringProvider is a fakeProvider whose removed registrations may be
// reported live for a while.
type lingeringProvider struct {
	*fakeProvider
	linger time.Duration
}

func (p lingeringProvider) RegistrationLinger() time.Duration { return p.linger }

// The windows are Akka's (24 h for removed members, 1 h for quarantines),
// or ten times the provider's removal bound if that is longer: the
// down-removal margin that Removal serves, the failure detection timeout,
// and how long a removed registration may still be reported live.
func TestRemovalRetention(t *testing.T) {
	cases := []struct {
		name       string
		provider   membership.Provider
		margin     time.Duration
		removed    time.Duration
		quarantine time.Duration
	}{
		{"in-process, no numbers", newFakeProvider(), 0, 24 * time.Hour, time.Hour},
		{"Consul's defaults", lingeringProvider{newFakeProvider(), 5*time.Second + time.Minute + 90*time.Second}, 0, 24 * time.Hour, time.Hour},
		{"a long linger", lingeringProvider{newFakeProvider(), 3 * time.Hour}, 0, 30 * time.Hour, 30 * time.Hour},
		{"a long failure detection timeout", detectingProvider{newFakeProvider(), 10 * time.Minute}, 0, 24 * time.Hour, 100 * time.Minute},
		{"a long down-removal margin", newFakeProvider(), 4 * time.Hour, 40 * time.Hour, 40 * time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := membership.NewQuarantine()
			c := membership.NewCluster(fakeSystem(), tc.provider, membership.Config{DownRemovalMargin: tc.margin, Quarantine: q})
			if got := membership.RemovedRetention(c); got != tc.removed {
				t.Errorf("removed members kept %v, want %v", got, tc.removed)
			}
			if got := membership.QuarantineRetention(q); got != tc.quarantine {
				t.Errorf("quarantines kept %v, want %v", got, tc.quarantine)
			}
			if got := membership.RemovedRetention(c); got < 10*membershiphook.Of(c).DownRemovalMargin() {
				t.Errorf("removals kept %v, less than ten down-removal margins (%v)", got, membershiphook.Of(c).DownRemovalMargin())
			}
		})
	}
}
