package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/actorsharding/consulstore"
	"github.com/protoshard/protoshard/internal/consulagent"
	"github.com/protoshard/protoshard/internal/consulmember"
	"github.com/protoshard/protoshard/internal/coordinator"
	"github.com/protoshard/protoshard/membership"
	consulmembership "github.com/protoshard/protoshard/membership/consul"
)

const testService = "cli-test"

// cluster is a Consul agent with members registered the way the nodes
// register, and sharding data written by the real stores.
type cluster struct {
	t      *testing.T
	agent  *consulagent.Agent
	client *api.Client
}

func startCluster(t *testing.T) *cluster {
	a := consulagent.Start(t)
	return &cluster{t: t, agent: a, client: a.Client()}
}

// join registers a member of the service testService through the
// membership provider and returns the provider (its TTL is refreshed until
// the test ends).
func (c *cluster) join(id, addr string) membership.Provider {
	c.t.Helper()
	return c.joinAs(testService, id, addr)
}

// joinAs is join as a member of service.
func (c *cluster) joinAs(service, id, addr string) membership.Provider {
	c.t.Helper()
	p, err := consulmembership.New(consulmembership.WithClient(c.client), consulmembership.WithServiceName(service),
		consulmembership.WithTTL(10*time.Second), consulmembership.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(p.Close)
	if _, err := p.Register(context.Background(), membership.Member{ID: id, Address: addr, Roles: []string{"node"}}); err != nil {
		c.t.Fatal(err)
	}
	return p
}

// crashed registers a member whose check is critical: what Consul shows of
// a member that stopped refreshing its TTL until it deregisters it.
func (c *cluster) crashed(id, host string, port int) {
	c.t.Helper()
	err := c.client.Agent().ServiceRegister(&api.AgentServiceRegistration{
		ID: id, Name: testService, Address: host, Port: port,
		Meta:  map[string]string{consulmember.MetaMemberID: id, consulmember.MetaStatus: consulmember.StatusUp},
		Check: &api.AgentServiceCheck{CheckID: "ttl-" + id, TTL: "10s", Status: api.HealthCritical},
	})
	if err != nil {
		c.t.Fatal(err)
	}
}

// saveState writes the coordinator state of typeName of the cluster
// testService through the coordinator's own store, with the regions and
// shards given as member ID → shards (each member has one region at its
// address), and returns the state's version.
func (c *cluster) saveState(typeName string, version uint64, regions map[string][]string, addrs map[string]string, unallocated ...string) uint64 {
	c.t.Helper()
	return c.saveStateOf(testService, typeName, version, regions, addrs, unallocated...)
}

// saveStateOf is saveState for the cluster clusterName.
func (c *cluster) saveStateOf(clusterName, typeName string, version uint64, regions map[string][]string, addrs map[string]string, unallocated ...string) uint64 {
	c.t.Helper()
	s := coordinator.NewState(true)
	for _, id := range slices.Sorted(maps.Keys(regions)) {
		pid := actor.NewPID(addrs[id], "sharding/"+typeName)
		mustApply(c.t, &s, coordinator.ShardRegionRegistered{Region: pid, MemberID: id})
		for _, shard := range regions[id] {
			mustApply(c.t, &s, coordinator.ShardHomeAllocated{Shard: shard, Region: pid})
		}
	}
	for _, shard := range unallocated {
		s.Unallocated[shard] = struct{}{}
	}
	store := consulstore.NewStateStore(c.client, clusterName, typeName)
	v, err := coordinator.SaveState(context.Background(), store, s, version)
	if err != nil {
		c.t.Fatal(err)
	}
	return v
}

func mustApply(t *testing.T, s *coordinator.State, e coordinator.Event) {
	t.Helper()
	if err := s.Apply(e); err != nil {
		t.Fatal(err)
	}
}

// remember stores entity IDs of a shard of the cluster testService
// through the remember-entities store.
func (c *cluster) remember(typeName, shard string, ids ...string) {
	c.t.Helper()
	c.rememberOf(testService, typeName, shard, ids...)
}

// rememberOf is remember for the cluster clusterName.
func (c *cluster) rememberOf(clusterName, typeName, shard string, ids ...string) {
	c.t.Helper()
	if err := consulstore.NewRememberEntitiesStore(c.client, clusterName, typeName).Update(context.Background(), shard, ids, nil); err != nil {
		c.t.Fatal(err)
	}
}

// keys returns the keys under prefix.
func (c *cluster) keys(prefix string) []string {
	c.t.Helper()
	keys, _, err := c.client.KV().Keys(prefix, "", nil)
	if err != nil {
		c.t.Fatal(err)
	}
	return keys
}

// cli runs the command against the agent.
func (c *cluster) cli(args ...string) (int, string, string) {
	return cli(append(args, "-consul", c.agent.Addr(), "-service", testService)...)
}

var (
	addrs = map[string]string{"m-1": "127.0.0.1:9001", "m-2": "127.0.0.1:9002", "m-3": "127.0.0.1:9003"}
)

func TestMembersCommand(t *testing.T) {
	c := startCluster(t)
	code, out, errOut := c.cli("members")
	if code != exitOK || out != "no members registered as service \"cli-test\"\n" {
		t.Fatalf("no members: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	c.join("m-1", addrs["m-1"])
	leaver := c.join("m-2", addrs["m-2"])
	c.crashed("m-3", "127.0.0.1", 9003)
	if err := leaver.SetLeaving(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Another service's instance is no member.
	if err := c.client.Agent().ServiceRegister(&api.AgentServiceRegistration{ID: "web", Name: testService, Port: 80}); err != nil {
		t.Fatal(err)
	}

	code, out, errOut = c.cli("members")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a heading and 3 members:\n%s", out)
	}
	for i, want := range [][]string{
		{"AGE", "MEMBER", "ADDRESS", "STATUS", "ROLES"},
		{"m-1", "127.0.0.1:9001", "passing", "node"},
		{"m-2", "127.0.0.1:9002", "leaving", "node"},
		{"m-3", "127.0.0.1:9003", "critical", "-"},
	} {
		fields := strings.Fields(lines[i])
		if i > 0 {
			fields = fields[1:] // the age is Consul's index
		}
		if !slices.Equal(fields, want) {
			t.Errorf("line %d: %q, want %q", i, fields, want)
		}
	}

	code, out, errOut = c.cli("members", "-json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var ms []memberJSON
	if err := json.Unmarshal([]byte(out), &ms); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(ms) != 3 || ms[0].ID != "m-1" || ms[1].ID != "m-2" || ms[2].ID != "m-3" {
		t.Fatalf("members %+v", ms)
	}
	if !(ms[0].Age < ms[1].Age && ms[1].Age < ms[2].Age) {
		t.Errorf("not oldest first: %+v", ms)
	}
	if !ms[0].Live || ms[0].Status != "passing" || !ms[1].Live || ms[1].Status != "leaving" || ms[2].Live || ms[2].Status != "critical" {
		t.Errorf("statuses %+v", ms)
	}
	if !slices.Equal(ms[0].Roles, []string{"node"}) || ms[0].SystemID != "" {
		t.Errorf("m-1 %+v", ms[0])
	}
}

func TestShardsCommand(t *testing.T) {
	c := startCluster(t)
	code, out, _ := c.cli("shards", "-type", "counter")
	if code != exitOK || !strings.Contains(out, "no coordinator state") {
		t.Fatalf("empty: exit %d\n%s", code, out)
	}

	c.join("m-1", addrs["m-1"])
	c.saveState("counter", 0, map[string][]string{"m-1": {"10", "2"}, "m-2": {"3"}}, addrs, "7")
	c.remember("counter", "2", "alice", "bob")
	c.remember("counter", "7", "carol")
	c.remember("counter", "a/b", "dave")
	// Another type's data is not shown.
	c.remember("counter/entities/2", "2", "eve")
	c.remember("other", "2", "frank")

	code, out, errOut := c.cli("shards", "-type", "counter")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"entity type \"counter\" of cluster \"cli-test\": coordinator state protoshard/cli-test/sharding/counter/coordinator-state (modify index ",
		"127.0.0.1:9001/sharding/counter  region  m-1     cli-test  passing  2",
		"127.0.0.1:9002/sharding/counter  region  m-2     -         absent   1",
		"2      allocated     127.0.0.1:9001/sharding/counter  m-1     2",
		"3      allocated     127.0.0.1:9002/sharding/counter  m-2     0",
		"7      unallocated   -                                -       1",
		"10     allocated     127.0.0.1:9001/sharding/counter  m-1     0",
		"a/b    not-in-state  -                                -       1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "problems") {
		t.Errorf("problems reported:\n%s", out)
	}

	code, out, errOut = c.cli("shards", "-type", "counter", "-json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var v shardView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	got := map[string]string{}
	for _, s := range v.Shards {
		got[s.Shard] = s.State + " " + s.Member + " " + strings.Join(s.Entities, ",")
	}
	want := map[string]string{
		"2": "allocated m-1 alice,bob", "3": "allocated m-2 ", "7": "unallocated  carol",
		"10": "allocated m-1 ", "a/b": "not-in-state  dave",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || v.Cluster != testService || !v.StateStored || !v.RememberEntities || len(v.Regions) != 2 || !v.Regions[0].Live || v.Regions[1].Live {
		t.Fatalf("json view %+v", v)
	}

	// A state that does not decode is shown, not fatal.
	if _, err := c.client.KV().Put(&api.KVPair{Key: consulstore.StateKey(testService, "broken"), Value: []byte{0xff, 0xff}}, nil); err != nil {
		t.Fatal(err)
	}
	code, out, _ = c.cli("shards", "-type", "broken")
	if code != exitOK || !strings.Contains(out, "does not decode") {
		t.Fatalf("broken: exit %d\n%s", code, out)
	}
}

func TestRemoveDataCommand(t *testing.T) {
	c := startCluster(t)
	live := c.join("m-1", addrs["m-1"])
	c.crashed("m-2", "127.0.0.1", 9002)
	c.saveState("counter", 0, map[string][]string{"m-1": {"0", "1"}, "m-2": {"2"}}, addrs)
	for shard := range 100 { // more buckets than one transaction deletes
		c.remember("counter", fmt.Sprint(shard), fmt.Sprintf("e-%d", shard))
	}
	c.remember("other", "0", "keep")
	c.saveState("other", 0, map[string][]string{"m-1": {"0"}}, addrs)
	stateKey := consulstore.StateKey(testService, "counter")
	entities := "protoshard/cli-test/sharding/counter/entities/"
	stored := func() int { return len(c.keys(stateKey)) + len(c.keys(entities)) }
	if stored() != 101 {
		t.Fatalf("%d keys stored, want 101", stored())
	}

	// Refused while m-1 is live; m-2 is critical and not named.
	code, out, errOut := c.cli("remove-data", "-type", "counter")
	if code != exitFailure || out != "" || strings.Count(errOut, "\n") != 1 ||
		!strings.Contains(errOut, "region 127.0.0.1:9001/sharding/counter on member m-1 of service cli-test (passing)") || strings.Contains(errOut, "m-2") {
		t.Fatalf("live: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// The dry run says the same, and which keys there are.
	code, out, errOut = c.cli("remove-data", "-type", "counter", "-dry-run")
	if code != exitFailure || !strings.Contains(errOut, "m-1") || !strings.Contains(out, "would delete 101 keys") {
		t.Fatalf("live dry run: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// -force -dry-run lists every key and deletes nothing.
	code, out, errOut = c.cli("remove-data", "-type", "counter", "-dry-run", "-force")
	if code != exitOK {
		t.Fatalf("forced dry run: exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"-force: refusing", "would delete 101 keys (the coordinator state, 100 remembered-entity buckets of 100 shards):",
		"  " + stateKey + " (modify index ", "  " + "protoshard/" + testService + "/sharding/counter/entities/99/",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run misses %q:\n%s", want, out)
		}
	}
	if stored() != 101 {
		t.Fatalf("the dry run deleted: %d keys left", stored())
	}

	// Once m-1 has left, the data goes, and only this type's.
	if err := live.Deregister(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = c.cli("remove-data", "-type", "counter")
	if code != exitOK || out != "entity type \"counter\" of cluster \"cli-test\": deleted 101 keys (the coordinator state, 100 remembered-entity buckets of 100 shards)\n" {
		t.Fatalf("remove: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if n := stored(); n != 0 {
		t.Fatalf("%d keys left", n)
	}
	if len(c.keys("protoshard/cli-test/sharding/other/")) != 2 {
		t.Fatalf("the other type's keys: %q", c.keys("protoshard/cli-test/sharding/other/"))
	}
	code, out, _ = c.cli("remove-data", "-type", "counter")
	if code != exitOK || !strings.Contains(out, "nothing stored") {
		t.Fatalf("again: exit %d, %q", code, out)
	}

	// -force removes a type whose regions are live.
	c.join("m-3", addrs["m-3"])
	c.saveState("busy", 0, map[string][]string{"m-3": {"0"}}, addrs)
	c.remember("busy", "0", "x")
	if code, _, _ := c.cli("remove-data", "-type", "busy"); code != exitFailure {
		t.Fatalf("busy without -force: exit %d", code)
	}
	code, out, errOut = c.cli("remove-data", "-type", "busy", "-force")
	if code != exitOK || !strings.Contains(out, "deleted 2 keys") || len(c.keys("protoshard/cli-test/sharding/busy/")) != 0 {
		t.Fatalf("busy -force: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// A state that does not decode is removed only with -force.
	if _, err := c.client.KV().Put(&api.KVPair{Key: consulstore.StateKey(testService, "broken"), Value: []byte{0xff, 0xff}}, nil); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = c.cli("remove-data", "-type", "broken")
	if code != exitFailure || !strings.Contains(errOut, "does not decode") {
		t.Fatalf("broken: exit %d, %q", code, errOut)
	}
	if code, _, errOut := c.cli("remove-data", "-type", "broken", "-force"); code != exitOK || len(c.keys("protoshard/cli-test/sharding/broken/")) != 0 {
		t.Fatalf("broken -force: exit %d, %q", code, errOut)
	}
}

// A cluster whose members register under another service than -service is
// alive all the same: remove-data judges the regions of the stored state
// against the members of every service, names the live one, and removes
// the data once the cluster has stopped.
func TestRemoveDataSeesLiveRegionsOfAnyService(t *testing.T) {
	c := startCluster(t)
	// Cluster app-b: members registered as service app-b, data under
	// protoshard/app-b/. Cluster app-a has a type of the same name.
	live := c.joinAs("app-b", "b-1", addrs["m-1"])
	c.saveStateOf("app-b", "Counter", 0, map[string][]string{"b-1": {"0", "1"}}, map[string]string{"b-1": addrs["m-1"]})
	c.rememberOf("app-b", "Counter", "0", "x")
	c.saveStateOf("app-a", "Counter", 0, map[string][]string{"a-1": {"0"}}, map[string]string{"a-1": addrs["m-2"]})
	keysOf := func(cluster string) int { return len(c.keys("protoshard/" + cluster + "/sharding/Counter/")) }
	if keysOf("app-b") != 2 || keysOf("app-a") != 1 {
		t.Fatalf("stored: app-b %d keys, app-a %d", keysOf("app-b"), keysOf("app-a"))
	}

	// The default -service (no member of app-b's) and another one.
	for _, service := range [][]string{nil, {"-service", testService}} {
		args := append([]string{"remove-data", "-type", "Counter", "-cluster", "app-b", "-consul", c.agent.Addr()}, service...)
		code, out, errOut := cli(args...)
		if code != exitFailure || out != "" || strings.Count(errOut, "\n") != 1 ||
			!strings.Contains(errOut, `refusing to remove the data of entity type "Counter" of cluster "app-b"`) ||
			!strings.Contains(errOut, "region 127.0.0.1:9001/sharding/Counter on member b-1 of service app-b (passing)") {
			t.Fatalf("%q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	if keysOf("app-b") != 2 {
		t.Fatalf("a refusal deleted: %d keys left", keysOf("app-b"))
	}
	// -cluster defaults to -service: the service app-b names both.
	if code, _, errOut := cli("remove-data", "-type", "Counter", "-service", "app-b", "-consul", c.agent.Addr()); code != exitFailure || !strings.Contains(errOut, "b-1") {
		t.Fatalf("-service app-b: exit %d, stderr %q", code, errOut)
	}

	// Once the cluster has stopped, its data goes, and app-a's stays.
	if err := live.Deregister(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli("remove-data", "-type", "Counter", "-cluster", "app-b", "-consul", c.agent.Addr())
	if code != exitOK || out != "entity type \"Counter\" of cluster \"app-b\": deleted 2 keys (the coordinator state, 1 remembered-entity buckets of 1 shards)\n" {
		t.Fatalf("stopped: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if keysOf("app-b") != 0 || keysOf("app-a") != 1 {
		t.Fatalf("after removal: app-b %d keys, app-a %d", keysOf("app-b"), keysOf("app-a"))
	}
}

// A coordinator that writes between the reading and the deleting stops
// the removal: nothing of the transaction it touches is deleted.
func TestRemoveDataLosesToAWritingCoordinator(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	source, err := newConsulSource(c.agent.Addr())
	if err != nil {
		t.Fatal(err)
	}
	plan := func(typeName string) removalPlan {
		st, err := source.state(ctx, testService, typeName)
		if err != nil {
			t.Fatal(err)
		}
		buckets, err := source.buckets(ctx, testService, typeName)
		if err != nil {
			t.Fatal(err)
		}
		return newRemovalPlan(st, buckets)
	}
	mustRefuse := func(typeName string, p removalPlan, keys int) {
		t.Helper()
		deleted, err := source.apply(ctx, p.transactions())
		if err == nil || deleted != 0 || !strings.Contains(err.Error(), consulstore.StateKey(testService, typeName)) {
			t.Fatalf("deleted %d, err %v", deleted, err)
		}
		if n := len(c.keys("protoshard/cli-test/sharding/" + typeName + "/")); n != keys {
			t.Fatalf("%d keys left, want %d", n, keys)
		}
	}

	// The state is saved again after it was read.
	v := c.saveState("moved", 0, map[string][]string{"m-1": {"0"}}, addrs)
	c.remember("moved", "0", "a")
	p := plan("moved")
	c.saveState("moved", v, map[string][]string{"m-1": {"0", "1"}}, addrs)
	mustRefuse("moved", p, 2)

	// The state is created after it was read as absent.
	c.remember("created", "0", "a")
	p = plan("created")
	if p.stateStored {
		t.Fatal("state stored")
	}
	c.saveState("created", 0, map[string][]string{"m-1": {"0"}}, addrs)
	mustRefuse("created", p, 2)

	// A shard writes its entities after they were read: the state goes
	// with the first transaction, the changed bucket stays.
	c.saveState("written", 0, map[string][]string{"m-1": {"0"}}, addrs)
	c.remember("written", "0", "a")
	p = plan("written")
	// The shard remembers more entities until one lands in the bucket read.
	for i := 0; ; i++ {
		c.remember("written", "0", fmt.Sprintf("b-%d", i))
		pair, _, err := c.client.KV().Get(p.buckets[0].Key, nil)
		if err != nil {
			t.Fatal(err)
		}
		if pair.ModifyIndex != p.buckets[0].ModifyIndex {
			break
		}
	}
	left := len(c.keys("protoshard/cli-test/sharding/written/"))
	deleted, err := source.apply(ctx, p.transactions())
	if err == nil || deleted != 0 || !strings.Contains(err.Error(), "protoshard/"+testService+"/sharding/written/entities/0/") {
		t.Fatalf("deleted %d, err %v", deleted, err)
	}
	if n := len(c.keys("protoshard/cli-test/sharding/written/")); n != left {
		t.Fatalf("%d keys left, want %d (the transaction rolled back)", n, left)
	}
}
