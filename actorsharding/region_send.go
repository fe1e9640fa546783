package actorsharding

import (
	"fmt"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/deadletters"
	"github.com/protoshard/protoshard/internal/guard"
	"github.com/protoshard/protoshard/internal/shardproto"
	"github.com/protoshard/protoshard/internal/wire"
	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

func (r *region) onEnvelope(ctx actor.Context, env *messages.ShardingEnvelope) {
	id := env.GetEntityId()
	if err := wire.CheckEntityID(id); err != nil {
		r.drop(ctx, env, fmt.Sprintf("ShardingEnvelope: %v", err))
		return
	}
	shard := r.extractor.ShardID(id)
	if err := wire.CheckShardID(shard); err != nil {
		r.drop(ctx, env, fmt.Sprintf("the extractor gives no valid shard for entity %q: %v", id, err))
		return
	}
	if to := env.GetToMemberId(); to != "" && to != r.cluster.Self().ID {
		deadletters.PublishError(ctx.ActorSystem(), ctx.Self(), env, ctx.Sender(), fmt.Errorf("shard region %s: entity %q: %w", r.typeName, id, earlierIncarnation(to)))
		return
	}
	if env.GetShardId() != "" && env.GetShardId() != shard {
		r.drop(ctx, env, fmt.Sprintf("ShardingEnvelope names shard %q but this node's extractor maps entity %q to shard %q: the extractors of the nodes differ",
			env.GetShardId(), id, shard))
		return
	}
	m, err := unpackEnvelope(env)
	if err != nil {
		r.drop(ctx, env, err.Error())
		return
	}
	// Only another node's region names the incarnation it forwards to; an
	// envelope of one of this node's senders waits its turn like any
	// message of theirs.
	r.deliverMessage(ctx, shard, bufferedMessage{entityID: id, message: m, sender: ctx.Sender(), forwarded: env.GetToMemberId() != "",
		header: messageHeader(ctx, env.GetHeaders())})
}

func (r *region) onUserMessage(ctx actor.Context, msg any) {
	id, err := r.extractor.EntityID(msg)
	if err != nil || id == "" {
		if err == nil {
			err = ErrNoEntityID
		}
		r.drop(ctx, msg, fmt.Sprintf("cannot route: %v", err))
		return
	}
	if err := wire.CheckEntityID(id); err != nil {
		r.drop(ctx, msg, fmt.Sprintf("cannot route: %v", err))
		return
	}
	m, err := r.extractor.UnwrapMessage(msg)
	if err != nil {
		r.drop(ctx, msg, fmt.Sprintf("cannot unwrap the message for entity %q: %v", id, err))
		return
	}
	if m == nil {
		r.drop(ctx, msg, fmt.Sprintf("the extractor unwrapped a nil message for entity %q", id))
		return
	}
	shard := r.extractor.ShardID(id)
	if err := wire.CheckShardID(shard); err != nil {
		r.drop(ctx, msg, fmt.Sprintf("the extractor gives no valid shard for entity %q: %v", id, err))
		return
	}
	if r.proxyOnly() {
		if _, ok := m.(proto.Message); !ok {
			r.drop(ctx, msg, fmt.Sprintf("%T is not a protobuf message, and a proxy can only send to other nodes", m))
			return
		}
	}
	r.deliverMessage(ctx, shard, bufferedMessage{entityID: id, message: m, sender: ctx.Sender(), header: messageHeader(ctx, nil)})
}

func (r *region) onStartEntity(ctx actor.Context, msg *messages.StartEntity) {
	if err := wire.CheckEntityID(msg.GetEntityId()); err != nil {
		r.drop(ctx, msg, fmt.Sprintf("StartEntity: %v", err))
		return
	}
	shard := r.extractor.ShardID(msg.GetEntityId())
	if err := wire.CheckShardID(shard); err != nil {
		r.drop(ctx, msg, fmt.Sprintf("the extractor gives no valid shard for entity %q: %v", msg.GetEntityId(), err))
		return
	}
	r.deliverMessage(ctx, shard, bufferedMessage{entityID: msg.GetEntityId(), message: msg, sender: ctx.Sender()})
}

func (r *region) sendToShard(ctx actor.Context, pid *actor.PID, m bufferedMessage) {
	if se, ok := m.message.(*messages.StartEntity); ok {
		ctx.RequestWithCustomSender(pid, se, m.sender)
		return
	}
	d := &shardproto.Deliver{EntityID: m.entityID, Message: m.message, Pending: m.pending, Header: m.header}
	// No envelope to allocate when nobody waits for an answer.
	shardproto.Tell(ctx, pid, d, m.sender, nil)
}

// messageHeader is the header of the message ctx processes, with extra's
// entries it lacks, to keep with the message (a bufferedMessage has its
// entity ID already): nil if there is none, the usual case.
func messageHeader(ctx actor.Context, extra map[string]string) map[string]string {
	h := shardproto.HeaderOf(ctx.MessageHeader())
	delete(h, entityIDHeader)
	for k, v := range extra {
		if h == nil {
			h = make(map[string]string, len(extra))
		}
		if _, ok := h[k]; !ok {
			h[k] = v
		}
	}
	if len(h) == 0 {
		return nil
	}
	return h
}

// sendToRegion forwards to another node's region. The payload travels in a
// ShardingEnvelope (google.protobuf.Any) until that node confirmed it knows
// the type, then by itself to the region's entry: protoactor-go's remote
// crashes on a top-level type the receiver does not know, while an unknown
// Any payload is only an error that the receiving region reports.
func (r *region) sendToRegion(ctx actor.Context, home *actor.PID, shard string, m bufferedMessage) {
	member, live := r.members[home.Address]
	if !live {
		// No member incarnation to address it to, so nothing would fence
		// it there: it waits until the coordinator names a home on a live
		// member (receiveShardHome ignores the others).
		r.table.forgetHome(shard)
		r.updateRoute(shard)
		r.buffer(ctx, shard, m)
		r.askHome(ctx, shard)
		return
	}
	r.table.homeUsed(shard)
	if se, ok := m.message.(*messages.StartEntity); ok {
		ctx.RequestWithCustomSender(home, se, m.sender)
		return
	}
	pm, ok := m.message.(proto.Message)
	if !ok {
		r.dropBuffered(ctx, shard, m, fmt.Errorf("%T is not a protobuf message, so it cannot reach it on %s: %w", m.message, home.Address, deadletter.ErrNotSerializable))
		return
	}
	tooLarge := func(err error) {
		m.pending.Release()
		deadletters.PublishError(ctx.ActorSystem(), ctx.Self(), m.message, m.sender,
			fmt.Errorf("shard region %s: shard %s, entity %q, to %s: %w", r.typeName, shard, m.entityID, home.Address, err))
	}
	types := r.routes.types.of(member.ID)
	if has(types, pm.ProtoReflect().Descriptor().FullName()) && sendsAsItIs(r.extractor, m.entityID, pm) {
		// The home knows the type: by itself to its entry (see entry.go).
		if err := guard.CheckSize(pm, roomLeft(r.settings.MaxMessageSize, m.header)); err != nil {
			tooLarge(err)
			return
		}
		shardproto.Tell(ctx, actor.NewPID(home.Address, regionEntryName(r.typeName, member.ID)), pm, m.sender, m.header)
		m.pending.Release()
		return
	}
	if out, n, ok := withEntityID(ctx.ActorSystem(), types, m.entityID, nil, pm, m.sender, m.header); ok {
		// The message does not name its entity (an EntityRef's, or one the
		// extractor unwraps): the ID goes with it (see withEntityID).
		if n > r.settings.MaxMessageSize {
			tooLarge(fmt.Errorf("%T with its entity ID encodes to about %d bytes, more than the %d a remote node accepts: %w",
				pm, n, r.settings.MaxMessageSize, deadletter.ErrMessageTooLarge))
			return
		}
		ctx.Send(actor.NewPID(home.Address, regionEntryName(r.typeName, member.ID)), out)
		m.pending.Release()
		return
	}
	payload, err := anypb.New(pm)
	if err != nil {
		r.dropBuffered(ctx, shard, m, fmt.Errorf("cannot encode %T: %w: %w", m.message, deadletter.ErrNotSerializable, err))
		return
	}
	env := &messages.ShardingEnvelope{EntityId: m.entityID, Message: payload, ShardId: shard, ToMemberId: member.ID,
		KnownTypeAckTo: knownTypeAckTo(types, pm, ctx.ActorSystem().Address())}
	if err := guard.CheckSize(env, roomLeft(r.settings.MaxMessageSize, m.header)); err != nil {
		tooLarge(err)
		return
	}
	shardproto.Tell(ctx, home, env, m.sender, m.header)
	m.pending.Release()
}

func (r *region) buffer(ctx actor.Context, shard string, m bufferedMessage) {
	if reason := r.life.refusal(false); reason != nil {
		r.dropBuffered(ctx, shard, m, reason)
		return
	}
	if err := r.buffers.add(shard, m); err != nil {
		r.dropBuffered(ctx, shard, m, err)
		return
	}
	if r.buffers.usageStep() {
		ctx.Logger().Warn("shard region buffer usage", slog.String("type", r.typeName), slog.Int("buffered", r.buffers.len()),
			slog.Int("buffer-size", r.settings.BufferSize))
	}
}

func (r *region) dropBuffer(ctx actor.Context, shard string, reason error) {
	for _, m := range r.buffers.take(shard) {
		r.dropBuffered(ctx, shard, m, reason)
	}
}

// dropBuffered reports m, a message for an entity of shard, as dropped.
func (r *region) dropBuffered(ctx actor.Context, shard string, m bufferedMessage, reason error) {
	m.pending.Release()
	deadletters.PublishError(ctx.ActorSystem(), ctx.Self(), m.message, m.sender,
		fmt.Errorf("shard region %s: shard %s, entity %q: %w", r.typeName, shard, m.entityID, reason))
}

func (r *region) drop(ctx actor.Context, msg any, reason string) {
	deadletters.Publish(ctx.ActorSystem(), ctx.Self(), msg, ctx.Sender(), fmt.Sprintf("shard region %s: %s", r.typeName, reason))
}
