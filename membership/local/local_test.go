package local_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
)

const waitTimeout = 20 * time.Second

func ids(ms []membership.Member) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

func register(t *testing.T, reg *local.Registry, id string, roles ...string) (membership.Provider, membership.Member) {
	t.Helper()
	p := reg.Provider()
	m, err := p.Register(context.Background(), membership.Member{ID: id, Address: "127.0.0.1:" + id, Roles: roles, Status: membership.Leaving})
	if err != nil {
		t.Fatalf("Register(%s): %v", id, err)
	}
	return p, m
}

func TestRegisterAssignsIncreasingAges(t *testing.T) {
	reg := local.NewRegistry()
	_, a := register(t, reg, "zz")
	_, b := register(t, reg, "aa")
	if a.Age == 0 || b.Age <= a.Age {
		t.Errorf("ages %d then %d, want increasing from 1", a.Age, b.Age)
	}
	if a.Status != membership.Up {
		t.Errorf("registered status %v, want Up whatever was asked", a.Status)
	}
	// Oldest first, not by id.
	if got := ids(reg.Members()); !slices.Equal(got, []string{"zz", "aa"}) {
		t.Errorf("Members = %v, want [zz aa]", got)
	}
}

func TestRegisterRejectsEmptyAndDuplicateIDs(t *testing.T) {
	reg := local.NewRegistry()
	register(t, reg, "a")
	if _, err := reg.Provider().Register(context.Background(), membership.Member{ID: "a"}); err == nil {
		t.Error("duplicate id accepted")
	}
	if _, err := reg.Provider().Register(context.Background(), membership.Member{}); err == nil {
		t.Error("empty id accepted")
	}
}

func TestRegisterCopiesRoles(t *testing.T) {
	reg := local.NewRegistry()
	roles := []string{"x"}
	p := reg.Provider()
	if _, err := p.Register(context.Background(), membership.Member{ID: "a", Roles: roles}); err != nil {
		t.Fatal(err)
	}
	roles[0] = "changed"
	if got := reg.Members()[0].Roles; !slices.Equal(got, []string{"x"}) {
		t.Errorf("roles = %v: the registry shares the caller's slice", got)
	}
}

func TestSetLeavingDeregisterRemove(t *testing.T) {
	reg := local.NewRegistry()
	ctx := context.Background()
	pa, _ := register(t, reg, "a")
	pb, _ := register(t, reg, "b")
	if err := pa.SetLeaving(ctx); err != nil {
		t.Fatal(err)
	}
	if m := reg.Members()[0]; m.ID != "a" || m.Status != membership.Leaving {
		t.Errorf("after SetLeaving: %+v", m)
	}
	if err := pa.Deregister(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pa.Deregister(ctx); err == nil {
		t.Error("second Deregister succeeded")
	}
	if err := pa.SetLeaving(ctx); err == nil {
		t.Error("SetLeaving after Deregister succeeded")
	}
	if !reg.Remove("b") || reg.Remove("b") {
		t.Error("Remove must report whether the member was there")
	}
	if err := pb.Deregister(ctx); err == nil {
		t.Error("Deregister of a removed member succeeded")
	}
	if len(reg.Members()) != 0 {
		t.Errorf("members left: %v", reg.Members())
	}
	if err := reg.Provider().SetLeaving(ctx); err == nil {
		t.Error("SetLeaving of a provider that never registered succeeded")
	}
}

func TestWatchDeliversSnapshots(t *testing.T) {
	reg := local.NewRegistry()
	pa, _ := register(t, reg, "a")
	ctx, cancel := context.WithCancel(context.Background())
	snapshots := make(chan []membership.Member, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		pa.Watch(ctx, func(ms []membership.Member) { snapshots <- ms })
	}()
	// waitSnapshot reads snapshots until one has the wanted ids: changes may
	// be coalesced, the latest state always arrives.
	waitSnapshot := func(want ...string) []membership.Member {
		t.Helper()
		timeout := time.After(waitTimeout)
		for {
			select {
			case ms := <-snapshots:
				if slices.Equal(ids(ms), want) {
					return ms
				}
			case <-timeout:
				t.Fatalf("no snapshot with %v", want)
			}
		}
	}
	waitSnapshot("a") // the current state comes first, without a change
	pb, _ := register(t, reg, "b")
	waitSnapshot("a", "b")
	if err := pb.SetLeaving(context.Background()); err != nil {
		t.Fatal(err)
	}
	for {
		ms := waitSnapshot("a", "b")
		if ms[1].Status == membership.Leaving {
			break
		}
	}
	reg.Remove("a")
	waitSnapshot("b") // the watcher's own member vanishing is reported too

	cancel()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("Watch did not return after its context was done")
	}
	pa.Close() // nothing to stop; must not panic
}

func TestSharedValueIsPerRegistry(t *testing.T) {
	reg, other := local.NewRegistry(), local.NewRegistry()
	created := 0
	create := func() any { created++; return new(int) }
	p1, ok := reg.Provider().(membershiphook.InProcessProvider)
	if !ok {
		t.Fatal("the local provider is not an InProcessProvider")
	}
	p2 := reg.Provider().(membershiphook.InProcessProvider)
	a, b := p1.SharedValue("k", create), p2.SharedValue("k", create)
	if a != b || created != 1 {
		t.Errorf("two providers of one registry got %p and %p (%d created), want one shared value", a, b, created)
	}
	if c := p1.SharedValue("other key", create); c == a {
		t.Error("another key got the same value")
	}
	if d := other.Provider().(membershiphook.InProcessProvider).SharedValue("k", create); d == a {
		t.Error("another registry got the same value")
	}
}

// A graceful leave whose SetLeaving and Deregister fall between two
// deliveries is still delivered as Leaving first; a crash (Remove of an Up
// member) is not.
func TestWatchReportsAFastLeaveAsLeaving(t *testing.T) {
	reg := local.NewRegistry()
	ctx := context.Background()
	pa, _ := register(t, reg, "a")
	pb, _ := register(t, reg, "b")
	register(t, reg, "c")
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gate := make(chan struct{})
	snapshots := make(chan []membership.Member, 100)
	go pa.Watch(wctx, func(ms []membership.Member) {
		snapshots <- ms
		<-gate // hold the watcher so that the next changes coalesce
	})
	next := func() []membership.Member {
		t.Helper()
		select {
		case ms := <-snapshots:
			return ms
		case <-time.After(10 * time.Second):
			t.Fatal("no snapshot")
			return nil
		}
	}
	release := func() {
		t.Helper()
		select {
		case gate <- struct{}{}:
		case <-time.After(10 * time.Second):
			t.Fatal("the watcher is not waiting")
		}
	}
	first := next()
	if len(first) != 3 {
		t.Fatalf("first snapshot %v, want a, b and c", first)
	}
	if err := pb.SetLeaving(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pb.Deregister(ctx); err != nil {
		t.Fatal(err)
	}
	reg.Remove("c") // a crash of an Up member
	release()
	statusOf := func(ms []membership.Member, id string) (membership.Status, bool) {
		for _, m := range ms {
			if m.ID == id {
				return m.Status, true
			}
		}
		return 0, false
	}
	second := next()
	if st, ok := statusOf(second, "b"); !ok || st != membership.Leaving {
		t.Errorf("b in the next snapshot: %v %v, want Leaving (%v)", st, ok, second)
	}
	if _, ok := statusOf(second, "c"); ok {
		t.Errorf("the crashed c was reported again: %v", second)
	}
	release()
	third := next()
	if _, ok := statusOf(third, "b"); ok {
		t.Errorf("b still there after its Leaving snapshot: %v", third)
	}
	close(gate)
}

func TestRegistryName(t *testing.T) {
	for _, c := range []struct {
		reg  *local.Registry
		want string
	}{
		{local.NewRegistry(), local.DefaultName},
		{local.NewNamedRegistry(""), local.DefaultName},
		{local.NewNamedRegistry("app-a"), "app-a"},
	} {
		if c.reg.Provider().Name() != c.want {
			t.Errorf("provider %q, want %q", c.reg.Provider().Name(), c.want)
		}
	}
}

// TestWatchStartsWhileMembersJoin: watches that start while other members
// register (nodes joining at once) each deliver a first snapshot; a change
// between a watch's start and its first delivery must not stall it.
func TestWatchStartsWhileMembersJoin(t *testing.T) {
	reg := local.NewRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const watchers, joiners, members = 400, 4, 25
	var wg sync.WaitGroup
	var delivered sync.WaitGroup
	delivered.Add(watchers)
	for w := range watchers {
		if w%(watchers/joiners) == 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range members {
					if _, err := reg.Provider().Register(ctx, membership.Member{ID: fmt.Sprintf("m%d-%d", w, i), Address: "127.0.0.1:1"}); err != nil {
						t.Errorf("Register: %v", err)
						return
					}
				}
			}()
		}
		var once sync.Once
		go reg.Provider().Watch(ctx, func([]membership.Member) { once.Do(delivered.Done) })
	}
	wg.Wait()
	done := make(chan struct{})
	go func() { delivered.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("a watch delivered no first snapshot")
	}
}
