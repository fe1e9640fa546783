package consul_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/internal/consulagent"
	"github.com/protoshard/protoshard/lease"
	"github.com/protoshard/protoshard/lease/consul"
	"github.com/protoshard/protoshard/lease/internal/leasetesting"
	"github.com/protoshard/protoshard/lease/leasetest"
)

// Test timings: Consul's minimum TTL, a lock delay that still covers a
// heartbeat (1s + 2s), and the default margin (2s), so the holder declares a
// loss 8s after its last successful renewal. Waits have generous deadlines:
// this machine is shared and slow at times.
const (
	testTTL      = 10 * time.Second
	testLockWait = 5 * time.Second
	waitDeadline = 60 * time.Second
)

// testCluster is the cluster of the test leases.
const testCluster = "lease-test"

// testOptions are the test leases' options but their logger.
func testOptions(client *api.Client) []consul.Option {
	return []consul.Option{consul.WithClient(client), consul.WithHeartbeatTimeout(testTTL), consul.WithHeartbeatInterval(time.Second),
		consul.WithOperationTimeout(2 * time.Second), consul.WithLockDelay(testLockWait)}
}

// testLogger is silent unless PROTOSHARD_TEST_LOG is set, as in the test
// kit: the leases log from their own goroutines, also after a test ended.
func testLogger() *slog.Logger {
	if v := os.Getenv("PROTOSHARD_TEST_LOG"); v != "" && v != "0" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func newProvider(t *testing.T, client *api.Client) *consul.Provider {
	t.Helper()
	p, err := consul.NewProvider(testCluster, append(testOptions(client), consul.WithLogger(testLogger()))...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newLease(t *testing.T, p *consul.Provider, name, owner string) lease.Lease {
	t.Helper()
	return leasetesting.Holder(t, p, name, owner)
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	t.Cleanup(cancel)
	return ctx
}

// destroySession destroys, from outside, the session that holds the key.
func destroySession(t *testing.T, client *api.Client, key string) {
	t.Helper()
	pair, _, err := client.KV().Get(key, &api.QueryOptions{RequireConsistent: true})
	if err != nil || pair == nil || pair.Session == "" {
		t.Fatalf("reading the lock %s: %v, %+v", key, err, pair)
	}
	if _, err := client.Session().Destroy(pair.Session, nil); err != nil {
		t.Fatalf("destroying session %s: %v", pair.Session, err)
	}
}

// lostRecorder is a lease-lost callback that remembers when it ran.
type lostRecorder struct {
	ch chan time.Time
}

func newLostRecorder() *lostRecorder { return &lostRecorder{ch: make(chan time.Time, 4)} }

func (r *lostRecorder) callback(t *testing.T) lease.LostFunc {
	return func(reason error) {
		if !errors.Is(reason, lease.ErrLost) {
			t.Errorf("lost reason %v does not wrap lease.ErrLost", reason)
		}
		t.Logf("lease lost: %v", reason)
		r.ch <- time.Now()
	}
}

func (r *lostRecorder) wait(t *testing.T) time.Time {
	t.Helper()
	select {
	case at := <-r.ch:
		return at
	case <-time.After(waitDeadline):
		t.Fatalf("the lease-lost callback did not run within %v", waitDeadline)
		return time.Time{}
	}
}

func acquire(t *testing.T, l lease.Lease, cb lease.LostFunc) uint64 {
	t.Helper()
	token, ok, err := l.Acquire(ctxFor(t), cb)
	if err != nil || !ok {
		t.Fatalf("Acquire = (%d, %v, %v), want acquired", token, ok, err)
	}
	return token
}

func acquireEventually(t *testing.T, l lease.Lease) (uint64, time.Time) {
	t.Helper()
	return leasetesting.AcquireEventually(t, l, waitDeadline)
}

func TestConsulLeaseContract(t *testing.T) {
	agent := consulagent.Start(t)
	p := newProvider(t, agent.Client())
	leasetest.Run(t, leasetest.Harness{
		NewLease: func(t *testing.T, name, owner string) lease.Lease { return newLease(t, p, name, owner) },
		Lose: func(t *testing.T, _ string, holder lease.Lease) {
			destroySession(t, agent.Client(), consul.LeaseKey(holder))
		},
		Deadline: waitDeadline,
	})
}

// The fencing token is the lock's ModifyIndex; the key names the owner while
// held and is gone after a release.
func TestConsulLeaseTokenIsTheLockIndex(t *testing.T) {
	agent := consulagent.Start(t)
	client := agent.Client()
	a := newLease(t, newProvider(t, client), "token", "owner-a")
	if consul.LeaseKey(a) != "protoshard/lease-test/lease/token" {
		t.Fatalf("Key = %q", consul.LeaseKey(a))
	}
	token := acquire(t, a, nil)
	pair, _, err := client.KV().Get(consul.LeaseKey(a), &api.QueryOptions{RequireConsistent: true})
	if err != nil || pair == nil {
		t.Fatalf("reading the lock: %v, %v", err, pair)
	}
	if pair.ModifyIndex != token || pair.Session == "" || string(pair.Value) != "owner-a" {
		t.Fatalf("lock %+v, want ModifyIndex %d, a session and the owner's name", pair, token)
	}
	if ok, err := a.Release(ctxFor(t)); !ok || err != nil {
		t.Fatalf("Release = (%v, %v)", ok, err)
	}
	pair, _, err = client.KV().Get(consul.LeaseKey(a), &api.QueryOptions{RequireConsistent: true})
	if err != nil || pair != nil {
		t.Fatalf("after Release the key is %+v (err %v), want it deleted", pair, err)
	}
	sessions, _, err := client.Session().List(nil)
	if err != nil || len(sessions) != 0 {
		t.Fatalf("sessions after Release: %v (err %v), want none", sessions, err)
	}
}

// A session destroyed from outside: the holder notices at its next
// heartbeat, well before the lock delay lets another holder in.
func TestConsulLeaseLostWhenSessionDestroyed(t *testing.T) {
	agent := consulagent.Start(t)
	p := newProvider(t, agent.Client())
	a, b := newLease(t, p, "destroyed", "a"), newLease(t, p, "destroyed", "b")
	lost := newLostRecorder()
	ta := acquire(t, a, lost.callback(t))
	destroyedAt := time.Now()
	destroySession(t, agent.Client(), consul.LeaseKey(a))
	lostAt := lost.wait(t)
	tb, acquiredAt := acquireEventually(t, b)
	t.Logf("session destroyed: holder reported the loss after %v, another acquired after %v (lock delay %v)",
		lostAt.Sub(destroyedAt).Round(time.Millisecond), acquiredAt.Sub(destroyedAt).Round(time.Millisecond), testLockWait)
	if a.CheckLease() {
		t.Fatal("CheckLease is true after the loss")
	}
	if !lostAt.Before(acquiredAt) {
		t.Fatalf("another holder acquired at %v, before the holder reported the loss at %v", acquiredAt, lostAt)
	}
	if tb <= ta {
		t.Fatalf("token %d of the next holder is not above %d", tb, ta)
	}
}

// Consul killed: the holder reports the loss within the heartbeat timeout
// minus the margin of its last renewal, so before its session could have
// expired. A dev agent comes back empty: then another holder acquires at
// once (with a token from Consul's new, smaller index: see the package
// documentation).
func TestConsulLeaseLostWhenAgentStops(t *testing.T) {
	agent := consulagent.Start(t)
	p := newProvider(t, agent.Client())
	a, b := newLease(t, p, "agent-stops", "a"), newLease(t, p, "agent-stops", "b")
	lost := newLostRecorder()
	acquire(t, a, lost.callback(t))
	time.Sleep(1500 * time.Millisecond) // a renewal or so

	killedAt := time.Now()
	agent.Kill()
	lostAt := lost.wait(t)
	elapsed := lostAt.Sub(killedAt)
	t.Logf("Consul killed: the holder reported the loss after %v (declared %v after its last successful renewal; TTL %v)",
		elapsed.Round(time.Millisecond), testTTL-testTTL/5, testTTL)
	if elapsed >= testTTL {
		t.Fatalf("the loss was reported %v after Consul stopped, not within the TTL %v", elapsed, testTTL)
	}
	if a.CheckLease() {
		t.Fatal("CheckLease is true after the loss")
	}

	restartAt := time.Now()
	agent.Restart(t)
	_, acquiredAt := acquireEventually(t, b)
	t.Logf("Consul restarted empty: another holder acquired %v after the restart began (%v after the kill)",
		acquiredAt.Sub(restartAt).Round(time.Millisecond), acquiredAt.Sub(killedAt).Round(time.Millisecond))
	if ok, err := a.Release(ctxFor(t)); ok || err != nil {
		t.Fatalf("Release after the loss = (%v, %v), want (false, nil)", ok, err)
	}
}

// partitionProxy stands between one holder and Consul; cut makes every
// request hang, as a network partition does (no refusal, no answer).
type partitionProxy struct {
	srv  *httptest.Server
	cut  atomic.Bool
	stop chan struct{}
}

func newPartitionProxy(t *testing.T, target string) *partitionProxy {
	p := &partitionProxy{stop: make(chan struct{})}
	forward := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: target})
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.cut.Load() {
			select {
			case <-r.Context().Done():
			case <-p.stop:
			}
			http.Error(w, "partitioned", http.StatusServiceUnavailable)
			return
		}
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		close(p.stop)
		p.srv.Close()
	})
	return p
}

func (p *partitionProxy) client(t *testing.T) *api.Client {
	cfg := api.DefaultConfig()
	cfg.Address = p.srv.Listener.Addr().String()
	cfg.Scheme = "http"
	cfg.Token = ""
	c, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A holder cut off from Consul reports the loss before another holder can
// acquire the lease, and the new holder's token is larger.
func TestConsulLeasePartitionedHolderReportsLossFirst(t *testing.T) {
	agent := consulagent.Start(t)
	proxy := newPartitionProxy(t, agent.Addr())
	a := newLease(t, newProvider(t, proxy.client(t)), "partition", "a")
	b := newLease(t, newProvider(t, agent.Client()), "partition", "b")
	lost := newLostRecorder()
	ta := acquire(t, a, lost.callback(t))
	if _, ok, err := b.Acquire(ctxFor(t), nil); ok || err != nil {
		t.Fatalf("b acquired a held lease (or failed: %v)", err)
	}

	cutAt := time.Now()
	proxy.cut.Store(true)
	tb, acquiredAt := acquireEventually(t, b)
	var lostAt time.Time
	select {
	case lostAt = <-lost.ch:
	default:
		t.Fatalf("b acquired %v after the partition, and the cut-off holder has not reported the loss",
			acquiredAt.Sub(cutAt))
	}
	t.Logf("partition: the cut-off holder reported the loss after %v; the other acquired after %v (%v later)",
		lostAt.Sub(cutAt).Round(time.Millisecond), acquiredAt.Sub(cutAt).Round(time.Millisecond),
		acquiredAt.Sub(lostAt).Round(time.Millisecond))
	if !lostAt.Before(acquiredAt) {
		t.Fatalf("the loss was reported at %v, not before the other acquired at %v", lostAt, acquiredAt)
	}
	if lostAt.Sub(cutAt) >= testTTL {
		t.Fatalf("the loss was reported %v after the partition, not within the TTL %v", lostAt.Sub(cutAt), testTTL)
	}
	if tb <= ta {
		t.Fatalf("token %d of the new holder is not above the old %d", tb, ta)
	}
}

// A key written by a compare-and-set lease (lease/consulcas) of a node
// that uses the other kind: never locked over, an error instead.
func TestConsulLeaseRefusesAForeignKey(t *testing.T) {
	agent := consulagent.Start(t)
	client := agent.Client()
	a := newLease(t, newProvider(t, client), "foreign", "a")
	if _, err := client.KV().Put(&api.KVPair{Key: consul.LeaseKey(a), Value: []byte(`{"holder":"b#1","owner":"b","token":3}`)}, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.Acquire(ctxFor(t), nil); ok || !errors.Is(err, consul.ErrForeignKey) {
		t.Fatalf("Acquire = %v, %v; want ErrForeignKey", ok, err)
	}
	if sessions, _, err := client.Session().List(nil); err != nil || len(sessions) != 0 {
		t.Fatalf("sessions left: %v (err %v)", sessions, err)
	}
}
