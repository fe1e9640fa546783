package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
	"github.com/protoshard/protoshard/messages"
)

// Helpers of the coordinator actor tests carry a "ct" prefix.

// ctCountingStore is a MemoryStore that counts its Saves and, while held,
// keeps its Loads and Saves waiting: a store slower than the coordinator's
// mail.
type ctCountingStore struct {
	*coordinatoractor.MemoryStore
	saves atomic.Int64

	mu        sync.Mutex
	release   chan struct{} // nil: not held
	savesOnly bool          // the Loads are not held
}

func (s *ctCountingStore) Load(ctx context.Context) ([]byte, uint64, error) {
	if err := s.wait(ctx, true); err != nil {
		return nil, 0, err
	}
	return s.MemoryStore.Load(ctx)
}

func (s *ctCountingStore) Save(ctx context.Context, data []byte, v uint64) (uint64, error) {
	s.saves.Add(1)
	if err := s.wait(ctx, false); err != nil {
		return 0, err
	}
	return s.MemoryStore.Save(ctx, data, v)
}

// wait returns once the store is not held (for a Load, or a Save).
func (s *ctCountingStore) wait(ctx context.Context, load bool) error {
	s.mu.Lock()
	release, free := s.release, load && s.savesOnly
	s.mu.Unlock()
	if release == nil || free {
		return nil
	}
	select {
	case <-release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// hold keeps the next Loads and Saves waiting until the returned func is
// called.
func (s *ctCountingStore) hold() (release func()) { return s.holdSome(false) }

// holdSaves keeps the next Saves waiting until the returned func is
// called.
func (s *ctCountingStore) holdSaves() (release func()) { return s.holdSome(true) }

func (s *ctCountingStore) holdSome(savesOnly bool) (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.release, s.savesOnly = ch, savesOnly
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.release = nil
		s.mu.Unlock()
		close(ch)
	}
}

// ctRefusingStore refuses the first Save of a state with a region in it,
// as a store refuses a state too large for it.
type ctRefusingStore struct {
	*ctCountingStore
	refused atomic.Bool
}

func (s *ctRefusingStore) Save(ctx context.Context, data []byte, v uint64) (uint64, error) {
	st, err := DecodeState(data)
	if err != nil {
		return 0, err
	}
	if len(st.Regions) > 0 && s.refused.CompareAndSwap(false, true) {
		return 0, fmt.Errorf("refusing store: %w", coordinatoractor.ErrStateTooLarge)
	}
	return s.ctCountingStore.Save(ctx, data, v)
}

// ctProbe plays a region: it counts the ShardHome and HostShard it is
// sent, per shard, answers HostShard with ShardStarted, keeps the reasons
// of its RegisterRefused, and reports its counts when asked (ctCounts).
type ctProbe struct {
	mu        sync.Mutex
	acks      int
	homes     map[string]int
	hostShard map[string]int
	refused   []string
}

type ctCounts struct{}

func newCTProbe() *ctProbe {
	return &ctProbe{homes: map[string]int{}, hostShard: map[string]int{}}
}

func (p *ctProbe) props() *actor.Props {
	return actor.PropsFromFunc(func(ctx actor.Context) {
		p.mu.Lock()
		defer p.mu.Unlock()
		switch m := ctx.Message().(type) {
		case *messages.RegisterAck:
			p.acks++
		case *messages.RegisterRefused:
			p.refused = append(p.refused, m.GetReason())
		case *messages.ShardHome:
			p.homes[m.GetShard()]++
		case *messages.HostShard:
			p.hostShard[m.GetShard()]++
			// As a region does: the coordinator knows it by the sender.
			ctx.Request(ctx.Sender(), &messages.ShardStarted{Shard: m.GetShard()})
		case ctCounts:
			ctx.Respond([3]int{p.acks, len(p.homes), len(p.hostShard)})
		}
	})
}

// counts asks the probe, behind what its mailbox holds, for its number of
// RegisterAcks, of shards it was told the home of, and of shards it was
// told to host.
func (p *ctProbe) counts(t *testing.T, system *actor.ActorSystem, pid *actor.PID) (acks, homes, hosted int) {
	t.Helper()
	res, err := system.Root.RequestFuture(pid, ctCounts{}, 10*time.Second).Result()
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	c := res.([3]int)
	return c[0], c[1], c[2]
}

// answers reports the probe's RegisterAcks and RegisterRefused reasons.
func (p *ctProbe) answers() (acks int, refused []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acks, slices.Clone(p.refused)
}

// repeats reports the shards told more than once, in homes or hostShard.
func (p *ctProbe) repeats() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for s, n := range p.homes {
		if n > 1 {
			out = append(out, "ShardHome "+s)
		}
	}
	for s, n := range p.hostShard {
		if n > 1 {
			out = append(out, "HostShard "+s)
		}
	}
	return out
}

func ctWaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ctMember is the one member of the coordinator actor tests, joined once
// for the whole package and never shut down: proto.actor remotes race on
// grpc's global logger, so the tests share one instead of starting
// several.
func ctMember(t *testing.T) (*actor.ActorSystem, *membership.Cluster) {
	t.Helper()
	ctOnce.Do(func() {
		system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return slog.New(slog.DiscardHandler)
		}))
		remote.NewRemote(system, remote.Configure("127.0.0.1", 0)).Start()
		cluster := membership.NewCluster(system, local.NewRegistry().Provider(), membership.Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if ctErr = cluster.Join(ctx); ctErr == nil {
			ctSystem, ctCluster = system, cluster
		}
	})
	if ctErr != nil {
		t.Fatalf("joining the test member: %v", ctErr)
	}
	return ctSystem, ctCluster
}

var (
	ctOnce    sync.Once
	ctSystem  *actor.ActorSystem
	ctCluster *membership.Cluster
	ctErr     error
	ctRuns    atomic.Int64
)

func ctState(t *testing.T, system *actor.ActorSystem, coordinator *actor.PID) *CurrentCoordinatorState {
	t.Helper()
	res, err := system.Root.RequestFuture(coordinator, &GetCoordinatorState{}, 10*time.Second).Result()
	if err != nil {
		t.Fatalf("GetCoordinatorState: %v", err)
	}
	return res.(*CurrentCoordinatorState)
}

// The coordinator writes the events of many messages in one write: a
// thousand shards to allocate take a few writes, not a thousand, and every
// requester is answered, once, after the write that allocated its shard.
// While it waits for its state it stashes a repeated request once, up to
// its StashCapacity.
func TestCoordinatorWritesAndStash(t *testing.T) {
	system, cluster := ctMember(t)
	self := cluster.Self()
	const shards = 1000
	// At most this many writes for the thousand shards; one per shard
	// made 1,003.
	const maxWrites = 20
	// Names differ from run to run: -count runs the test again before the
	// last run's probes have stopped.
	run := ctRuns.Add(1)
	regionName := func(name string) string { return fmt.Sprintf("%s-region-%d", name, run) }

	start := func(t *testing.T, name string, store coordinatoractor.StateStore, settings Settings) (coordinator, region *actor.PID, probe *ctProbe) {
		t.Helper()
		settings.RebalanceInterval = time.Hour
		// The region first: a coordinator watches the regions of the state
		// it reads, and one not yet spawned would be terminated at once.
		probe = newCTProbe()
		region, err := system.Root.SpawnNamed(probe.props(), regionName(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { system.Root.Stop(region) })
		coordinator, err = system.Root.SpawnNamed(Props(name, cluster, settings, nil, store), fmt.Sprintf("%s-coordinator-%d", name, run))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = system.Root.StopFuture(coordinator).Wait() })
		system.Root.RequestWithCustomSender(coordinator, &messages.Register{ShardRegion: region, MemberId: self.ID}, region)
		return coordinator, region, probe
	}

	t.Run("remembered shards of a crashed region", func(t *testing.T) {
		// The stored state: a region of a member that is gone (never seen
		// removed, so no removal margin) hosts 1,000 remembered shards.
		gone := actor.NewPID(system.Address(), "gone-region")
		st := NewState(true)
		if err := st.Apply(ShardRegionRegistered{Region: gone, MemberID: "gone-member"}); err != nil {
			t.Fatal(err)
		}
		for i := range shards {
			if err := st.Apply(ShardHomeAllocated{Shard: fmt.Sprintf("s%d", i), Region: gone}); err != nil {
				t.Fatal(err)
			}
		}
		store := &ctCountingStore{MemoryStore: coordinatoractor.NewMemoryStore()}
		if _, err := SaveState(context.Background(), store.MemoryStore, st, 0); err != nil {
			t.Fatal(err)
		}
		// The region registers while the coordinator reads its state.
		release := store.hold()
		coordinator, region, probe := start(t, "Remembered", store, Settings{RememberEntities: true})
		if cur := ctState(t, system, coordinator); cur.Name != StateWaitingForState {
			t.Fatalf("coordinator %s before its state is read", cur.Name)
		}
		release()
		ctWaitFor(t, "every remembered shard hosted by the live region", func() bool {
			_, _, hosted := probe.counts(t, system, region)
			return hosted == shards
		})
		// The claim carries the registration, the end of the gone region
		// and every allocation: one write.
		if writes := store.saves.Load(); writes != 1 {
			t.Fatalf("%d writes for %d remembered shards (claim included), want 1", writes, shards)
		}
		cur := ctState(t, system, coordinator)
		if r := cur.State.Regions[RegionKey(region)]; len(r.Shards) != shards || len(cur.State.Unallocated) != 0 || cur.State.IsRegion(gone) {
			t.Fatalf("written: %d shards on the live region, %d unallocated, gone region still there: %v",
				len(r.Shards), len(cur.State.Unallocated), cur.State.IsRegion(gone))
		}
		if rep := probe.repeats(); len(rep) > 0 {
			t.Fatalf("told more than once: %v", rep)
		}
	})

	t.Run("nothing is said before the claim is written", func(t *testing.T) {
		// The stored state places s0 on the region that registers.
		live := actor.NewPID(system.Address(), regionName("Claim"))
		st := NewState(false)
		for _, e := range []Event{ShardRegionRegistered{Region: live, MemberID: self.ID}, ShardHomeAllocated{Shard: "s0", Region: live}} {
			if err := st.Apply(e); err != nil {
				t.Fatal(err)
			}
		}
		store := &ctCountingStore{MemoryStore: coordinatoractor.NewMemoryStore()}
		loaded, err := SaveState(context.Background(), store.MemoryStore, st, 0)
		if err != nil {
			t.Fatal(err)
		}
		release := store.holdSaves()
		coordinator, region, probe := start(t, "Claim", store, Settings{})
		ctWaitFor(t, "the coordinator active, its claim held", func() bool {
			return ctState(t, system, coordinator).Name == StateActive
		})
		for _, shard := range []string{"s0", "s1"} {
			system.Root.RequestWithCustomSender(coordinator, &messages.GetShardHome{Shard: shard}, region)
		}
		_ = ctState(t, system, coordinator)
		// Every answer would carry the epoch, which the claim sets.
		if acks, homes, hosted := probe.counts(t, system, region); acks != 0 || homes != 0 || hosted != 0 {
			t.Fatalf("before the claim is written: %d RegisterAck, ShardHome for %d shards, HostShard for %d; want none", acks, homes, hosted)
		}
		release()
		ctWaitFor(t, "the RegisterAck and both homes", func() bool {
			acks, homes, hosted := probe.counts(t, system, region)
			return acks == 1 && homes == 2 && hosted == 1
		})
		if cur := ctState(t, system, coordinator); cur.Epoch <= loaded {
			t.Fatalf("epoch %d, want the version claimed, above the version %d read", cur.Epoch, loaded)
		}
	})

	t.Run("a refused claim is written again without its events", func(t *testing.T) {
		store := &ctRefusingStore{ctCountingStore: &ctCountingStore{MemoryStore: coordinatoractor.NewMemoryStore()}}
		release := store.hold() // the Register is stashed, and goes in the claim
		coordinator, region, probe := start(t, "Refused", store, Settings{})
		release()
		ctWaitFor(t, "the claim without the registration", func() bool {
			cur := ctState(t, system, coordinator)
			return cur.Name == StateActive && cur.Epoch > 0
		})
		if !store.refused.Load() {
			t.Fatal("the store refused no write")
		}
		if cur := ctState(t, system, coordinator); cur.State.IsRegion(region) {
			t.Fatal("the refused registration is in the state written")
		}
		// The region registers again, as it does at its retry interval.
		system.Root.RequestWithCustomSender(coordinator, &messages.Register{ShardRegion: region, MemberId: self.ID}, region)
		ctWaitFor(t, "the RegisterAck", func() bool {
			acks, _, _ := probe.counts(t, system, region)
			return acks == 1
		})
	})

	t.Run("a thousand GetShardHome at once", func(t *testing.T) {
		store := &ctCountingStore{MemoryStore: coordinatoractor.NewMemoryStore()}
		coordinator, region, probe := start(t, "Flood", store, Settings{})
		ctWaitFor(t, "the RegisterAck", func() bool {
			acks, _, _ := probe.counts(t, system, region)
			return acks == 1
		})
		before := ctState(t, system, coordinator)
		savesBefore := store.saves.Load()
		// A second requester asks for every shard too, and the region asks
		// for the first hundred twice.
		other := newCTProbe()
		requester := system.Root.Spawn(other.props())
		defer system.Root.Stop(requester)

		release := store.hold()
		for i := range shards {
			shard := fmt.Sprintf("s%d", i)
			system.Root.RequestWithCustomSender(coordinator, &messages.GetShardHome{Shard: shard}, region)
			system.Root.RequestWithCustomSender(coordinator, &messages.GetShardHome{Shard: shard}, requester)
			if i < 100 {
				system.Root.RequestWithCustomSender(coordinator, &messages.GetShardHome{Shard: shard}, region)
			}
		}
		// Behind the requests: all were handled, and none is answered
		// while the write that allocates it is held.
		held := ctState(t, system, coordinator)
		if held.Version != before.Version || held.Name != StateActive {
			t.Fatalf("while the write is held: %s at version %d, want active at %d", held.Name, held.Version, before.Version)
		}
		if _, homes, hosted := probe.counts(t, system, region); homes != 0 || hosted != 0 {
			t.Fatalf("%d ShardHome and %d HostShard sent before their allocation was written", homes, hosted)
		}
		release()
		ctWaitFor(t, "every requester's ShardHome", func() bool {
			_, homes, hosted := probe.counts(t, system, region)
			_, otherHomes, _ := other.counts(t, system, requester)
			return homes == shards && hosted == shards && otherHomes == shards
		})
		writes := store.saves.Load() - savesBefore
		t.Logf("%d writes for %d GetShardHome (%d shards)", writes, 2*shards+100, shards)
		if writes > maxWrites {
			t.Fatalf("%d writes for %d shards, want at most %d", writes, shards, maxWrites)
		}
		// Everything sent is in the mailboxes by now.
		_ = ctState(t, system, coordinator)
		probe.counts(t, system, region)
		other.counts(t, system, requester)
		if rep := append(probe.repeats(), other.repeats()...); len(rep) > 0 {
			t.Fatalf("told more than once: %v", rep)
		}
		if n := len(ctState(t, system, coordinator).State.Shards); n != shards {
			t.Fatalf("%d shards written, want %d", n, shards)
		}
	})
	t.Run("the stash keeps a repeated request once, and is bounded", func(t *testing.T) {
		var mu sync.Mutex
		var full []string
		sub := system.EventStream.Subscribe(func(e any) {
			if d, ok := e.(*deadletter.Event); ok && strings.Contains(d.Reason, "stash is full") {
				mu.Lock()
				full = append(full, d.Message.(*messages.GetShardHome).GetShard())
				mu.Unlock()
			}
		})
		defer system.EventStream.Unsubscribe(sub)
		store := &ctCountingStore{MemoryStore: coordinatoractor.NewMemoryStore()}
		release := store.hold() // the load: the coordinator waits for its state
		coordinator, region, probe := start(t, "Stash", store, Settings{StashCapacity: 3})
		send := func(msg any) { system.Root.RequestWithCustomSender(coordinator, msg, region) }
		for range 4 {
			send(&messages.Register{ShardRegion: region, MemberId: self.ID})
			send(&messages.GetShardHome{Shard: "s1"})
		}
		for _, shard := range []string{"s2", "s3", "s4", "s2", "s1"} {
			send(&messages.GetShardHome{Shard: shard})
		}
		if cur := ctState(t, system, coordinator); cur.Name != StateWaitingForState {
			t.Fatalf("coordinator %s before its state is read", cur.Name)
		}
		release()
		ctWaitFor(t, "the answers to what was stashed", func() bool {
			acks, homes, _ := probe.counts(t, system, region)
			return acks == 1 && homes == 2
		})
		_ = ctState(t, system, coordinator)
		acks, homes, hosted := probe.counts(t, system, region)
		mu.Lock()
		defer mu.Unlock()
		if acks != 1 || homes != 2 || hosted != 2 || fmt.Sprint(full) != "[s3 s4]" {
			t.Fatalf("%d RegisterAcks, ShardHome for %d shards, HostShard for %d, dropped as the stash was full: %v; want 1, 2, 2, [s3 s4]",
				acks, homes, hosted, full)
		}
		if rep := probe.repeats(); len(rep) > 0 {
			t.Fatalf("told more than once: %v", rep)
		}
	})
}
