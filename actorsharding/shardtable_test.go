package actorsharding

import (
	"errors"
	"slices"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

var (
	selfPID  = actor.NewPID("127.0.0.1:1", "sharding/T")
	otherPID = actor.NewPID("127.0.0.1:2", "sharding/T")
)

func child(n string) *actor.PID { return actor.NewPID("127.0.0.1:1", "sharding/T/"+n) }

// Each step drives the table with one transition; the table must end in
// the expected state, and a step that does not fit must fail with its
// error and leave the table as it was.
func TestShardTableLifecycle(t *testing.T) {
	type step struct {
		name string
		do   func(*shardTable) error
		err  error
	}
	start := func(shard, name string) func(*shardTable) error {
		return func(tb *shardTable) error { return tb.started(shard, child(name)) }
	}
	handOff := func(shard string) func(*shardTable) error {
		return func(tb *shardTable) error { _, err := tb.handOff(shard); return err }
	}
	stop := func(shard string) func(*shardTable) error {
		return func(tb *shardTable) error { _, err := tb.stop(shard); return err }
	}
	terminated := func(name string) func(*shardTable) error {
		return func(tb *shardTable) error { _, _, err := tb.terminated(child(name).Id); return err }
	}
	await := func(shard string) func(*shardTable) error {
		return func(tb *shardTable) error { return tb.awaitStopped(shard, otherPID) }
	}
	cases := []struct {
		name        string
		steps       []step
		wantRunning []string
		wantAlive   int
	}{
		{"start", []step{{"start", start("1", "1"), nil}}, []string{"1"}, 1},
		{"a second child while the first runs", []step{
			{"start", start("1", "1"), nil},
			{"start again", start("1", "1b"), errShardAlive},
		}, []string{"1"}, 1},
		{"a slow hand-off: no new child until the old one terminated", []step{
			{"start", start("1", "1"), nil},
			{"hand off", handOff("1"), nil},
			{"start while handing off", start("1", "1b"), errShardAlive},
			{"terminated", terminated("1"), nil},
			{"start after", start("1", "1b"), nil},
		}, []string{"1"}, 1},
		{"stopped by the region (removal, another home): no new child until terminated", []step{
			{"start", start("1", "1"), nil},
			{"stop", stop("1"), nil},
			{"start while stopping", start("1", "1b"), errShardAlive},
			{"hand off a stopping shard", handOff("1"), errShardNotRunning},
			{"a HandOff waits for the stop", await("1"), nil},
		}, nil, 1},
		{"hand off or stop what does not run", []step{
			{"hand off nothing", handOff("1"), errShardNotRunning},
			{"stop nothing", stop("1"), errShardNotRunning},
			{"await nothing", await("1"), errShardNotStopping},
			{"terminated unknown", terminated("1"), errUnknownChild},
		}, nil, 0},
		{"two shards", []step{
			{"start 1", start("1", "1"), nil},
			{"start 2", start("2", "2"), nil},
			{"hand off 1", handOff("1"), nil},
		}, []string{"2"}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tb := newShardTable(selfPID)
			for _, s := range tc.steps {
				if err := s.do(&tb); !errors.Is(err, s.err) {
					t.Fatalf("%s: error %v, want %v", s.name, err, s.err)
				}
			}
			if got := tb.hosted(); !slices.Equal(got, tc.wantRunning) {
				t.Errorf("hosted() = %v, want %v", got, tc.wantRunning)
			}
			if got := tb.liveChildren(); got != tc.wantAlive {
				t.Errorf("liveChildren() = %d, want %d", got, tc.wantAlive)
			}
		})
	}
}

func TestShardTableTerminatedAnswersHandOffs(t *testing.T) {
	tb := newShardTable(selfPID)
	if err := tb.started("1", child("1")); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.stop("1"); err != nil {
		t.Fatal(err)
	}
	worker := actor.NewPID("127.0.0.1:3", "coordinator/$1")
	for range 2 {
		if err := tb.awaitStopped("1", worker); err != nil {
			t.Fatal(err)
		}
	}
	shard, ended, err := tb.terminated(child("1").Id)
	if err != nil || shard != "1" || ended.state != shardStopping || len(ended.handOffReplyTo) != 1 {
		t.Fatalf("terminated = %q, %+v, %v; want shard 1, stopping, the worker once", shard, ended, err)
	}
	if tb.alive("1") || tb.isChild(child("1").Id) {
		t.Fatal("the child is still known after its Terminated")
	}
}

func TestShardTableHomes(t *testing.T) {
	tb := newShardTable(selfPID)
	if tb.setHome("1", selfPID) {
		t.Error("self is not a region to watch")
	}
	if !tb.setHome("2", otherPID) {
		t.Error("the first shard of another region: watch it")
	}
	if tb.setHome("3", otherPID) {
		t.Error("a known region: no second watch")
	}
	if !tb.homeIsSelf("1") || tb.homeIsSelf("2") {
		t.Error("homeIsSelf")
	}
	if got := tb.regionsAt(otherPID.Address); len(got) != 1 || !got[0].Equal(otherPID) {
		t.Errorf("regionsAt = %v", got)
	}
	tb.setHome("2", selfPID) // moved here
	if got := tb.forgetRegion(otherPID); len(got) != 1 || got[0] != "3" {
		t.Errorf("forgetRegion = %v, want [3]", got)
	}
	if _, ok := tb.home("3"); ok {
		t.Error("shard 3's home survived its region")
	}
	if !tb.homeIsSelf("2") {
		t.Error("shard 2 moved here and lost its home with the other region")
	}
	tb.forgetHome("2")
	tb.forgetAllHomes()
	if _, ok := tb.home("1"); ok {
		t.Error("forgetAllHomes")
	}
}

func TestShardTableAwaitedStarts(t *testing.T) {
	tb := newShardTable(selfPID)
	c := actor.NewPID("127.0.0.1:3", "coordinator")
	tb.awaitStart("1", c)
	tb.awaitStart("1", c)
	tb.awaitStart("1", nil)
	if !tb.startAwaited("1") || tb.startAwaited("2") {
		t.Fatal("startAwaited")
	}
	if got := tb.takeAwaitedStarts("1"); len(got) != 1 {
		t.Fatalf("takeAwaitedStarts = %v, want the coordinator once", got)
	}
	if tb.startAwaited("1") {
		t.Fatal("taken twice")
	}
}

func TestShardBuffers(t *testing.T) {
	b := newShardBuffers(3)
	for i, shard := range []string{"2", "1", "2"} {
		if err := b.add(shard, bufferedMessage{entityID: string(rune('a' + i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.add("3", bufferedMessage{}); !errors.Is(err, errBufferFull) {
		t.Fatalf("past the limit: %v, want errBufferFull", err)
	}
	if got := b.shards(); !slices.Equal(got, []string{"2", "1"}) {
		t.Fatalf("shards() = %v, want in opening order", got)
	}
	if b.len() != 3 || !b.has("2") || b.has("3") {
		t.Fatal("len/has")
	}
	msgs := b.take("2")
	if len(msgs) != 2 || msgs[0].entityID != "a" || msgs[1].entityID != "c" {
		t.Fatalf("take(2) = %v, want a, c in order", msgs)
	}
	if b.len() != 1 || b.take("2") != nil {
		t.Fatal("take twice")
	}
	if err := b.add("3", bufferedMessage{}); err != nil {
		t.Fatalf("room again: %v", err)
	}
}

func TestCommandRejection(t *testing.T) {
	coordinator := actor.NewPID("127.0.0.1:9", "sharding/TCoordinator/singleton/coordinator")
	worker := actor.NewPID("127.0.0.1:9", "sharding/TCoordinator/singleton/coordinator/$4")
	impostor := actor.NewPID("127.0.0.1:9", "sharding/TCoordinator/singleton/coordinatorX/$4")
	elsewhere := actor.NewPID("127.0.0.1:8", "sharding/TCoordinator/singleton/coordinator/$4")
	cases := []struct {
		name        string
		coordinator *actor.PID
		sender      *actor.PID
		epoch       uint64
		ok          bool
	}{
		{"the coordinator at its epoch", coordinator, coordinator, 5, true},
		{"its worker at its epoch", coordinator, worker, 5, true},
		{"no coordinator registered", nil, coordinator, 5, false},
		{"no sender", coordinator, nil, 5, false},
		{"an unrelated actor", coordinator, otherPID, 5, false},
		{"an actor whose id only starts like the coordinator's", coordinator, impostor, 5, false},
		{"the same path on another node", coordinator, elsewhere, 5, false},
		{"an older epoch (a stale coordinator's late message)", coordinator, coordinator, 4, false},
		{"a newer epoch", coordinator, coordinator, 6, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			why := commandRejection(tc.coordinator, 5, tc.sender, tc.epoch)
			if (why == "") != tc.ok {
				t.Fatalf("commandRejection = %q, want ok=%v", why, tc.ok)
			}
		})
	}
}

func TestMissedCoordinatorChange(t *testing.T) {
	const id = "sharding/TCoordinator/singleton/coordinator"
	coordinator := actor.NewPID("127.0.0.1:8", id)
	worker := actor.NewPID("127.0.0.1:8", id+"/$4")
	impostor := actor.NewPID("127.0.0.1:8", id+"X/$4")
	cases := []struct {
		name   string
		sender *actor.PID
		epoch  uint64
		live   bool
		missed bool
	}{
		{"the coordinator of a newer epoch on a live member", coordinator, 6, true, true},
		{"its worker", worker, 6, true, true},
		{"the epoch already seen", coordinator, 5, true, false},
		{"an older epoch", coordinator, 4, true, false},
		{"a member that is not live", coordinator, 6, false, false},
		{"an unrelated actor (a forged command)", otherPID, ^uint64(0), true, false},
		{"an actor whose id only starts like the coordinator's", impostor, 6, true, false},
		{"no sender", nil, 6, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := missedCoordinatorChange(id, 5, tc.sender, tc.epoch, tc.live); got != tc.missed {
				t.Fatalf("missedCoordinatorChange = %v, want %v", got, tc.missed)
			}
		})
	}
}

func TestAcceptCoordinator(t *testing.T) {
	cases := []struct {
		name     string
		maxEpoch uint64
		epoch    uint64
		onOldest bool
		accept   bool
		warn     bool
	}{
		{"first registration", 0, 3, false, true, false},
		{"a newer coordinator", 3, 9, false, true, false},
		{"the same epoch again", 9, 9, true, true, false},
		{"a stale coordinator", 9, 3, false, false, false},
		{"a store reset: lower epoch on the oldest member", 9, 3, true, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			accept, why := acceptCoordinator(tc.maxEpoch, tc.epoch, tc.onOldest)
			if accept != tc.accept || (accept && (why != "") != tc.warn) || (!accept && why == "") {
				t.Fatalf("acceptCoordinator = %v, %q; want accept=%v warn=%v", accept, why, tc.accept, tc.warn)
			}
		})
	}
}

// TestSweepIdleHomes: a home on another region is forgotten once it went
// unused for two whole intervals between sweeps; a use, through the
// router or the region, or a shard the region holds something of, starts
// again; a home on this region stays.
func TestSweepIdleHomes(t *testing.T) {
	type sweep struct {
		used, busy, noted []string // used since the last sweep, busy now, noted with homeUsed before
		forgot            []string
	}
	cases := []struct {
		name   string
		sweeps []sweep
	}{
		{"unused: forgotten at the third sweep", []sweep{{}, {}, {forgot: []string{"1", "2"}}}},
		{"used through the router: starts again", []sweep{
			{}, {used: []string{"1"}}, {forgot: []string{"2"}}, {forgot: []string{"1"}},
		}},
		{"used by the region: starts again", []sweep{
			{}, {noted: []string{"2"}}, {forgot: []string{"1"}}, {forgot: []string{"2"}},
		}},
		{"busy (buffered, a hand-off): kept", []sweep{
			{busy: []string{"1"}}, {busy: []string{"1"}}, {busy: []string{"1"}, forgot: []string{"2"}}, {}, {forgot: []string{"1"}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tb := newShardTable(selfPID)
			tb.setHome("1", otherPID)
			tb.setHome("2", otherPID)
			tb.setHome("3", selfPID)
			for i, s := range tc.sweeps {
				for _, shard := range s.noted {
					tb.homeUsed(shard)
				}
				got := tb.sweepIdleHomes(func(shard string) bool { return slices.Contains(s.used, shard) },
					func(shard string) bool { return slices.Contains(s.busy, shard) }, 2)
				if !slices.Equal(got, s.forgot) {
					t.Fatalf("sweep %d forgot %v, want %v", i, got, s.forgot)
				}
				for _, shard := range got {
					if _, known := tb.home(shard); known {
						t.Fatalf("sweep %d: %s is still known", i, shard)
					}
				}
			}
			if !tb.homeIsSelf("3") {
				t.Fatal("the home on this region was forgotten")
			}
			if len(tb.idle) > len(tb.homes) {
				t.Fatalf("idle counts of %d shards for %d homes", len(tb.idle), len(tb.homes))
			}
		})
	}
}
