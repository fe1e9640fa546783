package singleton

import (
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/membership"
	"github.com/stretchr/testify/assert"
)

func mem(id string, age uint64, roles ...string) membership.Member {
	return membership.Member{ID: id, Address: "127.0.0.1:" + id, Age: age, Roles: roles}
}

func ptr(m membership.Member) *membership.Member { return &m }

func TestRetryCounts(t *testing.T) {
	cases := []struct {
		name         string
		margin       time.Duration
		interval     time.Duration
		min          int
		wantHandOver int
		wantTakeOver int
	}{
		{"akka defaults", 0, time.Second, 15, 15, 12},
		{"margin dominates", 20 * time.Second, time.Second, 15, 23, 20},
		{"small min", 0, time.Second, 2, 3, 1},
		{"min one", 0, time.Second, 1, 3, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := settings{RemovalMargin: c.margin, HandOverRetryInterval: c.interval, MinNumberOfHandOverRetries: c.min}
			assert.Equal(t, c.wantHandOver, maxHandOverRetries(s))
			assert.Equal(t, c.wantTakeOver, maxTakeOverRetries(s))
		})
	}
}

func TestDecideStart(t *testing.T) {
	a, b := mem("a", 1), mem("b", 2)
	cases := []struct {
		name   string
		self   membership.Member
		oldest *membership.Member
		safe   bool
		want   startDecision
	}{
		{"self oldest and safe", a, ptr(a), true, startAsOldest},
		{"self oldest, a leaver may still run it", a, ptr(a), false, startBecomingOldest},
		{"other oldest", b, ptr(a), true, startYounger},
		{"no oldest with the role", b, nil, true, startYounger},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, decideStart(c.self, c.oldest, c.safe))
		})
	}
}

func TestDecideYounger(t *testing.T) {
	a, b, c := mem("a", 1), mem("b", 2), mem("c", 3)
	cases := []struct {
		name     string
		self     membership.Member
		newOld   *membership.Member
		previous []membership.Member
		removed  map[string]bool
		want     youngerDecision
	}{
		{"someone else is oldest", c, ptr(b), []membership.Member{a}, nil, stayYounger},
		{"no oldest", c, nil, nil, nil, stayYounger},
		{"self oldest, nobody before", b, ptr(b), nil, nil, becomeOldestNow},
		{"self oldest, previous removed", b, ptr(b), []membership.Member{a}, map[string]bool{"a": true}, becomeOldestNow},
		{"self oldest, previous still there (leaving)", b, ptr(b), []membership.Member{a}, nil, askHandOver},
		{"three crashed together, one not yet past the margin", c, ptr(c), []membership.Member{b, a}, map[string]bool{"a": true}, askHandOver},
		{"three crashed together, all removed", c, ptr(c), []membership.Member{b, a}, map[string]bool{"a": true, "b": true}, becomeOldestNow},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, decideYounger(tc.self, tc.newOld, tc.previous, tc.removed))
		})
	}
}

func TestDecideOldestChanged(t *testing.T) {
	a, b := mem("a", 1), mem("b", 2)
	assert.Equal(t, stayOldest, decideOldestChanged(a, ptr(a), nil, false))
	assert.Equal(t, goWasOldest, decideOldestChanged(a, ptr(b), nil, true))
	assert.Equal(t, goWasOldest, decideOldestChanged(a, nil, nil, true))
	assert.Equal(t, handOverToNobody, decideOldestChanged(a, ptr(b), map[string]bool{"b": true}, false))
	assert.Equal(t, goWasOldest, decideOldestChanged(a, ptr(b), map[string]bool{"b": true}, true))
}

func TestDecideTakeOverRetry(t *testing.T) {
	s := defaultSettings() // maxTakeOverRetries = 12
	cases := []struct {
		name       string
		count      int
		exited     bool
		haveNewOld bool
		want       takeOverRetryDecision
	}{
		{"exiting, nobody to hand over to", 1, true, false, stopSingleton},
		{"exiting, new oldest, retries left", 5, true, true, retryTakeOver},
		{"exiting, out of retries", 13, true, true, stopSingleton},
		{"not exiting, retries left", 12, false, true, retryTakeOver},
		{"not exiting, out of retries", 13, false, true, stuck},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, decideTakeOverRetry(c.count, s, c.exited, c.haveNewOld))
		})
	}
}

func TestRemovalDelay(t *testing.T) {
	s := settings{RemovalMargin: 5 * time.Second}
	assert.Equal(t, time.Duration(0), removalDelay(s, true))
	assert.Equal(t, 5*time.Second, removalDelay(s, false))
}

func TestOldestTracker(t *testing.T) {
	a, b, c := mem("a", 1, "x"), mem("b", 2), mem("c", 3, "x")
	tr := newOldestTracker("x", &membership.CurrentClusterState{Members: []membership.Member{c, b, a}, Self: c})
	assert.Equal(t, "a", tr.oldest.ID, "role filter keeps a and c; a is older")
	assert.True(t, tr.safeToBeOldest())

	assert.False(t, tr.apply(membership.MemberUp{Member: mem("d", 4, "x")}), "a younger member does not change the oldest")
	assert.False(t, tr.apply(membership.MemberRemoved{Member: b}), "b lacks the role")

	leaving := a
	leaving.Status = membership.Leaving
	assert.True(t, tr.apply(membership.MemberLeft{Member: leaving}), "a leaving oldest is no candidate")
	assert.Equal(t, "c", tr.oldest.ID)
	assert.False(t, tr.safeToBeOldest(), "a may still run the singleton")

	assert.False(t, tr.apply(membership.MemberRemoved{Member: leaving, Graceful: true}))
	assert.True(t, tr.safeToBeOldest())

	assert.True(t, tr.apply(selfExiting{}), "self (c) exiting hands over to d")
	assert.Equal(t, "d", tr.oldest.ID)
	assert.True(t, tr.apply(membership.MemberRemoved{Member: mem("d", 4, "x")}))
	assert.Nil(t, tr.oldest, "nobody left with the role")
}

func TestProxySettingsBounds(t *testing.T) {
	assert.Equal(t, 1000, proxySettings{}.withDefaults().BufferSize)
	assert.Equal(t, 0, proxySettings{BufferSize: -1}.withDefaults().BufferSize)
	assert.Equal(t, maxProxyBufferSize, proxySettings{BufferSize: 50000}.withDefaults().BufferSize)
}

func TestEffectiveRemovalMargin(t *testing.T) {
	cases := []struct {
		name          string
		setting       time.Duration
		clusterMargin time.Duration
		want          time.Duration
	}{
		{"zero takes the cluster's (Consul: the TTL)", 0, 3 * time.Second, 3 * time.Second},
		{"zero with in-process membership: none", 0, 0, 0},
		{"negative: no margin, whatever the cluster says", -1, 3 * time.Second, 0},
		{"positive: as given", 7 * time.Second, 3 * time.Second, 7 * time.Second},
		{"positive below the cluster's: as given", time.Second, 3 * time.Second, time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, effectiveRemovalMargin(c.setting, c.clusterMargin))
		})
	}
	assert.Equal(t, time.Duration(-1), settings{RemovalMargin: -1}.withDefaults().RemovalMargin,
		"a negative margin survives the defaults, to mean none")
}

func TestDecideBecomeOldest(t *testing.T) {
	assert.Equal(t, startSingletonNow, decideBecomeOldest(false))
	assert.Equal(t, acquireLeaseFirst, decideBecomeOldest(true), "Akka's AcquiringLease before the singleton starts")
}

func TestDecideAcquireResult(t *testing.T) {
	cases := []struct {
		name string
		in   acquireOutcome
		want acquireResultDecision
	}{
		{"acquired and held: start", acquireOutcome{current: true, acquiring: true, acquired: true, stillHeld: true, mayHold: true}, startWithLease},
		{"another owner holds it: retry", acquireOutcome{current: true, acquiring: true, mayHold: true}, retryLeaseLater},
		{"acquired but lost before handled: retry, never start", acquireOutcome{current: true, acquiring: true, acquired: true, mayHold: true}, retryLeaseLater},
		{"an earlier acquisition: a later operation decides", acquireOutcome{acquired: true, stillHeld: true, mayHold: true}, ignoreAcquireResult},
		{"an earlier acquisition while acquiring again", acquireOutcome{acquiring: true, acquired: true, stillHeld: true, mayHold: true}, ignoreAcquireResult},
		{"acquired after leaving AcquiringLease: give it back", acquireOutcome{current: true, acquired: true, stillHeld: true, mayHold: true}, releaseUnwantedLease},
		{"acquired after leaving, release queued already", acquireOutcome{current: true, acquired: true, stillHeld: true}, ignoreAcquireResult},
		{"refused after leaving AcquiringLease", acquireOutcome{current: true, mayHold: true}, ignoreAcquireResult},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, decideAcquireResult(c.in))
		})
	}
}

func TestDecideLeaseLost(t *testing.T) {
	cases := []struct {
		name    string
		current bool
		state   string
		alive   bool
		want    leaseLostDecision
	}{
		{"oldest with its singleton: stop it, acquire again", true, stateOldest, true, stopSingletonAndReacquire},
		{"oldest whose singleton ended by itself", true, stateOldest, false, reacquireLease},
		{"was oldest, hand-over not begun: stop at once", true, stateWasOldest, true, stopSingletonNow},
		{"handing over with a termination message: stop at once", true, stateHandingOver, true, stopSingletonNow},
		{"handing over, singleton gone", true, stateHandingOver, false, ignoreLeaseLost},
		{"acquiring: not started under it", true, stateAcquiringLease, false, ignoreLeaseLost},
		{"acquiring: the previous singleton stops already", true, stateAcquiringLease, true, ignoreLeaseLost},
		{"stopping: stopped already", true, stateStopping, true, ignoreLeaseLost},
		{"an earlier holding", false, stateOldest, true, ignoreLeaseLost},
		{"younger holds nothing", true, stateYounger, false, ignoreLeaseLost},
		{"end holds nothing", true, stateEnd, false, ignoreLeaseLost},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, decideLeaseLost(c.current, c.state, c.alive))
		})
	}
}

func TestDecideLeaseRetry(t *testing.T) {
	cases := []struct {
		name                        string
		current, inProgress, aliveS bool
		want                        leaseRetryDecision
	}{
		{"nothing running, nothing asked: acquire", true, false, false, acquireLeaseNow},
		{"previous singleton still stopping: its termination triggers it", true, false, true, waitForSingletonToStop},
		{"an acquisition is out", true, true, false, ignoreLeaseRetry},
		{"stale timer", false, false, false, ignoreLeaseRetry},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, decideLeaseRetry(c.current, c.inProgress, c.aliveS))
		})
	}
}

func TestSettingsDefaults(t *testing.T) {
	s := settings{}.withDefaults()
	assert.Equal(t, 5*time.Second, s.LeaseRetryInterval, "Akka's lease-retry-interval")
	assert.Nil(t, s.UseLease, "no lease unless asked for")
	assert.Equal(t, "singleton-counter", leaseName("counter"))
}

func TestDecideIdentifyWaiters(t *testing.T) {
	for _, tt := range []struct {
		state      string
		identified bool
		want       identifyWaitersFate
	}{
		{stateOldest, true, announceToWaiters},
		{stateStart, false, keepWaiters},
		{stateYounger, false, keepWaiters}, // a proxy saw the change first
		{stateBecomingOldest, false, keepWaiters},
		{stateAcquiringLease, false, keepWaiters},
		{stateOldest, false, keepWaiters}, // its restart is due, or it is leaving and hands over next
		{stateWasOldest, false, forgetWaiters},
		{stateHandingOver, false, forgetWaiters},
		{stateStopping, false, forgetWaiters},
		{stateEnd, false, forgetWaiters},
	} {
		assert.Equal(t, tt.want, decideIdentifyWaiters(tt.state, tt.identified), "%s, identified %v", tt.state, tt.identified)
	}
}

func TestIdentifyWaiters(t *testing.T) {
	var w identifyWaiters
	a, b := actor.NewPID("10.0.0.1:1", "proxy"), actor.NewPID("10.0.0.2:1", "proxy")
	w.add(a)
	w.add(actor.NewPID(a.Address, a.Id)) // the same proxy asking again
	w.add(b)
	w.add(nil)
	w.add(actor.NewPID("10.0.0.3:1", ""))
	assert.Equal(t, 2, w.len())
	got := w.take()
	assert.ElementsMatch(t, []*actor.PID{a, b}, got)
	assert.Equal(t, 0, w.len())
	assert.Empty(t, w.take())

	for i := range maxIdentifyWaiters + 10 {
		w.add(actor.NewPID("10.0.0.1:1", fmt.Sprintf("proxy-%d", i)))
	}
	assert.Equal(t, maxIdentifyWaiters, w.len())
}
