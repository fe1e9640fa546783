package actorsharding

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
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
