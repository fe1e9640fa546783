package membership_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/membership"
)

// fakeProvider is a Provider with a single member whose every change is
// delivered to the watch, and processed, before the call that made it
// returns. It pins down interleavings that a real backend produces only
// now and then (a watch that sees a change before the caller goes on).
type fakeProvider struct {
	mu            sync.Mutex
	self          membership.Member
	others        []membership.Member // other members, in every snapshot
	registered    bool
	hideSelf      bool // the registration never becomes visible
	watchCtx      context.Context
	snapshots     chan fakeSnapshot
	deregistered  int
	failRegister  bool
	registerCalls int
	watchEnded    chan struct{}
}

type fakeSnapshot struct {
	members []membership.Member
	done    chan struct{}
}

func newFakeProvider() *fakeProvider {
	return &fakeProvider{snapshots: make(chan fakeSnapshot), watchEnded: make(chan struct{}, 10)}
}

func (p *fakeProvider) Register(_ context.Context, self membership.Member) (membership.Member, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.registerCalls++
	if p.failRegister {
		return membership.Member{}, errors.New("backend unavailable")
	}
	self.Age = uint64(p.registerCalls)
	p.self, p.registered = self, true
	return self, nil
}

func (p *fakeProvider) current() []membership.Member {
	p.mu.Lock()
	defer p.mu.Unlock()
	others := slices.Clone(p.others)
	if !p.registered || p.hideSelf {
		return others
	}
	return append(others, p.self)
}

// setOthers makes ms the other members and delivers the snapshot.
func (p *fakeProvider) setOthers(ms ...membership.Member) {
	p.mu.Lock()
	p.others = ms
	p.mu.Unlock()
	p.deliver()
}

// deliver hands the current snapshot to the watch and waits until onChange
// returned, unless the watch is gone.
func (p *fakeProvider) deliver() {
	p.mu.Lock()
	ctx := p.watchCtx
	p.mu.Unlock()
	if ctx == nil {
		return
	}
	s := fakeSnapshot{members: p.current(), done: make(chan struct{})}
	select {
	case p.snapshots <- s:
		<-s.done
	case <-ctx.Done():
	}
}

func (p *fakeProvider) SetLeaving(context.Context) error {
	p.mu.Lock()
	p.self.Status = membership.Leaving
	p.mu.Unlock()
	p.deliver()
	return nil
}

func (p *fakeProvider) Deregister(context.Context) error {
	p.mu.Lock()
	p.registered = false
	p.deregistered++
	p.mu.Unlock()
	p.deliver()
	return nil
}

func (p *fakeProvider) Watch(ctx context.Context, onChange func([]membership.Member)) {
	defer func() { p.watchEnded <- struct{}{} }()
	p.mu.Lock()
	p.watchCtx = ctx
	p.mu.Unlock()
	onChange(p.current())
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-p.snapshots:
			onChange(s.members)
			close(s.done)
		}
	}
}

func (p *fakeProvider) Close() {}

func (p *fakeProvider) Name() string { return "fake" }

// fakeSystem is an actor system that looks as if its remote was started:
// Join only needs the address.
func fakeSystem() *actor.ActorSystem {
	system := quietSystem()
	system.ProcessRegistry.Address = "127.0.0.1:1"
	return system
}

// A graceful Leave without hooks deregisters right after announcing the
// leave; the node's own watch sees itself gone before Leave reports the
// removal, and that must still read as graceful.
func TestLeaveSeenByOwnWatchIsGraceful(t *testing.T) {
	system := fakeSystem()
	c := membership.NewCluster(system, newFakeProvider(), membership.Config{})
	rec := &recorder{}
	c.Subscribe(system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return rec })))
	if err := c.Join(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.Leave(context.Background()); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	id := c.Self().ID
	i := rec.waitIndex(t, "own removal", isRemoved(id))
	if ev := rec.all()[i].(membership.MemberRemoved); !ev.Graceful {
		t.Errorf("%+v, want Graceful", ev)
	}
	if left := rec.index(isLeft(id)); left < 0 || left > i {
		t.Errorf("MemberLeft at %d, MemberRemoved at %d: %v", left, i, rec.all())
	}
	// Nothing after, in particular no second removal.
	time.Sleep(50 * time.Millisecond)
	if n := len(rec.all()); n != i+1 {
		t.Errorf("events after the own removal: %v", rec.all())
	}
}

// A join whose registration never becomes visible must not leave a
// registered member and a running watch behind, and may be tried again.
func TestJoinTimeoutUndoesRegistration(t *testing.T) {
	p := newFakeProvider()
	p.hideSelf = true
	c := membership.NewCluster(fakeSystem(), p, membership.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := c.Join(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Join = %v, want a deadline error", err)
	}
	p.mu.Lock()
	deregistered := p.deregistered
	p.mu.Unlock()
	if deregistered != 1 {
		t.Errorf("deregistered %d times, want 1", deregistered)
	}
	select {
	case <-p.watchEnded:
	case <-time.After(waitTimeout):
		t.Fatal("the watch of the failed join is still running")
	}

	p.mu.Lock()
	p.hideSelf = false
	p.mu.Unlock()
	if err := c.Join(context.Background()); err != nil {
		t.Fatalf("Join after a failed join: %v", err)
	}
	c.Close()
}

// Leave of a node that was removed and is waiting to re-join makes the
// removal final: the pending re-join must not bring it back.
func TestLeaveOfRemovedNodeStopsRejoin(t *testing.T) {
	p := newFakeProvider()
	c := membership.NewCluster(fakeSystem(), p, membership.Config{RejoinBackoff: 10 * time.Millisecond})
	if err := c.Join(context.Background()); err != nil {
		t.Fatal(err)
	}
	old := c.Self()
	p.mu.Lock()
	p.failRegister = true
	p.registered = false // removed by failure detection
	p.mu.Unlock()
	p.deliver()
	// The re-join loop now fails and backs off; wait for two attempts.
	waitFor(t, func() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.registerCalls >= 3 }, "re-join attempts")

	if err := c.Leave(context.Background()); !errors.Is(err, membership.ErrRemoved) {
		t.Errorf("Leave of a removed node = %v, want ErrRemoved", err)
	}
	p.mu.Lock()
	p.failRegister = false
	p.mu.Unlock()
	time.Sleep(200 * time.Millisecond) // twenty back-offs
	if self := c.Self(); self.ID != old.ID {
		t.Errorf("the node re-joined as %s after Leave", self.ID)
	}
	if err := c.Join(context.Background()); !errors.Is(err, membership.ErrRemoved) {
		t.Errorf("Join after Leave = %v, want ErrRemoved", err)
	}
}

// detectingProvider is a fakeProvider with a failure detection timeout.
type detectingProvider struct {
	*fakeProvider
	timeout time.Duration
}

func (p detectingProvider) FailureDetectionTimeout() time.Duration { return p.timeout }

func TestDownRemovalMargin(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	cases := []struct {
		name     string
		provider membership.Provider
		config   time.Duration
		want     time.Duration
	}{
		{"no failure detector, unset", newFakeProvider(), 0, 0},
		{"no failure detector, set", newFakeProvider(), 2 * time.Second, 2 * time.Second},
		{"failure detector, unset: its timeout", detectingProvider{newFakeProvider(), 5 * time.Second}, 0, 5 * time.Second},
		{"failure detector, set: the setting", detectingProvider{newFakeProvider(), 5 * time.Second}, 8 * time.Second, 8 * time.Second},
		{"failure detector, negative: none", detectingProvider{newFakeProvider(), 5 * time.Second}, -1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := membership.NewCluster(system, tc.provider, membership.Config{DownRemovalMargin: tc.config})
			if got := membershiphook.Of(c).DownRemovalMargin(); got != tc.want {
				t.Fatalf("DownRemovalMargin() = %v, want %v", got, tc.want)
			}
		})
	}
}

// confirmingProvider is a fakeProvider that confirms its registration
// when the test says so.
type confirmingProvider struct {
	*fakeProvider
	at time.Time
}

func (p *confirmingProvider) FailureDetectionTimeout() time.Duration { return time.Second }

func (p *confirmingProvider) LastConfirmed() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.at, !p.at.IsZero()
}

func TestStale(t *testing.T) {
	p := &confirmingProvider{fakeProvider: newFakeProvider()}
	c := membership.NewCluster(fakeSystem(), p, membership.Config{AfterRemoval: membership.Terminate})
	if membershiphook.Of(c).Stale() {
		t.Fatal("stale before the join")
	}
	p.mu.Lock()
	p.at = time.Now()
	p.mu.Unlock()
	if err := c.Join(context.Background()); err != nil {
		t.Fatal(err)
	}
	if membershiphook.Of(c).Stale() {
		t.Fatal("stale right after a confirmation")
	}
	p.mu.Lock()
	p.at = time.Now().Add(-2 * time.Second) // past the timeout: a pause
	p.mu.Unlock()
	if !membershiphook.Of(c).Stale() {
		t.Fatal("not stale after no confirmation for longer than the failure detection timeout")
	}
	p.mu.Lock()
	p.registered = false // its removal, as the provider reports it
	p.mu.Unlock()
	p.deliver()
	time.Sleep(50 * time.Millisecond)
	if !membershiphook.Of(c).Stale() {
		t.Fatal("not stale after its removal, before it joined again")
	}
}
