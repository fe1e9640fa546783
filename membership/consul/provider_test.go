package consul_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-cleanhttp"

	"github.com/protoshard/protoshard/internal/consulagent"
	"github.com/protoshard/protoshard/internal/consulmember"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/consul"
)

// newProvider: client nil is the default client; extra options come last.
func newProvider(t *testing.T, client *api.Client, extra ...consul.Option) membership.Provider {
	t.Helper()
	opts := []consul.Option{consul.WithServiceName("protoshard-test"), consul.WithTTL(testTTL),
		consul.WithRetryBackoff(100 * time.Millisecond), consul.WithLogger(newTestLogger(t))}
	if client != nil {
		opts = append(opts, consul.WithClient(client))
	}
	p, err := consul.New(append(opts, extra...)...)
	if err != nil {
		t.Fatalf("consul.New: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

func register(t *testing.T, p membership.Provider, id, addr string, roles ...string) membership.Member {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	m, err := p.Register(ctx, membership.Member{ID: id, Address: addr, Roles: roles, SystemID: "system-of-" + id})
	if err != nil {
		t.Fatalf("register %s: %v", id, err)
	}
	return m
}

// snapshots records what a Watch reports.
type snapshots struct {
	mu   sync.Mutex
	seen [][]membership.Member
}

func (s *snapshots) add(ms []membership.Member) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, ms)
}

func (s *snapshots) all() [][]membership.Member {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]membership.Member(nil), s.seen...)
}

func (s *snapshots) last() []membership.Member {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) == 0 {
		return nil
	}
	return s.seen[len(s.seen)-1]
}

// watch runs p.Watch until the test ends.
func watch(t *testing.T, p membership.Provider) *snapshots {
	s := &snapshots{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Watch(ctx, s.add)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return s
}

func find(ms []membership.Member, id string) (membership.Member, bool) {
	for _, m := range ms {
		if m.ID == id {
			return m, true
		}
	}
	return membership.Member{}, false
}

// Marking a member leaving registers its service again with new meta;
// Consul must keep the registration's CreateIndex (the member's age), and
// the TTL check must keep working.
func TestSetLeavingKeepsAgeAndCheck(t *testing.T) {
	agent := consulagent.Start(t)
	older := newProvider(t, agent.Client())
	p := newProvider(t, agent.Client())
	first := register(t, older, "older", "127.0.0.1:10001")
	self := register(t, p, "leaver", "127.0.0.1:10002", "a", "b")
	if self.Age <= first.Age {
		t.Fatalf("ages: first %d, second %d", first.Age, self.Age)
	}
	if e := catalogEntry(t, agent.Client(), self.ID); e == nil || e.CreateIndex != self.Age {
		t.Fatalf("catalog entry %+v, want CreateIndex %d", e, self.Age)
	}
	snaps := watch(t, older)

	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	if err := p.SetLeaving(ctx); err != nil {
		t.Fatalf("set leaving: %v", err)
	}
	e := catalogEntry(t, agent.Client(), self.ID)
	if e == nil {
		t.Fatal("registration gone after SetLeaving")
	}
	if e.CreateIndex != self.Age {
		t.Fatalf("SetLeaving changed the CreateIndex from %d to %d", self.Age, e.CreateIndex)
	}
	if e.ServiceMeta[consulmember.MetaStatus] != consulmember.StatusLeaving {
		t.Fatalf("meta after SetLeaving: %v", e.ServiceMeta)
	}
	// The leaving marker lies under the cluster's (the service's) keys.
	if p.Name() != "protoshard-test" {
		t.Fatalf("provider name %q, want the service name", p.Name())
	}
	marker, _, err := agent.Client().KV().Get("protoshard/protoshard-test/membership/leaving/"+self.ID, nil)
	if err != nil || marker == nil || marker.Session == "" {
		t.Fatalf("leaving marker: %+v, %v", marker, err)
	}
	eventually(t, waitDeadline, "the watch to show the member Leaving with its age", func() (bool, string) {
		m, ok := find(snaps.last(), self.ID)
		return ok && m.Status == membership.Leaving && m.Age == self.Age && len(m.Roles) == 2 && m.SystemID == "system-of-leaver",
			describe(snaps.last())
	})
	// The check survived the re-registration and is still refreshed: well
	// after the TTL the member is still passing (and Leaving).
	time.Sleep(3 * testTTL)
	checks, err := agent.Client().Agent().Checks()
	if err != nil {
		t.Fatalf("checks: %v", err)
	}
	c, ok := checks["protoshard-ttl-"+self.ID]
	if !ok || c.Status != api.HealthPassing {
		t.Fatalf("TTL check after SetLeaving and 3 TTLs: %+v", c)
	}
	if m, ok := find(snaps.last(), self.ID); !ok || m.Status != membership.Leaving {
		t.Fatalf("leaving member gone from the watch: %s", describe(snaps.last()))
	}
	if m, _ := find(snaps.last(), first.ID); m.Status != membership.Up {
		t.Fatalf("the other member: %+v", m)
	}
}

// With no Consul listening, Register fails at once with a wrapped error.
func TestRegisterConsulAbsent(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there any more
	cfg := api.DefaultConfig()
	cfg.Address = addr
	client, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := newProvider(t, client)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = p.Register(ctx, membership.Member{ID: "m1", Address: "127.0.0.1:10001"})
	if err == nil {
		t.Fatal("register without Consul succeeded")
	}
	if !strings.Contains(err.Error(), "registering member m1") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("unclear error: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("register waited for the deadline instead of failing: %v", err)
	}

	// Through a Cluster the same error reaches Join.
	system := actor.NewActorSystem()
	defer system.Shutdown()
	system.ProcessRegistry.Address = "127.0.0.1:10002" // as a started remote would set it
	c := membership.NewCluster(system, p, membership.Config{})
	if err := c.Join(ctx); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("join without Consul: %v", err)
	}
}

// A Consul that accepts connections but never answers: Register gives up at
// the context's deadline.
func TestRegisterConsulHangs(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	cfg := api.DefaultConfig()
	cfg.Address = l.Addr().String()
	client, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := newProvider(t, client)

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := p.Register(ctx, membership.Member{ID: "m1", Address: "127.0.0.1:10001"})
		errc <- err
	}()
	select {
	case err := <-errc:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("want a deadline error, got %v", err)
		}
	case <-time.After(waitDeadline):
		t.Fatal("Register hangs past its context's deadline")
	}
}

// Consul loses the registration behind the provider's back: the watch
// reports the members without self (fencing), and the same Provider can
// register again as a new, younger member that the watch reports, while the
// old id never comes back.
func TestLostRegistrationFencesThenReRegister(t *testing.T) {
	agent := consulagent.Start(t)
	other := newProvider(t, agent.Client())
	o := register(t, other, "other", "127.0.0.1:10001")
	p := newProvider(t, agent.Client())
	self := register(t, p, "first-life", "127.0.0.1:10002")
	snaps := watch(t, p)
	eventually(t, waitDeadline, "the watch to show both", func() (bool, string) {
		_, a := find(snaps.last(), o.ID)
		_, b := find(snaps.last(), self.ID)
		return a && b, describe(snaps.last())
	})

	if err := agent.Client().Agent().ServiceDeregister(self.ID); err != nil {
		t.Fatalf("deregister behind the provider's back: %v", err)
	}
	eventually(t, waitDeadline, "the watch to report the others without self", func() (bool, string) {
		last := snaps.last()
		_, hasSelf := find(last, self.ID)
		_, hasOther := find(last, o.ID)
		return !hasSelf && hasOther, describe(last)
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	if err := p.SetLeaving(ctx); !errors.Is(err, consul.ErrFenced) {
		t.Fatalf("SetLeaving on a fenced registration: %v", err)
	}
	// What the Cluster does: deregister (a lost registration is no error),
	// then join again with a new id on the same Provider.
	if err := p.Deregister(ctx); err != nil {
		t.Fatalf("deregister a lost registration: %v", err)
	}
	again := register(t, p, "second-life", "127.0.0.1:10002")
	if again.Age <= o.Age {
		t.Fatalf("the new incarnation (age %d) is not younger than the other (age %d)", again.Age, o.Age)
	}
	snaps2 := watch(t, p)
	eventually(t, waitDeadline, "the new watch to show the new incarnation", func() (bool, string) {
		_, ok := find(snaps2.last(), again.ID)
		return ok, describe(snaps2.last())
	})
	// The new incarnation stays (its TTL is refreshed).
	time.Sleep(2 * testTTL)
	if _, ok := find(snaps2.last(), again.ID); !ok {
		t.Fatalf("the new incarnation vanished: %s", describe(snaps2.last()))
	}
	for _, s := range append(snaps2.all(), snaps.all()[len(snaps.all())-1]) {
		if _, ok := find(s, self.ID); ok {
			t.Fatalf("the fenced id came back: %s", describe(s))
		}
	}
}

// Instances of the service that this package did not register (no member
// meta, or weird values) are not members, and nothing panics on them.
func TestWatchIgnoresForeignInstances(t *testing.T) {
	agent := consulagent.Start(t)
	a := agent.Client().Agent()
	for _, s := range []*api.AgentServiceRegistration{
		{ID: "no-meta", Name: "protoshard-test", Address: "127.0.0.1", Port: 1},
		{ID: "wrong-id", Name: "protoshard-test", Address: "127.0.0.1", Port: 2, Meta: map[string]string{consulmember.MetaMemberID: "someone-else"}},
		{ID: "no-port", Name: "protoshard-test", Meta: map[string]string{consulmember.MetaMemberID: "no-port"}},
		{ID: "odd-meta", Name: "protoshard-test", Address: "127.0.0.1", Port: 3, Meta: map[string]string{
			consulmember.MetaMemberID: "odd-meta", consulmember.MetaRoles: ",,", consulmember.MetaStatus: "???"}},
	} {
		if err := a.ServiceRegister(s); err != nil {
			t.Fatalf("register %s: %v", s.ID, err)
		}
	}
	p := newProvider(t, agent.Client())
	self := register(t, p, "me", "127.0.0.1:10001")
	snaps := watch(t, p)
	eventually(t, waitDeadline, "the watch to show self and the odd one", func() (bool, string) {
		last := snaps.last()
		_, me := find(last, self.ID)
		_, odd := find(last, "odd-meta")
		return me && odd && len(last) == 2, describe(last)
	})
	odd, _ := find(snaps.last(), "odd-meta")
	if odd.Status != membership.Up {
		t.Fatalf("unknown status must read as Up: %+v", odd)
	}
}

func TestNewValidatesConfig(t *testing.T) {
	client, err := api.NewClient(api.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		opts []consul.Option
		want string
	}{
		"refresh not below TTL": {[]consul.Option{consul.WithTTL(2 * time.Second), consul.WithRefreshInterval(2 * time.Second)}, "must be below the TTL"},
		"TTL below 1s":          {[]consul.Option{consul.WithTTL(500 * time.Millisecond)}, "below 1s"},
		"zero TTL":              {[]consul.Option{consul.WithTTL(0)}, "WithTTL: 0s is not positive"},
		"zero refresh":          {[]consul.Option{consul.WithRefreshInterval(0)}, "WithRefreshInterval"},
		"empty service name":    {[]consul.Option{consul.WithServiceName("")}, "WithServiceName: empty name"},
		"deregister below 1m":   {[]consul.Option{consul.WithDeregisterCriticalServiceAfter(30 * time.Second)}, "below Consul's minimum"},
		"zero retry backoff":    {[]consul.Option{consul.WithRetryBackoff(0)}, "WithRetryBackoff"},
		"nil client":            {[]consul.Option{consul.WithClient(nil)}, "nil client"},
		"nil logger":            {[]consul.Option{consul.WithLogger(nil)}, "nil logger"},
		"nil option":            {[]consul.Option{nil}, "nil option"},
	} {
		if _, err := consul.New(append([]consul.Option{consul.WithClient(client)}, c.opts...)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New = %v, want an error with %q", name, err, c.want)
		}
	}
	if _, err := consul.New(); err != nil {
		t.Fatalf("no options: %v", err)
	}
}

func TestRegisterRejectsBadMembers(t *testing.T) {
	p := newProvider(t, nil)
	ctx := context.Background()
	for name, m := range map[string]membership.Member{
		"empty id":       {Address: "127.0.0.1:1"},
		"id with slash":  {ID: "a/b", Address: "127.0.0.1:1"},
		"no port":        {ID: "a", Address: "127.0.0.1"},
		"bad port":       {ID: "a", Address: "127.0.0.1:x"},
		"role w/ comma":  {ID: "a", Address: "127.0.0.1:1", Roles: []string{"x,y"}},
		"nonhost remote": {ID: "a", Address: "nonhost"},
	} {
		if _, err := p.Register(ctx, m); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	p.Close()
	if _, err := p.Register(ctx, membership.Member{ID: "a", Address: "127.0.0.1:1"}); !errors.Is(err, consul.ErrClosed) {
		t.Fatalf("register after Close: %v", err)
	}
}

// partitionTransport cuts a client off Consul on demand: while cut, every
// request fails, including those in flight (a blocking query waiting for a
// change) and answers already on their way. It counts the failed requests by
// path.
type partitionTransport struct {
	base http.RoundTripper

	mu     sync.Mutex
	down   bool
	cutCtx context.Context
	cutFn  context.CancelFunc
	failed map[string]int
	passed map[string]int
}

func newPartitionTransport() *partitionTransport {
	p := &partitionTransport{base: cleanhttp.DefaultPooledTransport(), failed: map[string]int{}, passed: map[string]int{}}
	p.cutCtx, p.cutFn = context.WithCancel(context.Background())
	return p
}

func (p *partitionTransport) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	p.cutFn()
}

func (p *partitionTransport) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
	p.cutCtx, p.cutFn = context.WithCancel(context.Background())
}

// failures returns how many requests whose path starts with prefix failed.
func (p *partitionTransport) failures(prefix string) int { return p.count(p.failed, prefix) }

// successes returns how many requests whose path starts with prefix got an
// answer.
func (p *partitionTransport) successes(prefix string) int { return p.count(p.passed, prefix) }

func (p *partitionTransport) count(m map[string]int, prefix string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for path, c := range m {
		if strings.HasPrefix(path, prefix) {
			n += c
		}
	}
	return n
}

func (p *partitionTransport) fail(r *http.Request) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failed[r.URL.Path]++
	return errors.New("test partition")
}

func (p *partitionTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	p.mu.Lock()
	down, cutCtx := p.down, p.cutCtx
	p.mu.Unlock()
	if down {
		return nil, p.fail(r)
	}
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(cutCtx, cancel)
	resp, err := p.base.RoundTrip(r.WithContext(ctx))
	if err != nil || cutCtx.Err() != nil {
		if err == nil {
			_ = resp.Body.Close()
		}
		stop()
		cancel()
		return nil, p.fail(r)
	}
	p.mu.Lock()
	p.passed[r.URL.Path]++
	p.mu.Unlock()
	resp.Body = &cancelBody{ReadCloser: resp.Body, done: func() { stop(); cancel() }}
	return resp, nil
}

// cancelBody releases the request's context once the body is closed.
type cancelBody struct {
	io.ReadCloser
	done func()
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.done()
	return err
}

// A watcher that misses the "leaving" status (it is cut off while the member
// marks itself leaving and deregisters) still reports the member Leaving
// before it reports it gone, thanks to the leaving marker; a member that
// vanishes without having announced its leave is not reported Leaving.
func TestLeaveSeenGracefulByWatcherThatMissedIt(t *testing.T) {
	agent := consulagent.Start(t)
	pt := newPartitionTransport()
	cfg := api.DefaultConfig()
	cfg.Address = agent.Addr()
	cfg.HttpClient = &http.Client{Transport: pt}
	watcherClient, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	watcher := newProvider(t, watcherClient)
	leaver := newProvider(t, agent.Client())
	crasher := newProvider(t, agent.Client())
	l := register(t, leaver, "leaver", "127.0.0.1:10001")
	c := register(t, crasher, "crasher", "127.0.0.1:10002")
	snaps := watch(t, watcher)
	eventually(t, waitDeadline, "the watcher to see both Up", func() (bool, string) {
		last := snaps.last()
		a, okA := find(last, l.ID)
		b, okB := find(last, c.ID)
		return okA && okB && a.Status == membership.Up && b.Status == membership.Up, describe(last)
	})
	seenBefore := len(snaps.all())

	pt.cut()
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	if err := leaver.SetLeaving(ctx); err != nil {
		t.Fatalf("set leaving: %v", err)
	}
	if err := leaver.Deregister(ctx); err != nil {
		t.Fatalf("deregister: %v", err)
	}
	// The crasher vanishes too, without a leave.
	if err := agent.Client().Agent().ServiceDeregister(c.ID); err != nil {
		t.Fatalf("remove the crasher: %v", err)
	}
	pt.heal()

	eventually(t, waitDeadline, "the watcher to see both gone", func() (bool, string) {
		return len(snaps.last()) == 0, describe(snaps.last())
	})
	after := snaps.all()[seenBefore:]
	leavingAt, goneAt := -1, -1
	for i, s := range after {
		if m, ok := find(s, l.ID); ok && m.Status == membership.Leaving && leavingAt < 0 {
			leavingAt = i
			if m.Age != l.Age {
				t.Fatalf("leaving member reported with age %d, registered with %d", m.Age, l.Age)
			}
		}
		if _, ok := find(s, l.ID); !ok && goneAt < 0 {
			goneAt = i
		}
		if m, ok := find(s, c.ID); ok && m.Status == membership.Leaving {
			t.Fatalf("the crasher was reported Leaving: %s", describe(s))
		}
	}
	if leavingAt < 0 || goneAt < leavingAt {
		var b strings.Builder
		for _, s := range after {
			b.WriteString(describe(s) + "; ")
		}
		t.Fatalf("no Leaving report before the removal: %s", b.String())
	}
}

// A short outage between a node and Consul (well under the TTL) changes
// nothing: the watch keeps its last view (never reports members missing
// because it cannot read) and the member is not fenced.
func TestShortOutageKeepsViewAndMembership(t *testing.T) {
	agent := consulagent.Start(t)
	pt := newPartitionTransport()
	cfg := api.DefaultConfig()
	cfg.Address = agent.Addr()
	cfg.HttpClient = &http.Client{Transport: pt}
	client, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A long TTL next to the outage, so that a slow machine cannot turn it
	// into a real failure.
	const ttl = 10 * time.Second
	p := newProvider(t, client, consul.WithTTL(ttl),
		consul.WithRefreshInterval(200*time.Millisecond)) // several refreshes fail
	other := newProvider(t, agent.Client(), consul.WithTTL(ttl))
	self := register(t, p, "cut-off", "127.0.0.1:10001")
	o := register(t, other, "other", "127.0.0.1:10002")
	snaps := watch(t, p)
	eventually(t, waitDeadline, "the watch to show both", func() (bool, string) {
		return len(snaps.last()) == 2, describe(snaps.last())
	})

	pt.cut()
	eventually(t, waitDeadline, "refreshes and watch queries to fail", func() (bool, string) {
		r, w := pt.failures("/v1/agent/check/update/"), pt.failures("/v1/health/service/")
		return r >= 2 && w >= 2, fmt.Sprintf("%d refreshes and %d watch queries failed", r, w)
	})
	pt.heal()
	before := pt.successes("/v1/agent/check/update/")
	eventually(t, waitDeadline, "refreshes to work again", func() (bool, string) {
		n := pt.successes("/v1/agent/check/update/") - before
		return n >= 2, fmt.Sprintf("%d refreshes since the outage", n)
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	if err := p.SetLeaving(ctx); err != nil {
		t.Fatalf("the member was fenced by a short outage: %v", err)
	}
	eventually(t, waitDeadline, "the watch to show self Leaving", func() (bool, string) {
		m, ok := find(snaps.last(), self.ID)
		return ok && m.Status == membership.Leaving, describe(snaps.last())
	})
	for _, s := range snaps.all() {
		_, a := find(s, self.ID)
		_, b := find(s, o.ID)
		if !a || !b {
			t.Fatalf("the watch reported a member missing during a short outage: %s", describe(s))
		}
	}
}
