package management

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/internal/shardingadmin"
	"github.com/protoshard/protoshard/internal/testsupport"
	"github.com/protoshard/protoshard/singleton"
	"github.com/protoshard/protoshard/testkit"
)

// probe sends method to h at path and decodes the JSON answer into a new
// T.
func probe[T any](t *testing.T, h http.Handler, method, path string) (int, T) {
	t.Helper()
	var v T
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: %d, content type %q: %s", method, path, rec.Code, ct, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("%s %s: %v in %s", method, path, err, rec.Body)
	}
	return rec.Code, v
}

// readyOf asks h's readiness; the HTTP status must agree with the body's.
func readyOf(t *testing.T, h http.Handler) (int, readinessView) {
	t.Helper()
	code, v := probe[readinessView](t, h, http.MethodGet, "/ready")
	if want := statusCode(v.Status == readyStatus); code != want {
		t.Fatalf("readiness %s with HTTP %d, want %d", v.Status, code, want)
	}
	return code, v
}

func aliveOf(t *testing.T, h http.Handler) (int, livenessView) {
	t.Helper()
	return probe[livenessView](t, h, http.MethodGet, "/alive")
}

// waitReadiness waits until h answers with status, and returns that
// answer.
func waitReadiness(t *testing.T, h http.Handler, status string, what string) readinessView {
	t.Helper()
	return waitUntil(t, h, what+": readiness "+status, func(v readinessView) bool { return v.Status == status })
}

// waitUntil waits until h's readiness answer satisfies cond, and returns
// it.
func waitUntil(t *testing.T, h http.Handler, what string, cond func(readinessView) bool) readinessView {
	t.Helper()
	var last readinessView
	var code int
	testkit.WaitFor(t, 30*time.Second, func() bool {
		code, last = readyOf(t, h)
		return cond(last)
	}, what+"; last %d %+v", testkit.Lazy(func() any { return code }), testkit.Lazy(func() any { return last }))
	return last
}

// wantAlive fails the test unless h answers alive, with regions in the
// statuses given.
func wantAlive(t *testing.T, h http.Handler, what string, regions ...string) {
	t.Helper()
	code, v := aliveOf(t, h)
	if code != http.StatusOK || v.Status != aliveStatus || v.ActorSystem.Status != responsiveStatus || len(v.Regions) != len(regions) {
		t.Fatalf("%s: liveness %d %+v, want 200, alive, %d regions", what, code, v, len(regions))
	}
	for i, want := range regions {
		if v.Regions[i].Status != want {
			t.Errorf("%s: liveness of region %s %q, want %q", what, v.Regions[i].Type, v.Regions[i].Status, want)
		}
	}
}

// A real cluster through the health states: a node before it joins
// (starting), joined but its region not started (starting), its region
// registered (ready), while a proxy without a coordinator keeps the
// handler that checks every region starting. A second node stays ready
// while its coordinator's node is removed and the coordinator moves to it
// (reregistering); the removed node joins again as a new member, starting
// until its region registered as that member. The second node paused
// (stale), then removed while paused (removed); the first node leaving,
// then left. Liveness stays alive throughout: none of these is a reason
// to restart a process.
func TestHealthThroughStates(t *testing.T) {
	backend := testsupport.NewPausableBackend(300 * time.Millisecond)
	cluster := testkit.NewCluster(t, backend) // skips under -race
	const timeout = 5 * time.Second
	opts := []actorsharding.Option{
		actorsharding.WithRetryInterval(200 * time.Millisecond),
		// A coordinator whose node was removed starts on the next oldest
		// after this margin: long enough for the test to see the regions
		// without one.
		actorsharding.WithCoordinatorSingleton(singleton.WithHandOverRetryInterval(200*time.Millisecond), singleton.WithRemovalMargin(3*time.Second)),
	}
	extractor := actorsharding.NewHashCodeMessageExtractor(10)
	var as *actorsharding.Sharding
	var aReady, aAlive http.Handler
	leaving, release := make(chan struct{}), make(chan struct{})
	a := cluster.StartNode(testkit.WithName("a"), testkit.WithBeforeJoin(func(n *testkit.Node) {
		var err error
		if as, err = actorsharding.New(n.System, n.Membership); err != nil {
			t.Fatal(err)
		}
		aReady = ReadinessHandler(as, WithTimeout(timeout), WithReadinessTypes("Counter"))
		aAlive = LivenessHandler(as, WithTimeout(timeout))
		code, v := readyOf(t, aReady)
		if code != http.StatusServiceUnavailable || v.Status != startingStatus || v.Member.Joined || v.Member.ID != "" ||
			!strings.Contains(v.Reason, "not joined") || len(v.Regions) != 1 || v.Regions[0].Status != regionNotStarted {
			t.Errorf("before the join: readiness %d %+v, want 503 starting, not joined, Counter not started", code, v)
		}
		wantAlive(t, aAlive, "before the join")
		// Holds a's leave while the test looks.
		membershiphook.Of(n.Membership).RegisterLeaveHookIn(membershiphook.LeavePhaseShardingShutdownRegion, "test: hold", func(ctx context.Context) error {
			close(leaving)
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		})
	}))

	code, v := readyOf(t, aReady)
	if code != http.StatusServiceUnavailable || v.Status != startingStatus || !v.Member.Joined || v.Member.ID != a.MemberID() ||
		v.Member.Address != a.Address() || !strings.Contains(v.Reason, "Counter (notStarted)") {
		t.Errorf("joined, no region: readiness %d %+v, want 503 starting, Counter not started", code, v)
	}
	if _, err := as.StartRegion("Counter", echo(), extractor, opts...); err != nil {
		t.Fatal(err)
	}
	// No member has the role "nobody": a proxy that never finds a coordinator.
	if _, err := as.StartRegion("Orders", echo(), nil, append(opts, actorsharding.WithRole("nobody"))...); err != nil {
		t.Fatal(err)
	}
	v = waitReadiness(t, aReady, readyStatus, "a's region started")
	if r := v.Regions[0]; len(v.Regions) != 1 || r.Type != "Counter" || r.Proxy || !r.Ready || !r.Registered ||
		r.Status != regionRegistered || r.Coordinator != a.Address() || r.Epoch == 0 || v.Reason != "" {
		t.Errorf("a ready: %+v, want Counter registered with the coordinator on a", v)
	}
	admin := NewHandler(as, WithTimeout(timeout))
	code, v = readyOf(t, admin)
	if code != http.StatusServiceUnavailable || v.Status != startingStatus || len(v.Regions) != 2 ||
		!v.Regions[0].Ready || v.Regions[1].Type != "Orders" || !v.Regions[1].Proxy || v.Regions[1].Ready ||
		v.Regions[1].Status != regionRegistering || !strings.Contains(v.Reason, "Orders (registering)") {
		t.Errorf("every region of a: readiness %d %+v, want 503 starting, Orders registering", code, v)
	}
	wantAlive(t, admin, "a with two regions", responsiveStatus, responsiveStatus)

	// b stays out of the cluster once removed.
	b := cluster.StartNode(testkit.WithName("b"), testkit.WithStayOutAfterRemoval())
	bs, err := actorsharding.New(b.System, b.Membership)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bs.StartRegion("Counter", echo(), extractor, opts...); err != nil {
		t.Fatal(err)
	}
	bReady, bAlive := ReadinessHandler(bs, WithTimeout(timeout)), LivenessHandler(bs, WithTimeout(timeout))
	v = waitReadiness(t, bReady, readyStatus, "b's region started")
	if len(v.Regions) != 1 || v.Regions[0].Coordinator != a.Address() || v.Member.ID != b.MemberID() {
		t.Errorf("b ready: %+v, want its region registered with the coordinator on a", v)
	}

	// a is removed. b's region lost its coordinator, which starts on b
	// after the removal margin: meanwhile b stays ready. a joins again as
	// a new member, whose region has not registered yet: starting.
	first := a.MemberID()
	backend.Pause(a)
	backend.RemovePaused(a)
	backend.Resume(a)
	// Both last until the coordinator runs on b: watched together.
	var bMoving, aStarting *readinessView
	testkit.WaitFor(t, 30*time.Second, func() bool {
		if _, v := readyOf(t, bReady); bMoving == nil && len(v.Regions) == 1 && v.Regions[0].Status == regionReregistering {
			bMoving = &v
		}
		if _, v := readyOf(t, aReady); aStarting == nil && v.Member.ID != first && v.Member.ID != "" && v.Status == startingStatus {
			aStarting = &v
		}
		return bMoving != nil && aStarting != nil
	}, "b's region without its coordinator (%v) and a joined again (%v)", testkit.Lazy(func() any { return bMoving }),
		testkit.Lazy(func() any { return aStarting }))
	if v := bMoving; v.Status != readyStatus || !v.Regions[0].Ready || v.Regions[0].Registered || v.Regions[0].Coordinator != "" {
		t.Errorf("b, its coordinator's node removed: %+v, want ready, its region not registered now", v)
	}
	if v := aStarting; v.Regions[0].Ready || v.Regions[0].Status != regionRegistering || !strings.Contains(v.Reason, "Counter (registering)") {
		t.Errorf("a joined again: %+v, want its region registering", v)
	}
	v = waitUntil(t, aReady, "a joined again", func(v readinessView) bool {
		return v.Status == readyStatus && v.Regions[0].Coordinator == b.Address()
	})
	if v.Member.ID != a.MemberID() || v.Regions[0].Status != regionRegistered {
		t.Errorf("a joined again: %+v, want member %s registered with the coordinator on b", v, a.MemberID())
	}
	waitUntil(t, bReady, "b, the coordinator on b", func(v readinessView) bool {
		return v.Status == readyStatus && v.Regions[0].Status == regionRegistered && v.Regions[0].Coordinator == b.Address()
	})

	// b is paused: stale. Its coordinator runs on, so a stays ready.
	backend.Pause(b)
	v = waitReadiness(t, bReady, staleStatus, "b paused")
	if !v.Member.Stale || v.Member.Removed || !strings.Contains(v.Reason, "failure detection timeout") {
		t.Errorf("b paused: %+v, want stale", v)
	}
	wantAlive(t, bAlive, "b paused", responsiveStatus)
	if code, v := readyOf(t, aReady); code != http.StatusOK {
		t.Errorf("a while b is paused: %d %+v, want ready", code, v)
	}

	// b is removed while paused, hears of it when it resumes, and stays
	// out. a stays ready while its coordinator moves back to a.
	backend.RemovePaused(b)
	backend.Resume(b)
	v = waitReadiness(t, bReady, removedStatus, "b removed")
	if !v.Member.Removed || !v.Member.Stale || v.Member.ID != b.MemberID() {
		t.Errorf("b removed: %+v", v)
	}
	wantAlive(t, bAlive, "b removed", responsiveStatus)
	waitUntil(t, aReady, "a, its coordinator's node removed", func(v readinessView) bool {
		return v.Status == readyStatus && v.Regions[0].Status == regionReregistering
	})
	waitUntil(t, aReady, "a, the coordinator on a", func(v readinessView) bool {
		return v.Status == readyStatus && v.Regions[0].Status == regionRegistered && v.Regions[0].Coordinator == a.Address()
	})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	left := make(chan error, 1)
	go func() { left <- as.Leave(ctx) }()
	<-leaving
	v = waitReadiness(t, aReady, leavingStatus, "a leaving")
	if !v.Member.Leaving {
		t.Errorf("a leaving: %+v", v)
	}
	// (Its region may have stopped already: nobody is left to take its shards.)
	if code, v := aliveOf(t, aAlive); code != http.StatusOK || v.Status != aliveStatus {
		t.Errorf("a leaving: liveness %d %+v, want alive", code, v)
	}
	close(release)
	if err := <-left; err != nil {
		t.Fatalf("a's leave: %v", err)
	}
	v = waitReadiness(t, aReady, leavingStatus, "a left")
	if !v.Member.Leaving || !v.Member.Removed || v.Regions[0].Status != regionStopped {
		t.Errorf("a left: %+v, want its region stopped", v)
	}
	// The region stopped with the leave; the proxy, which hosts nothing,
	// runs on.
	wantAlive(t, aAlive, "a left", regionStopped, responsiveStatus)
}

// Liveness fails, in about the time-out, when a region does not answer,
// or when the actor system is stopped; readiness then names the silent
// region too. The checks answer GET and HEAD only.
func TestHealthUnresponsive(t *testing.T) {
	s := oneNode(t)
	if _, err := s.StartRegion("Counter", echo(), nil); err != nil {
		t.Fatal(err)
	}
	const timeout = 300 * time.Millisecond
	h := silentHandler(s, timeout)

	start := time.Now()
	code, v := aliveOf(t, h)
	if took := time.Since(start); took > 10*timeout {
		t.Errorf("liveness took %v with a time-out of %v", took, timeout)
	}
	if code != http.StatusServiceUnavailable || v.Status != unresponsiveStatus || !strings.Contains(v.Reason, "region Silent") ||
		len(v.Regions) != 2 || v.Regions[0].Status != responsiveStatus || v.Regions[1].Status != unresponsiveStatus || v.Regions[1].Error == "" ||
		v.ActorSystem.Status != responsiveStatus {
		t.Errorf("liveness %d %+v, want 503 with region Silent unresponsive", code, v)
	}
	waitReadiness(t, h, startingStatus, "a silent region")
	if _, v := readyOf(t, h); len(v.Regions) != 2 || v.Regions[1].Status != regionUnresponsive || !strings.Contains(v.Reason, "Silent (unresponsive)") {
		t.Errorf("readiness %+v, want region Silent unresponsive", v)
	}

	for _, hh := range []http.Handler{ReadinessHandler(s), LivenessHandler(s)} {
		rec := httptest.NewRecorder()
		hh.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil))
		if rec.Code != http.StatusMethodNotAllowed {
			t.Errorf("POST: %d, want 405", rec.Code)
		}
		rec = httptest.NewRecorder()
		hh.ServeHTTP(rec, httptest.NewRequest(http.MethodHead, "/", nil))
		if rec.Code == http.StatusMethodNotAllowed {
			t.Errorf("HEAD: %d", rec.Code)
		}
	}

	stopped := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	stopped.Shutdown()
	code, v = aliveOf(t, newHandler(stopped, s.Cluster(), func() []shardingadmin.Region { return nil }, nil))
	if code != http.StatusServiceUnavailable || v.ActorSystem.Status != unresponsiveStatus || !strings.Contains(v.ActorSystem.Error, "stopped") ||
		!strings.Contains(v.Reason, "the actor system") {
		t.Errorf("a stopped actor system: liveness %d %+v, want 503", code, v)
	}
}
