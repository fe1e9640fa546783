package consulcas_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/internal/consulagent"
	"github.com/protoshard/protoshard/lease"
	"github.com/protoshard/protoshard/lease/caslease"
	"github.com/protoshard/protoshard/lease/consulcas"
	"github.com/protoshard/protoshard/lease/internal/leasetesting"
	"github.com/protoshard/protoshard/lease/leasetest"
)

// Test timings: the holder gives up 1.48 s after its last renewal started,
// a contender takes over after seeing a record unchanged for 2.52 s.
const waitDeadline = 60 * time.Second

const testRenewInterval = 300 * time.Millisecond

// testLeaseOptions are the test timings and a silent logger.
var testLeaseOptions = []caslease.Option{
	caslease.WithDuration(2 * time.Second),
	caslease.WithRenewInterval(testRenewInterval),
	caslease.WithSafetyMargin(500 * time.Millisecond),
	caslease.WithOperationTimeout(time.Second),
	caslease.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
}

func newProvider(t *testing.T, client *api.Client) *caslease.Provider {
	t.Helper()
	p, err := consulcas.NewProvider("lease-test", consulcas.WithClient(client), consulcas.WithLeaseOptions(testLeaseOptions...))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newLease(t *testing.T, p *caslease.Provider, name, owner string) lease.Lease {
	t.Helper()
	return leasetesting.Holder(t, p, name, owner)
}

// keyPrefix is where the test cluster's records live.
const keyPrefix = "protoshard/lease-test/lease/"

// record is the record as the compare-and-set lease writes it.
type record struct {
	Holder   string `json:"holder"`
	Owner    string `json:"owner"`
	Token    uint64 `json:"token"`
	Renewals uint64 `json:"renewals"`
}

func readRecord(t *testing.T, client *api.Client, key string) (record, *api.KVPair) {
	t.Helper()
	pair, _, err := client.KV().Get(key, &api.QueryOptions{RequireConsistent: true})
	if err != nil || pair == nil {
		t.Fatalf("reading %s: %v, %v", key, err, pair)
	}
	var r record
	if err := json.Unmarshal(pair.Value, &r); err != nil {
		t.Fatalf("record %q: %v", pair.Value, err)
	}
	return r, pair
}

func TestConsulCASLeaseContract(t *testing.T) {
	agent := consulagent.Start(t)
	client := agent.Client()
	p := newProvider(t, client)
	leasetest.Run(t, leasetest.Harness{
		NewLease: func(t *testing.T, name, owner string) lease.Lease { return newLease(t, p, name, owner) },
		// Another holder's record written over the holder's: it must
		// notice at its next renewal.
		Lose: func(t *testing.T, name string, _ lease.Lease) {
			key := keyPrefix + name
			_, pair := readRecord(t, client, key)
			ok, _, err := client.KV().CAS(&api.KVPair{Key: key, ModifyIndex: pair.ModifyIndex,
				Value: []byte(`{"holder":"intruder#0","owner":"intruder","token":1}`)}, nil)
			if !ok || err != nil {
				t.Fatalf("overwriting %s: %v, %v", key, ok, err)
			}
		},
		Deadline: waitDeadline,
	})
}

// The record lives at the cluster's lease key, names its holder, counts
// renewals (each a new ModifyIndex) and keeps the token through a release,
// so the next holder's is larger.
func TestConsulCASLeaseRecord(t *testing.T) {
	agent := consulagent.Start(t)
	client := agent.Client()
	p := newProvider(t, client)
	a, b := newLease(t, p, "record", "owner-a"), newLease(t, p, "record", "owner-b")
	ta, ok, err := a.Acquire(context.Background(), nil)
	if !ok || err != nil {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	r1, p1 := readRecord(t, client, keyPrefix+"record")
	if r1.Owner != "owner-a" || r1.Token != ta || r1.Holder == "" || p1.Session != "" {
		t.Fatalf("record %+v (session %q), want owner-a's with token %d and no session", r1, p1.Session, ta)
	}
	time.Sleep(time.Second)
	r2, p2 := readRecord(t, client, keyPrefix+"record")
	if r2.Renewals == 0 || p2.ModifyIndex <= p1.ModifyIndex || r2.Token != ta || r2.Holder != r1.Holder {
		t.Fatalf("after a second: %+v at index %d, want renewals of the same holding past index %d", r2, p2.ModifyIndex, p1.ModifyIndex)
	}
	if ok, err := a.Release(context.Background()); !ok || err != nil {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	r3, p3 := readRecord(t, client, keyPrefix+"record")
	if r3.Holder != "" || r3.Token != ta {
		t.Fatalf("after Release: %+v, want a free record keeping token %d", r3, ta)
	}
	tb, ok, err := b.Acquire(context.Background(), nil)
	if !ok || err != nil || tb <= ta || tb <= p3.ModifyIndex {
		t.Fatalf("next Acquire = %d, %v, %v; want at once, with a token above %d and the index %d", tb, ok, err, ta, p3.ModifyIndex)
	}
}

// A key locked by a session (a node on lease/consul) is an error, never a
// free lease.
func TestConsulCASLeaseRefusesASessionLock(t *testing.T) {
	agent := consulagent.Start(t)
	client := agent.Client()
	a := newLease(t, newProvider(t, client), "session", "a")
	session, _, err := client.Session().CreateNoChecks(&api.SessionEntry{TTL: "30s", Behavior: api.SessionBehaviorDelete}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, err := client.KV().Acquire(&api.KVPair{Key: keyPrefix + "session", Value: []byte("owner-x"), Session: session}, nil); !ok || err != nil {
		t.Fatalf("locking: %v, %v", ok, err)
	}
	if _, ok, err := a.Acquire(context.Background(), nil); ok || !errors.Is(err, consulcas.ErrSessionLocked) {
		t.Fatalf("Acquire = %v, %v; want ErrSessionLocked", ok, err)
	}
}

// deadStore fails every request once its node is dead, as a killed
// process's lease would stop renewing.
type deadStore struct {
	caslease.Store
	dead atomic.Bool
}

var errDead = errors.New("node killed")

func (s *deadStore) Get(ctx context.Context, key string) ([]byte, uint64, bool, error) {
	if s.dead.Load() {
		return nil, 0, false, errDead
	}
	return s.Store.Get(ctx, key)
}

func (s *deadStore) CAS(ctx context.Context, key string, value []byte, version uint64) (uint64, bool, error) {
	if s.dead.Load() {
		return 0, false, errDead
	}
	return s.Store.CAS(ctx, key, value, version)
}

// A holder that stops renewing is taken over about WaitFor after its last
// renewal, by a contender polling all along; it stopped (lost callback)
// before.
func TestConsulCASLeaseTakeoverAfterHolderDies(t *testing.T) {
	agent := consulagent.Start(t)
	client := agent.Client()
	dying := &deadStore{Store: consulcas.NewStore(client)}
	pa, err := caslease.NewProvider(dying, append([]caslease.Option{caslease.WithKeyPrefix(keyPrefix)}, testLeaseOptions...)...)
	if err != nil {
		t.Fatal(err)
	}
	// How long a contender waits on an unchanged record under
	// testLeaseOptions: duration × (1 + the default drift 1%) + margin.
	waitFor := time.Duration(float64(2*time.Second)*1.01) + 500*time.Millisecond
	a, b := newLease(t, pa, "dies", "a"), newLease(t, newProvider(t, client), "dies", "b")
	lost := leasetesting.NewLostRecorder()
	ta, ok, err := a.Acquire(context.Background(), lost.Callback)
	if !ok || err != nil {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	time.Sleep(time.Second)
	killedAt := time.Now()
	dying.dead.Store(true)
	tb, acquiredAt := leasetesting.AcquireEventually(t, b, waitDeadline)
	lostAt, _ := lost.Last()
	if lost.Calls() == 0 || !lostAt.Before(acquiredAt) {
		t.Fatal("taken over before the holder reported the loss")
	}
	took := acquiredAt.Sub(killedAt)
	t.Logf("holder killed: it reported the loss after %v, another took over after %v (WaitFor %v)",
		lostAt.Sub(killedAt).Round(time.Millisecond), took.Round(time.Millisecond), waitFor)
	if took < waitFor-testRenewInterval {
		t.Fatalf("taken over %v after the kill, sooner than WaitFor − RenewInterval", took)
	}
	if took > waitFor+5*time.Second {
		t.Errorf("taken over %v after the kill, more than 5 s past WaitFor %v", took, waitFor)
	}
	if tb <= ta {
		t.Fatalf("token %d not above %d", tb, ta)
	}
}
