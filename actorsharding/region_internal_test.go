package actorsharding

import (
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/shardingadmin"
	"github.com/protoshard/protoshard/internal/shardingconfig"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/membership"
)

func TestNobodyToTakeOver(t *testing.T) {
	const self = "10.0.0.1:1"
	member := func(addr string, status membership.Status, roles ...string) membership.Member {
		return membership.Member{ID: "id-" + addr, Address: addr, Roles: roles, Status: status}
	}
	view := func(ms ...membership.Member) map[string]membership.Member {
		out := map[string]membership.Member{}
		for _, m := range ms {
			out[m.Address] = m
		}
		return out
	}
	tests := []struct {
		name    string
		members map[string]membership.Member
		role    string
		want    bool
	}{
		{"no view yet (self unknown)", view(), "", false},
		{"self unknown, others leaving", view(member("10.0.0.2:1", membership.Leaving)), "", false},
		{"alone", view(member(self, membership.Leaving)), "", true},
		{"another member up", view(member(self, membership.Leaving), member("10.0.0.2:1", membership.Up)), "", false},
		{"every other member leaving", view(member(self, membership.Leaving), member("10.0.0.2:1", membership.Leaving), member("10.0.0.3:1", membership.Leaving)), "", true},
		{"one of several still up", view(member(self, membership.Up), member("10.0.0.2:1", membership.Leaving), member("10.0.0.3:1", membership.Up)), "", false},
		{"the member up lacks the role", view(member(self, membership.Leaving, "shard"), member("10.0.0.2:1", membership.Up, "web")), "shard", true},
		{"a member up with the role", view(member(self, membership.Leaving, "shard"), member("10.0.0.2:1", membership.Up, "web", "shard")), "shard", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nobodyToTakeOver(tt.members, self, tt.role); got != tt.want {
				t.Errorf("nobodyToTakeOver = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSendToRegionWaitsForALiveMember: a home whose member this region does
// not know (removed, or not seen yet) has no incarnation to name in
// to_member_id, so nothing would fence the message there: it is not sent,
// it waits in the buffer, and the home is asked again.
func TestSendToRegionWaitsForALiveMember(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	home := &recordingProcess{}
	homePID, _ := system.ProcessRegistry.Add(home, "other-region") // on no member's address
	done := make(chan *region, 1)
	system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*actor.Started); !ok {
			return
		}
		r := &region{typeName: "T", members: map[string]membership.Member{}, table: newShardTable(ctx.Self()),
			buffers: newShardBuffers(10), routes: newRouteTable(system, "T"), handOffs: newHandOffs()}
		r.table.setHome("7", homePID)
		r.sendToRegion(ctx, homePID, "7", bufferedMessage{entityID: "e", message: &testpb.Ping{EntityId: "e", Seq: 1}})
		done <- r
	}))
	r := <-done
	if got := home.take(); len(got) != 0 {
		t.Fatalf("sent %v to a home on no live member", got)
	}
	if !r.buffers.has("7") {
		t.Fatal("the message is not buffered")
	}
	if _, known := r.table.home("7"); known {
		t.Fatal("the home on no live member is still known")
	}
}

// TestRegionForgetsIdleHomesAndRoutes: a region that sent to thousands of
// shards on another node once (a shard per entity) forgets their homes,
// and retires their routes, once they went unused for the idle timeout;
// what it still uses, hosts, buffers for, or hands off stays.
func TestRegionForgetsIdleHomesAndRoutes(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	const shards = 5000
	const otherAddr = "10.0.0.2:7000"
	other := actor.NewPID(otherAddr, shardingadmin.RegionName("T"))
	type figures struct{ homesBefore, routesBefore, homesAfter, routesAfter int }
	done := make(chan figures, 1)
	errs := make(chan string, 16)
	system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*actor.Started); !ok {
			return
		}
		settings := shardingconfig.Default()
		settings.Shard.PassivationIdleTimeout = 40 * time.Second
		r := &region{typeName: "T", settings: settings, table: newShardTable(ctx.Self()), entityProps: actor.PropsFromFunc(func(actor.Context) {}),
			members: map[string]membership.Member{otherAddr: {ID: "m2", Address: otherAddr, Status: membership.Up}},
			buffers: newShardBuffers(10), routes: newRouteTable(system, "T"), handOffs: newHandOffs()}
		for i := range shards {
			shard := fmt.Sprint(i)
			r.table.setHome(shard, other)
			r.updateRoute(shard)
		}
		// Hosted here, buffered for, handed off: kept.
		r.table.setHome("hosted", ctx.Self())
		r.routes.shard("hosted") // as startShard makes it, for the child
		if err := r.table.started("hosted", actor.NewPID(system.Address(), "T/hosted")); err != nil {
			errs <- err.Error()
		}
		r.updateRoute("hosted")
		if err := r.buffers.add("buffered", bufferedMessage{entityID: "b", message: &testpb.Ping{}}); err != nil {
			errs <- err.Error()
		}
		r.routes.shard("buffered")
		r.handOffs.handedOff("owed", time.Now())
		r.routes.shard("owed")
		// Never used: a route made by a message that then went nowhere.
		r.routes.shard("stray")
		f := figures{homesBefore: len(r.table.homes), routesBefore: r.routes.count()}

		use := func(shard string) {
			sr, _ := r.routes.existing(shard)
			sr.remote.Load().guard.markUsed(0)
		}
		t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
		sweepAt := func(d time.Duration) { r.sweepRoutes(ctx, t0.Add(d)) }
		sweepAt(0)                // the first: the clock starts
		sweepAt(10 * time.Second) // before half the timeout: no sweep
		if _, ok := r.routes.existing("stray"); !ok {
			errs <- "swept before half the idle timeout"
		}
		use("0")
		sweepAt(20 * time.Second) // every home: a first unused interval starts
		use("0")
		r.table.homeUsed("1") // the region forwarded a message there
		sweepAt(40 * time.Second)
		use("0")
		sweepAt(60 * time.Second) // the others went unused for the timeout
		f.homesAfter, f.routesAfter = len(r.table.homes), r.routes.count()
		for _, shard := range []string{"0", "1", "hosted", "buffered", "owed"} {
			if _, ok := r.routes.existing(shard); !ok {
				errs <- "the route of shard " + shard + " was retired"
			}
		}
		for _, shard := range []string{"0", "1", "hosted"} {
			if _, ok := r.table.home(shard); !ok {
				errs <- "the home of shard " + shard + " was forgotten"
			}
		}
		if _, ok := r.routes.existing("2"); ok {
			errs <- "the route of an idle shard stayed"
		}
		sweepAt(80 * time.Second)
		if _, ok := r.table.home("1"); ok {
			errs <- "the home the region used once is still known a timeout later"
		}
		close(errs)
		done <- f
	}))
	f := <-done
	for e := range errs {
		t.Error(e)
	}
	t.Logf("homes %d -> %d, routes %d -> %d", f.homesBefore, f.homesAfter, f.routesBefore, f.routesAfter)
	if f.homesBefore != shards+1 || f.homesAfter != 3 || f.routesAfter != 5 {
		t.Fatalf("homes %d -> %d, routes %d -> %d; want %d -> 3 (0, 1, hosted) and 5 routes (and buffered, owed)",
			f.homesBefore, f.homesAfter, f.routesBefore, f.routesAfter, shards+1)
	}
}
