package management

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/shardingadmin"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
	"github.com/protoshard/protoshard/messages"
)

// oneNode is a one-member cluster with one remote (race-safe) and its
// Sharding.
func oneNode(t *testing.T) *actorsharding.Sharding {
	t.Helper()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	quarantine := membership.NewQuarantine()
	r := remote.NewRemote(system, remote.Configure("127.0.0.1", 0, quarantine.RemoteOption()))
	r.Start()
	cluster := membership.NewCluster(system, local.NewRegistry().Provider(), membership.Config{Quarantine: quarantine})
	t.Cleanup(func() {
		cluster.Close()
		r.Shutdown(false)
		system.Shutdown()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cluster.Join(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := actorsharding.New(system, cluster)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// echo is an entity that answers a Ping with a Pong.
func echo() *actor.Props {
	return actor.PropsFromFunc(func(ctx actor.Context) {
		if p, ok := ctx.Message().(*testpb.Ping); ok {
			ctx.Respond(&testpb.Pong{EntityId: p.EntityId, Seq: p.Seq})
		}
	})
}

// silentHandler is the handler of s with the time-out timeout, and one
// more region, "Silent", which never answers.
func silentHandler(s *actorsharding.Sharding, timeout time.Duration) *handler {
	silent := s.System().Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	return newHandler(s.System(), s.Cluster(), func() []shardingadmin.Region {
		return append(shardingadmin.Regions(s.System()), shardingadmin.Region{TypeName: "Silent", PID: silent})
	}, []Option{WithTimeout(timeout)})
}

func get(t *testing.T, srv *httptest.Server, path string, into any) int {
	t.Helper()
	res, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	if ct := res.Header.Get("Content-Type"); into != nil && ct != "application/json" {
		t.Fatalf("GET %s: content type %q, body %s", path, ct, body)
	}
	if into != nil {
		if err := json.Unmarshal(body, into); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, body)
		}
	}
	return res.StatusCode
}

// The routes on one node: members, types, singletons, and the shard map
// with the entities the test started.
func TestRoutesOneNode(t *testing.T) {
	s := oneNode(t)
	region, err := s.StartRegion("Counter", echo(), actorsharding.NewHashCodeMessageExtractor(10))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		if _, err := s.System().Root.RequestFuture(region, &testpb.Ping{EntityId: id}, 30*time.Second).Result(); err != nil {
			t.Fatalf("ping %s: %v", id, err)
		}
	}
	srv := httptest.NewServer(NewHandler(s, WithSingleton("scheduler", "")))
	defer srv.Close()
	self := s.Cluster().Self()

	var members membersView
	if code := get(t, srv, "/cluster/members", &members); code != http.StatusOK || members.Cluster != s.Cluster().Name() || len(members.Members) != 1 ||
		members.Members[0].ID != self.ID || members.Members[0].Address != self.Address || members.Oldest != self.ID {
		t.Errorf("members: %d %+v", code, members)
	}
	var types []typeView
	if code := get(t, srv, "/cluster/shards", &types); code != http.StatusOK || len(types) != 1 || types[0].Type != "Counter" || types[0].Proxy {
		t.Errorf("types: %d %+v", code, types)
	}
	var singletons []singletonView
	if code := get(t, srv, "/cluster/singletons", &singletons); code != http.StatusOK || len(singletons) != 2 ||
		singletons[0].Name != shardingadmin.CoordinatorManagerName("Counter") || singletons[1].Name != "scheduler" ||
		singletons[0].Owner == nil || singletons[0].Owner.ID != self.ID {
		t.Errorf("singletons: %d %+v", code, singletons)
	}
	var regions regionsView
	if code := get(t, srv, "/cluster/shards/Counter/regions", &regions); code != http.StatusOK ||
		len(regions.Addresses) != 1 || regions.Addresses[0] != self.Address {
		t.Errorf("regions: %d %+v", code, regions)
	}
	var stats statsView
	if code := get(t, srv, "/cluster/shards/Counter/stats", &stats); code != http.StatusOK || len(stats.Regions) != 1 {
		t.Errorf("stats: %d %+v", code, stats)
	}
	total := 0
	for _, n := range stats.Regions[self.Address].Stats {
		total += int(n)
	}
	if total != 4 {
		t.Errorf("stats count %d entities, want 4: %+v", total, stats)
	}
	var coord coordinatorStateView
	if code := get(t, srv, "/cluster/shards/Counter/coordinator", &coord); code != http.StatusOK || coord.Cluster != s.Cluster().Name() ||
		coord.MemberID != self.ID || coord.State != "active" || len(coord.Regions) != 1 {
		t.Errorf("coordinator: %d %+v", code, coord)
	}
	var m shardMap
	if code := get(t, srv, "/cluster/shards/Counter/map", &m); code != http.StatusOK || m.Cluster != s.Cluster().Name() || m.Entities != 4 || len(m.Nodes) != 1 ||
		!m.Nodes[0].Coordinator || len(m.Nodes[0].Shards) != len(coord.Regions[0].Shards) {
		t.Errorf("map: %d %+v", code, m)
	}
	var e errorView
	if code := get(t, srv, "/cluster/shards/Nope/map", &e); code != http.StatusNotFound || e.Type != "Nope" || e.Error == "" {
		t.Errorf("unknown type: %d %+v", code, e)
	}
	for path, want := range map[string]string{
		"/":            `<script src="shardmap.js">`,
		"/shardmap.js": "cluster/shards/",
		"/style.css":   ".shard.handoff",
	} {
		res, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d, body without %q", path, res.StatusCode, want)
		}
	}
	if code := get(t, srv, "/nope.js", nil); code != http.StatusNotFound {
		t.Errorf("GET /nope.js: %d, want 404", code)
	}
	res, err := srv.Client().Post(srv.URL+"/cluster/members", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", res.StatusCode)
	}
}

// A coordinator that cannot be reached answers 503 with a JSON error, in
// about the time-out: a region that has no coordinator (no member has the
// type's role), and a region that does not answer at all.
func TestRoutesUnavailable(t *testing.T) {
	s := oneNode(t)
	if _, err := s.StartRegion("Counter", echo(), nil, actorsharding.WithRole("nobody")); err != nil {
		t.Fatal(err)
	}
	const timeout = 300 * time.Millisecond
	srv := httptest.NewServer(silentHandler(s, timeout))
	defer srv.Close()
	for _, path := range []string{
		"/cluster/shards/Counter/coordinator",
		"/cluster/shards/Counter/map",
		"/cluster/shards/Silent/regions",
		"/cluster/shards/Silent/stats",
		"/cluster/shards/Silent/coordinator",
		"/cluster/shards/Silent/map",
	} {
		start := time.Now()
		var e errorView
		code := get(t, srv, path, &e)
		took := time.Since(start)
		if code != http.StatusServiceUnavailable || e.Error == "" {
			t.Errorf("%s: %d %+v, want 503 with an error", path, code, e)
		}
		if took > 10*timeout {
			t.Errorf("%s took %v with a time-out of %v", path, took, timeout)
		}
		t.Logf("%s: %d in %v: %s", path, code, took.Round(time.Millisecond), e.Error)
	}
}

// A request whose client went away (its context cancelled) stops waiting
// for the region's answer at once, not after the handler's time-out.
func TestAskEndsWithTheRequest(t *testing.T) {
	s := oneNode(t)
	h := silentHandler(s, time.Minute)
	silent := s.System().Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := ask[*messages.CurrentRegions](ctx, h, silent, &messages.GetCurrentRegions{})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errUnavailable) {
		t.Errorf("error %v, want it to wrap context.Canceled and errUnavailable", err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the ask took %v after its request ended", took)
	}
}
