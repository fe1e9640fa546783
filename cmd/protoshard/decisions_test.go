package main

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/actorsharding/consulstore"
	"github.com/protoshard/protoshard/internal/coordinator"
	"github.com/protoshard/protoshard/membership"
)

func member(id, addr string, age uint64, health string, status membership.Status) memberInfo {
	return memberInfo{Member: membership.Member{ID: id, Address: addr, Age: age, Status: status}, Health: health, Service: "svc"}
}

// typeT is the entity type of the tests' states, as the messages name it.
var typeT = target{cluster: "app"}.entityType("T")

// testState is a stored state: region r1 on m-1 with shards 0, 1, 10;
// region r2 on m-2 with shard 2; a proxy on m-3; shard 5 unallocated.
func testState(t *testing.T) storedState {
	t.Helper()
	s := coordinator.NewState(true)
	r1 := actor.NewPID("10.0.0.1:8000", "sharding/T")
	r2 := actor.NewPID("10.0.0.2:8000", "sharding/T")
	r3 := actor.NewPID("10.0.0.4:8000", "sharding/T")
	events := []coordinator.Event{
		coordinator.ShardRegionRegistered{Region: r1, MemberID: "m-1"},
		coordinator.ShardRegionRegistered{Region: r2, MemberID: "m-2"},
		coordinator.ShardRegionRegistered{Region: r3, MemberID: "m-4"},
		coordinator.ShardRegionProxyRegistered{Proxy: actor.NewPID("10.0.0.3:8000", "sharding/T-proxy"), MemberID: "m-3"},
		coordinator.ShardHomeAllocated{Shard: "10", Region: r1},
		coordinator.ShardHomeAllocated{Shard: "0", Region: r1},
		coordinator.ShardHomeAllocated{Shard: "1", Region: r1},
		coordinator.ShardHomeAllocated{Shard: "2", Region: r2},
		coordinator.ShardHomeAllocated{Shard: "5", Region: r3},
		coordinator.ShardRegionTerminated{Region: r3},
	}
	for _, e := range events {
		if err := s.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	return storedState{Key: consulstore.StateKey("app", "T"), Stored: true, ModifyIndex: 42, State: s}
}

func TestMemberStatusAndLiveness(t *testing.T) {
	for _, tc := range []struct {
		health string
		status membership.Status
		text   string
		live   bool
	}{
		{api.HealthPassing, membership.Up, "passing", true},
		{api.HealthPassing, membership.Leaving, "leaving", true},
		{api.HealthCritical, membership.Up, "critical", false},
		{api.HealthCritical, membership.Leaving, "critical", false},
		{api.HealthWarning, membership.Up, "warning", true},
		{api.HealthMaint, membership.Up, "maintenance", true},
	} {
		m := member("m", "a:1", 1, tc.health, tc.status)
		if got := m.StatusText(); got != tc.text {
			t.Errorf("%s/%v: status %q, want %q", tc.health, tc.status, got, tc.text)
		}
		if got := m.Live(); got != tc.live {
			t.Errorf("%s/%v: live %v, want %v", tc.health, tc.status, got, tc.live)
		}
	}
}

func TestRemovalRefusal(t *testing.T) {
	st := testState(t)
	undecodable := storedState{Key: st.Key, Stored: true, ModifyIndex: 7, Err: errors.New("bad bytes")}
	noRegions := storedState{Key: st.Key, Stored: true, ModifyIndex: 3, State: coordinator.NewState(false)}
	byAddress := testState(t)
	r := byAddress.State.Regions["10.0.0.1:8000/sharding/T"]
	r.MemberID = ""
	byAddress.State.Regions["10.0.0.1:8000/sharding/T"] = r

	for _, tc := range []struct {
		name    string
		st      storedState
		members []memberInfo
		want    error    // nil: removal allowed
		names   []string // what the refusal must mention
	}{
		{name: "nothing stored", st: storedState{Key: st.Key}, members: []memberInfo{member("m-1", "10.0.0.1:8000", 1, "passing", membership.Up)}},
		{name: "state without regions", st: noRegions, members: []memberInfo{member("m-1", "10.0.0.1:8000", 1, "passing", membership.Up)}},
		{name: "no members", st: st},
		{name: "other members only", st: st, members: []memberInfo{member("m-9", "10.0.0.9:8000", 1, "passing", membership.Up)}},
		{name: "members critical", st: st, members: []memberInfo{
			member("m-1", "10.0.0.1:8000", 1, "critical", membership.Up),
			member("m-3", "10.0.0.3:8000", 3, "critical", membership.Leaving),
		}},
		{
			name: "region on a passing member", st: st, want: errLiveRegions,
			members: []memberInfo{member("m-2", "10.0.0.2:8000", 2, "passing", membership.Up)},
			names:   []string{`refusing to remove the data of entity type "T" of cluster "app"`, "region 10.0.0.2:8000/sharding/T on member m-2 of service svc (passing)"},
		},
		{
			name: "proxy on a leaving member", st: st, want: errLiveRegions,
			members: []memberInfo{member("m-3", "10.0.0.3:8000", 3, "passing", membership.Leaving)},
			names:   []string{"proxy 10.0.0.3:8000/sharding/T-proxy on member m-3 of service svc (leaving)"},
		},
		{
			name: "several", st: st, want: errLiveRegions,
			members: []memberInfo{
				member("m-1", "10.0.0.1:8000", 1, "passing", membership.Up),
				member("m-2", "10.0.0.2:8000", 2, "critical", membership.Up),
				member("m-3", "10.0.0.3:8000", 3, "passing", membership.Up),
			},
			names: []string{"region 10.0.0.1:8000/sharding/T on member m-1", "proxy 10.0.0.3:8000/sharding/T-proxy on member m-3"},
		},
		{
			name: "a new incarnation at a region's address counts", st: st, want: errLiveRegions,
			members: []memberInfo{member("m-1b", "10.0.0.1:8000", 9, "passing", membership.Up)},
			names:   []string{"region 10.0.0.1:8000/sharding/T on member m-1 (absent; at its address: member m-1b of service svc, passing)"},
		},
		{
			name: "a new incarnation at the address of a critical member counts", st: st, want: errLiveRegions,
			members: []memberInfo{
				member("m-1", "10.0.0.1:8000", 1, "critical", membership.Up),
				member("m-1b", "10.0.0.1:8000", 9, "passing", membership.Up),
			},
			names: []string{"region 10.0.0.1:8000/sharding/T on member m-1 of service svc (critical; at its address: member m-1b of service svc, passing)"},
		},
		{
			name: "a critical member at a region's address does not count", st: st,
			members: []memberInfo{member("m-1b", "10.0.0.1:8000", 9, "critical", membership.Up)},
		},
		{
			name: "a record without member ID is matched by address", st: byAddress, want: errLiveRegions,
			members: []memberInfo{member("m-1b", "10.0.0.1:8000", 9, "passing", membership.Up)},
			names:   []string{"region 10.0.0.1:8000/sharding/T on member - of service svc (passing)"},
		},
		{name: "undecodable state", st: undecodable, want: errStateUndecodable, names: []string{"bad bytes", st.Key}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := removalRefusal(typeT, tc.st, tc.members)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			for _, n := range tc.names {
				if !strings.Contains(err.Error(), n) {
					t.Errorf("refusal %q does not mention %q", err, n)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("refusal spans lines: %q", err)
			}
		})
	}
	// m-2 is critical in "several": only the live ones are named.
	err := removalRefusal(typeT, st, []memberInfo{
		member("m-1", "10.0.0.1:8000", 1, "passing", membership.Up),
		member("m-2", "10.0.0.2:8000", 2, "critical", membership.Up),
	})
	if err == nil || strings.Contains(err.Error(), "m-2") {
		t.Fatalf("refusal names a critical member: %v", err)
	}
}

func bucketKeys(n int) []versionedKey {
	out := make([]versionedKey, n)
	for i := range out {
		out[i] = versionedKey{Key: fmt.Sprintf("protoshard/app/sharding/T/entities/%d/0", i), ModifyIndex: uint64(100 + i)}
	}
	return out
}

func TestRemovalPlanTransactions(t *testing.T) {
	stateKey := consulstore.StateKey("app", "T")
	for _, tc := range []struct {
		name        string
		stateStored bool
		buckets     int
		txns        int
	}{
		{"state only", true, 0, 1},
		{"nothing stored", false, 0, 1},
		{"buckets without state", false, 5, 1},
		{"fills one transaction", true, maxTxnOps - 1, 1},
		{"one over", true, maxTxnOps, 2},
		{"many", true, 3*(maxTxnOps-1) + 1, 4},
		{"many without state", false, 2 * (maxTxnOps - 1), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := removalPlan{state: versionedKey{Key: stateKey}, stateStored: tc.stateStored, buckets: bucketKeys(tc.buckets)}
			if tc.stateStored {
				p.state.ModifyIndex = 42
			}
			txns := p.transactions()
			if len(txns) != tc.txns {
				t.Fatalf("%d transactions, want %d", len(txns), tc.txns)
			}
			var deleted []versionedKey
			for i, txn := range txns {
				if len(txn) > maxTxnOps {
					t.Fatalf("transaction %d has %d operations", i, len(txn))
				}
				guard := txn[0].KV
				if guard.Key != stateKey {
					t.Fatalf("transaction %d begins with %s, not the state key", i, guard.Key)
				}
				switch {
				case i == 0 && tc.stateStored:
					if guard.Verb != api.KVDeleteCAS || guard.Index != 42 {
						t.Fatalf("first guard %s at %d, want a delete-cas at 42", guard.Verb, guard.Index)
					}
					deleted = append(deleted, versionedKey{guard.Key, guard.Index})
				default:
					if guard.Verb != api.KVCheckNotExists {
						t.Fatalf("transaction %d guard is %s, want check-not-exists", i, guard.Verb)
					}
				}
				for _, op := range txn[1:] {
					if op.KV.Verb != api.KVDeleteCAS {
						t.Fatalf("transaction %d: %s on %s", i, op.KV.Verb, op.KV.Key)
					}
					deleted = append(deleted, versionedKey{op.KV.Key, op.KV.Index})
				}
			}
			if !slices.Equal(deleted, p.keys()) {
				t.Fatalf("deleted %v, want %v", deleted, p.keys())
			}
		})
	}
}

func TestBuildShardView(t *testing.T) {
	st := testState(t)
	buckets := []consulstore.RememberedBucket{
		{Key: "k/0/3", ShardID: "0", EntityIDs: []string{"b", "c"}},
		{Key: "k/0/9", ShardID: "0", EntityIDs: []string{"a", "c"}}, // c twice: after a change of buckets
		{Key: "k/5/1", ShardID: "5", EntityIDs: []string{"e"}},
		{Key: "k/x/1", ShardID: "x", EntityIDs: []string{"f"}},
		{Key: "k/x/2", ShardID: "x", Err: errors.New("corrupt value")},
	}
	ms := []memberInfo{
		member("m-1", "10.0.0.1:8000", 1, "passing", membership.Up),
		member("m-3", "10.0.0.3:8000", 3, "critical", membership.Up),
	}
	v := buildShardView("app", "T", st, buckets, ms)

	wantRegions := []regionView{
		{Region: "10.0.0.1:8000/sharding/T", Member: "m-1", MemberStatus: "passing", Service: "svc", Live: true, Shards: 3},
		{Region: "10.0.0.2:8000/sharding/T", Member: "m-2", MemberStatus: "absent", Shards: 1},
	}
	if !slices.Equal(v.Regions, wantRegions) {
		t.Fatalf("regions %+v, want %+v", v.Regions, wantRegions)
	}
	wantProxies := []regionView{{Region: "10.0.0.3:8000/sharding/T-proxy", Member: "m-3", MemberStatus: "critical", Service: "svc"}}
	if !slices.Equal(v.Proxies, wantProxies) {
		t.Fatalf("proxies %+v, want %+v", v.Proxies, wantProxies)
	}
	type row struct {
		shard, state, region, member, entities string
		corrupt                                int
	}
	var got []row
	for _, s := range v.Shards {
		got = append(got, row{s.Shard, s.State, s.Region, s.Member, strings.Join(s.Entities, ","), s.Corrupt})
	}
	want := []row{
		{"0", shardAllocated, "10.0.0.1:8000/sharding/T", "m-1", "a,b,c", 0},
		{"1", shardAllocated, "10.0.0.1:8000/sharding/T", "m-1", "", 0},
		{"2", shardAllocated, "10.0.0.2:8000/sharding/T", "m-2", "", 0},
		{"5", shardUnallocated, "", "", "e", 0},
		{"10", shardAllocated, "10.0.0.1:8000/sharding/T", "m-1", "", 0},
		{"x", shardNotInState, "", "", "f", 1},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("shards\n%+v\nwant\n%+v", got, want)
	}
	if !v.StateStored || !v.RememberEntities || v.ModifyIndex != 42 || v.StateError != "" {
		t.Fatalf("heading fields %+v", v)
	}
	if len(v.Problems) != 1 || !strings.Contains(v.Problems[0], "corrupt value") {
		t.Fatalf("problems %q", v.Problems)
	}

	bad := buildShardView("app", "T", storedState{Key: st.Key, Stored: true, ModifyIndex: 7, Err: errors.New("bad bytes")}, nil, ms)
	if bad.StateError != "bad bytes" || len(bad.Regions) != 0 || len(bad.Shards) != 0 {
		t.Fatalf("undecodable state: %+v", bad)
	}
}

func TestCompareShardIDs(t *testing.T) {
	ids := []string{"b", "10", "2", "a", "01", "1", "-1"}
	slices.SortFunc(ids, compareShardIDs)
	want := []string{"01", "1", "2", "10", "-1", "a", "b"}
	if !slices.Equal(ids, want) {
		t.Fatalf("sorted %v, want %v", ids, want)
	}
	if compareShardIDs("01", "1") == 0 {
		t.Fatal("distinct IDs with one number compare equal")
	}
}

func TestWriteShards(t *testing.T) {
	st := testState(t)
	buckets := []consulstore.RememberedBucket{
		{Key: "k/0/3", ShardID: "0", EntityIDs: []string{"a", "b"}},
		{Key: "k/x/2", ShardID: "x", Err: errors.New("key k/x/2 (modify index 9): corrupt\nvalue")},
	}
	ms := []memberInfo{member("m-1", "10.0.0.1:8000", 1, "passing", membership.Up)}
	var b bytes.Buffer
	if err := writeShards(&b, buildShardView("app", "T", st, buckets, ms)); err != nil {
		t.Fatal(err)
	}
	want := `entity type "T" of cluster "app": coordinator state protoshard/app/sharding/T/coordinator-state (modify index 42), remember-entities on

REGION                          KIND    MEMBER  SERVICE  STATUS   SHARDS
10.0.0.1:8000/sharding/T        region  m-1     svc      passing  3
10.0.0.2:8000/sharding/T        region  m-2     -        absent   1
10.0.0.3:8000/sharding/T-proxy  proxy   m-3     -        absent   -

SHARD  STATE         REGION                    MEMBER  REMEMBERED
0      allocated     10.0.0.1:8000/sharding/T  m-1     2
1      allocated     10.0.0.1:8000/sharding/T  m-1     0
2      allocated     10.0.0.2:8000/sharding/T  m-2     0
5      unallocated   -                         -       0
10     allocated     10.0.0.1:8000/sharding/T  m-1     0
x      not-in-state  -                         -       0 (+1 corrupt)

problems:
  key k/x/2 (modify index 9): corrupt value
`
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}

	for _, tc := range []struct {
		name string
		v    shardView
		want string
	}{
		{"nothing", shardView{Cluster: "app", Type: "T", StateKey: "k"}, "entity type \"T\" of cluster \"app\": no coordinator state (k) and no remembered entities\n"},
		{"entities only", shardView{Cluster: "app", Type: "T", StateKey: "k", Shards: []shardRow{{Shard: "3", State: shardNotInState, Entities: []string{"a"}}}},
			"entity type \"T\" of cluster \"app\": no coordinator state (k)\n\nSHARD  STATE         REGION  MEMBER  REMEMBERED\n3      not-in-state  -       -       1\n"},
		{"undecodable", shardView{Cluster: "app", Type: "T", StateKey: "k", StateStored: true, ModifyIndex: 5, StateError: "bad\nbytes"},
			"entity type \"T\" of cluster \"app\": coordinator state k (modify index 5) does not decode: bad bytes\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeShards(&b, tc.v); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Fatalf("got\n%q\nwant\n%q", b.String(), tc.want)
			}
		})
	}
}

func TestWriteMembers(t *testing.T) {
	ms := sortMembers([]memberInfo{
		member("m-2", "10.0.0.2:8000", 20, "critical", membership.Up),
		member("m-1", "10.0.0.1:8000", 7, "passing", membership.Leaving),
		member("m-3", "10.0.0.3:8000", 31, "passing", membership.Up),
	})
	ms[2].Roles = []string{"node", "web"}
	var b bytes.Buffer
	if err := writeMembers(&b, "svc", ms); err != nil {
		t.Fatal(err)
	}
	want := `AGE  MEMBER  ADDRESS        STATUS    ROLES
7    m-1     10.0.0.1:8000  leaving   -
20   m-2     10.0.0.2:8000  critical  -
31   m-3     10.0.0.3:8000  passing   node,web
`
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	if err := writeMembers(&b, "svc", nil); err != nil {
		t.Fatal(err)
	}
	if b.String() != "no members registered as service \"svc\"\n" {
		t.Fatalf("empty: %q", b.String())
	}
}
