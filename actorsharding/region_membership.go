package actorsharding

import (
	"fmt"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// openEntry opens the region's entry for member incarnation memberID, in
// place of an earlier incarnation's.
func (r *region) openEntry(ctx actor.Context, memberID string) {
	name := regionEntryName(r.typeName, memberID)
	if r.router == nil || (r.entry != nil && r.entry.Id == name) {
		return
	}
	r.closeEntry(ctx)
	// Set, not Add: only this type's region of this member has the name,
	// and after a restart of the region actor it is there already.
	registry := ctx.ActorSystem().ProcessRegistry
	registry.LocalPIDs.GetBucket(name).Set(name, &regionEntry{router: r.router, memberID: memberID})
	r.entry = actor.NewPID(registry.Address, name)
}

func (r *region) closeEntry(ctx actor.Context) {
	if r.entry != nil {
		ctx.ActorSystem().ProcessRegistry.Remove(r.entry)
		r.entry = nil
	}
}

// onMessageTypeKnown: a live member's region knows a message type, so the
// router sends it there without an envelope from now on.
func (r *region) onMessageTypeKnown(ctx actor.Context, msg *messages.MessageTypeKnown) {
	for _, m := range r.members {
		if m.ID == msg.GetMemberId() && msg.GetTypeName() != "" {
			r.routes.types.learn(m.ID, protoreflect.FullName(msg.GetTypeName()), msg.GetTypeId())
			if msg.GetEntityIdHeader() {
				r.routes.types.learn(m.ID, takesEntityIDHeader, 0)
			}
			if msg.GetEntityRefMessage() {
				r.routes.types.learn(m.ID, takesEntityRefMessage, 0)
			}
			if msg.GetSequencedMessages() {
				r.routes.types.learn(m.ID, takesSequencedMessages, 0)
			}
			return
		}
	}
	// An answer that arrived after its member was removed: nothing to learn.
	ctx.Logger().Debug("shard region: MessageTypeKnown from no live member", slog.String("type", r.typeName),
		slog.String("member", msg.GetMemberId()), slog.String("message-type", msg.GetTypeName()))
}

func (r *region) handleMembership(ctx actor.Context) bool {
	switch msg := ctx.Message().(type) {
	case *membership.CurrentClusterState:
		if id := msg.Self.ID; id != "" {
			r.routes.memberID.Store(&id)
			r.openEntry(ctx, id)
		}
		before := r.members
		r.members = map[string]membership.Member{}
		for _, m := range msg.Members {
			r.memberAt(ctx, before[m.Address], m)
		}
		if r.life.joined(msg.Self.ID) {
			ctx.Logger().Debug("shard region: this node joined the cluster again as a new member; registering",
				slog.String("type", r.typeName), slog.String("member", msg.Self.ID))
		}
		r.startRegistration(ctx)
	case membership.MemberUp, membership.MemberLeft, membership.MemberRemoved:
		unregistered, oldest := !r.link.registered(), ""
		if unregistered {
			oldest = r.oldestOfRole()
		}
		switch msg := msg.(type) {
		case membership.MemberUp:
			r.memberAt(ctx, r.members[msg.Member.Address], msg.Member)
		case membership.MemberLeft:
			r.members[msg.Member.Address] = msg.Member
		case membership.MemberRemoved:
			r.onMemberRemoved(ctx, msg) // registers again if its coordinator ran there
		}
		if unregistered && r.oldestOfRole() != oldest {
			// Where the coordinator runs next (Akka's region registers
			// on every change of the oldest, too).
			r.startRegistration(ctx)
		}
	default:
		return false
	}
	r.stopLocallyIfNobodyToTakeOver(ctx)
	return true
}

// memberAt records m as the live member at its address, where before was.
// Another member there before (a process restarted on the address, whose
// removal may come later) means that the regions known there are the
// earlier incarnation's: a message sent to them now would name m as its
// incarnation, and m never hosted their shards.
func (r *region) memberAt(ctx actor.Context, before, m membership.Member) {
	if before.ID != "" && before.ID != m.ID && m.Address != ctx.Self().Address {
		for _, ref := range r.table.regionsAt(m.Address) {
			r.regionTerminated(ctx, ref)
		}
	}
	r.members[m.Address] = m
}

func (r *region) onMemberRemoved(ctx actor.Context, msg membership.MemberRemoved) {
	if cur, ok := r.members[msg.Member.Address]; ok && cur.ID == msg.Member.ID {
		delete(r.members, msg.Member.Address)
	}
	r.routes.types.forget(msg.Member.ID)
	if msg.Member.Address == ctx.Self().Address {
		if self := r.cluster.Self(); self.ID == msg.Member.ID || self.ID == "" {
			r.selfRemoved(ctx, msg)
			return
		}
	}
	for _, ref := range r.table.regionsAt(msg.Member.Address) {
		r.regionTerminated(ctx, ref)
	}
	if r.link.registered() && r.link.coordinator.Address == msg.Member.Address {
		r.coordinatorLost(ctx, "its member was removed")
	}
}

// selfRemoved: this member was removed (a crash as the others see it, or
// its own TTL fencing). The others start its shards once their removal
// margin has passed, so it stops hosting them now, drops what it buffered
// (forwarding it late would overtake the senders' later messages) and
// fails fast until it has joined again.
func (r *region) selfRemoved(ctx actor.Context, msg membership.MemberRemoved) {
	if !r.life.remove(msg.Member.ID) {
		return
	}
	r.routes.closeAll()
	running := r.table.runningShards()
	ctx.Logger().Warn("shard region: this member was removed; stopping every shard it hosts",
		slog.String("type", r.typeName), slog.Int("shards", len(running)), slog.Bool("graceful", msg.Graceful))
	for _, s := range running {
		r.stopShard(ctx, s.shard)
	}
	r.table.forgetAllHomes()
	r.handOffs.clear()
	for _, shard := range r.buffers.shards() {
		r.dropBuffer(ctx, shard, errRemoved)
	}
	if c := r.link.removed(); c != nil {
		ctx.Unwatch(c)
	}
}

func (r *region) onGracefulShutdown(ctx actor.Context) {
	if r.life.shutDown() {
		ctx.Logger().Debug("shard region: graceful shutdown starting", slog.String("type", r.typeName),
			slog.Int("shards", r.table.runningCount()))
	}
	if r.link.registered() {
		ctx.Request(r.link.coordinator, &messages.GracefulShutdownReq{ShardRegion: ctx.Self()})
	}
	r.stopLocallyIfNobodyToTakeOver(ctx)
	r.tryCompleteGracefulShutdown(ctx)
}

// nobodyToTakeOver tells whether a region of role on selfAddress that shuts
// down has no member to hand its shards to: it knows its own member (so
// members is a real view), and every other member with the role is
// leaving. That is a whole-cluster shutdown, such as the last nodes
// stopping together: the coordinator's member may be leaving too and its
// hand-offs never finish. Akka's analogue is preparing for a full cluster
// shutdown, where a region stops without hand-off.
func nobodyToTakeOver(members map[string]membership.Member, selfAddress, role string) bool {
	if _, known := members[selfAddress]; !known {
		return false
	}
	for addr, m := range members {
		if addr != selfAddress && m.HasRole(role) && m.Status == membership.Up {
			return false
		}
	}
	return true
}

// stopLocallyIfNobodyToTakeOver: during a graceful shutdown with nobody to
// take over, the region hands each shard off to itself: the shard stops its
// entities with the hand-off stop message, as for a move, so remembered
// entities stay remembered for the cluster's next start. What is buffered,
// and what arrives for a shard without a running home from now on, is
// dropped with a reason: no member is left to start it. An entity cannot
// run twice: the coordinator reallocates these shards only once this region
// has stopped.
func (r *region) stopLocallyIfNobodyToTakeOver(ctx actor.Context) {
	if !r.life.stopLocally(r.proxyOnly(), func() bool { return nobodyToTakeOver(r.members, ctx.Self().Address, r.settings.Role) }) {
		return
	}
	running := r.table.runningShards()
	ctx.Logger().Debug("shard region: no other member of the role is up to take the shards (the cluster is shutting down); stopping them here",
		slog.String("type", r.typeName), slog.Int("shards", len(running)))
	for _, s := range running {
		if pid, err := r.table.handOff(s.shard); err == nil {
			ctx.Request(pid, &messages.HandOff{Shard: s.shard})
		}
	}
	for _, shard := range r.buffers.shards() {
		r.dropBuffer(ctx, shard, errClusterShuttingDown)
	}
	r.tryCompleteGracefulShutdown(ctx)
}

func (r *region) tryCompleteGracefulShutdown(ctx actor.Context) {
	if r.life.shutdownComplete(r.table.liveChildren(), r.buffers.len(), r.handOffs.owedCount()) {
		ctx.Logger().Debug("shard region: graceful shutdown complete", slog.String("type", r.typeName))
		ctx.Stop(ctx.Self())
	}
}

func (r *region) onStopping(ctx actor.Context) {
	r.cluster.Unsubscribe(ctx.Self())
	if r.cancelRetry != nil {
		r.cancelRetry()
	}
	for _, shard := range r.buffers.shards() {
		r.dropBuffer(ctx, shard, fmt.Errorf("shard region stopped with the message still buffered: %w", deadletter.ErrShuttingDown))
	}
}
