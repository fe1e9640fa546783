package actorsharding

import (
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/deadletters"
	"github.com/protoshard/protoshard/internal/guard"
	"github.com/protoshard/protoshard/internal/shardingadmin"
	"github.com/protoshard/protoshard/internal/shardproto"
	"github.com/protoshard/protoshard/internal/wire"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// routeTable is what a region publishes for its router (regionProcess)
// to route on the sender's goroutine: per shard, whether it runs here and
// takes messages directly, how many of its messages are still on the slow
// way, and its entities that take messages directly. The region actor
// opens and closes shards; the shards open and close their entities
// (shardproto.EntityRoutes).
type routeTable struct {
	system *actor.ActorSystem
	shards sync.Map // shard ID -> *shardRoute
	// entities: the entities of every shard that take messages directly
	// (one lookup on the hot path).
	entities entityMap
	// memberID is this node's member ID, for ShardingEnvelope.to_member_id.
	memberID atomic.Pointer[string]
	// typeName is the region's entity type.
	typeName string
	// types: the message types other members' regions know (see entry.go).
	types knownTypes
}

// shardRoute is one shard's part of the route table; it is the shard's
// shardproto.EntityRoutes. The region retires the route of a shard it
// has no use for (see routeTable.retire); the shard's next message makes
// a new one.
type shardRoute struct {
	table *routeTable
	// pending counts the shard's messages on the slow way (see
	// shardproto.Pending). While it is above zero nothing goes directly.
	// A mark is added with markPending only.
	pending atomic.Int64
	// retired: the region is taking the route out of the table (see
	// routeTable.retire).
	retired atomic.Bool
	// open: the shard runs here, this region is its home, and no old
	// home still forwards to it.
	open atomic.Bool
	// remote: the shard's home on another node, while known; its
	// messages go there straight from the sender.
	remote atomic.Pointer[remoteHome]
}

// remoteHome is a shard's home region on another node.
type remoteHome struct {
	pid      *actor.PID
	memberID string // for ShardingEnvelope.to_member_id
	// entry takes the message types in types without an envelope.
	entry *actor.PID
	types *typeSet
	guard sendGuard
}

// drainYields bounds how often a sender to an entity in use yields to let
// the shard's pending messages arrive: without it, a sender faster than
// the slow way would keep it busy, and never go directly again.
const drainYields = 64

// drained reports whether none of the shard's messages is pending, after
// yielding a little while some are: the sender waits for them rather than
// queue behind them.
func (s *shardRoute) drained() bool {
	for range drainYields {
		if s.pending.Load() == 0 {
			return true
		}
		runtime.Gosched()
	}
	return s.pending.Load() == 0
}

// setRemote makes pid (of member memberID) the shard's remote home.
func (s *shardRoute) setRemote(pid *actor.PID, memberID string) {
	if h := s.remote.Load(); h != nil && h.pid.Equal(pid) && h.memberID == memberID {
		return
	}
	s.closeRemote()
	// PIDs of its own: they cache the remote's process once used.
	s.remote.Store(&remoteHome{pid: actor.NewPID(pid.Address, pid.Id), memberID: memberID,
		entry: actor.NewPID(pid.Address, regionEntryName(s.table.typeName, memberID)), types: s.table.types.of(memberID)})
}

// closeRemote forgets the remote home; it returns once no send to it is
// under way.
func (s *shardRoute) closeRemote() {
	if h := s.remote.Swap(nil); h != nil {
		h.guard.close()
	}
}

// send sends msg, the message for entity r.id of shard, to the home: as
// the sender sent it (r.plain) to the home's entry if the home knows its
// type (with the entity ID in a header if r.plain does not name the
// entity), else msg packed (or packed already: r.packed) into a
// ShardingEnvelope that asks the home to confirm it knows msg's type. It
// does not send if the home was closed, msg cannot be packed, or it is
// over maxSize (the region actor reports why).
func (h *remoteHome) send(root *actor.RootContext, env *actor.MessageEnvelope, shard string, msg proto.Message, r *routing, maxSize int) bool {
	v, ok := h.guard.enter()
	if !ok {
		return false
	}
	defer h.guard.exit()
	switch {
	case r.plain == nil:
	case r.byRef:
		if out, size, ok := withEntityID(root.ActorSystem(), h.types, r.id, r.header, r.plain, senderOf(env), headerOf(env)); ok {
			if size > maxSize {
				return false
			}
			root.Send(h.entry, out)
			h.guard.markUsed(v)
			return true
		}
	case has(h.types, r.plain.ProtoReflect().Descriptor().FullName()):
		if proto.Size(r.plain)+headerSize(headerOf(env)) > maxSize {
			return false
		}
		sendWithSender(root, h.entry, env, r.plain)
		h.guard.markUsed(v)
		return true
	}
	payload := r.packed
	if payload == nil {
		var err error
		if payload, err = anypb.New(msg); err != nil {
			return false
		}
	}
	out := &messages.ShardingEnvelope{EntityId: r.id, Message: payload, ShardId: shard, ToMemberId: h.memberID,
		KnownTypeAckTo: knownTypeAckTo(h.types, msg, root.ActorSystem().Address())}
	// The payload is encoded already: its length and the other fields'
	// bound the envelope's size (tags and lengths take at most 8 bytes
	// each); only near the limit is the exact size worth computing.
	// The message's header (a trace context) goes with it on the wire.
	hs := headerSize(headerOf(env))
	bound := len(payload.GetValue()) + len(payload.GetTypeUrl()) + len(r.id) + len(shard) + len(h.memberID) + len(out.KnownTypeAckTo) + 7*8 + hs
	if bound > maxSize && guard.CheckSize(out, roomLeft(maxSize, headerOf(env))) != nil {
		return false
	}
	sendWithSender(root, h.pid, env, out)
	h.guard.markUsed(v)
	return true
}

// senderOf is env's sender, if any.
func senderOf(env *actor.MessageEnvelope) *actor.PID {
	if env == nil {
		return nil
	}
	return env.Sender
}

// sendWithSender sends msg to pid with the sender and header of env, if
// any.
func sendWithSender(root *actor.RootContext, pid *actor.PID, env *actor.MessageEnvelope, msg any) {
	if env == nil {
		root.Send(pid, msg) // the hot path: a plain send
		return
	}
	if len(env.Header) == 0 && env.Sender != nil && samePointer(env.Message, msg) {
		// env is msg and its sender alone, used once (the remote's, or
		// an EntityRef's): it goes on as it is, not copied into another.
		root.Send(pid, env)
		return
	}
	shardproto.Tell(root, pid, msg, env.Sender, headerOf(env))
}

// samePointer: a and b are one pointer (compared without ==, which
// panics on a value that is not comparable).
func samePointer(a, b any) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return va.Kind() == reflect.Pointer && vb.Kind() == reflect.Pointer && va.Type() == vb.Type() && va.Pointer() == vb.Pointer()
}

// headerOf is env's header, if it has more than the entity ID another
// node's region sent it with (which the entity does not need: an
// untraced message goes on as before, with no header).
func headerOf(env *actor.MessageEnvelope) map[string]string {
	if env == nil || len(env.Header) == 0 {
		return nil
	}
	if _, onlyID := env.Header[entityIDHeader]; onlyID && len(env.Header) == 1 {
		return nil
	}
	return env.Header
}

// entityRoute is a running entity that takes messages directly.
type entityRoute struct {
	shard *shardRoute
	pid   *actor.PID // its process cached in it after the first send
	guard sendGuard
}

// sendGuard counts the direct sends under way to one target, and is
// closed once: close returns when none is under way, and none starts
// after. It also notes whether a send went through (used).
type sendGuard struct {
	state atomic.Int64 // sends under way | guardClosed | guardUsed
}

const (
	guardClosed = int64(1) << 62
	guardUsed   = int64(1) << 61
	guardFlags  = guardClosed | guardUsed
)

// enter starts a send; false: closed.
func (g *sendGuard) enter() (int64, bool) {
	v := g.state.Add(1)
	if v&guardClosed != 0 {
		g.state.Add(-1)
		return v, false
	}
	return v, true
}

// exit ends a send begun with enter.
func (g *sendGuard) exit() { g.state.Add(-1) }

// markUsed notes a send; v is what enter returned.
func (g *sendGuard) markUsed(v int64) {
	if v&guardUsed == 0 {
		g.state.Or(guardUsed)
	}
}

// takeUsed reports whether a send went through since the last call.
func (g *sendGuard) takeUsed() bool {
	return g.state.Load()&guardUsed != 0 && g.state.And(^guardUsed)&guardUsed != 0
}

// close refuses further sends and waits for those under way: each is one
// push onto a mailbox or an endpoint's queue.
func (g *sendGuard) close() {
	g.state.Or(guardClosed)
	for g.state.Load()&^guardFlags != 0 {
		runtime.Gosched()
	}
}

func newRouteTable(system *actor.ActorSystem, typeName string) *routeTable {
	return &routeTable{system: system, typeName: typeName}
}

// shard returns shard's route, made on first use.
func (t *routeTable) shard(id string) *shardRoute {
	if v, ok := t.shards.Load(id); ok {
		return v.(*shardRoute)
	}
	v, _ := t.shards.LoadOrStore(id, &shardRoute{table: t})
	return v.(*shardRoute)
}

// count is the number of shard routes.
func (t *routeTable) count() int {
	n := 0
	t.shards.Range(func(_, _ any) bool { n++; return true })
	return n
}

// count is the number of entity routes.
func (m *entityMap) count() int {
	n := 0
	for i := range m.stripes {
		if cur := m.stripes[i].m.Load(); cur != nil {
			n += len(*cur)
		}
	}
	return n
}

// existing returns shard's route if it has one.
func (t *routeTable) existing(id string) (*shardRoute, bool) {
	v, ok := t.shards.Load(id)
	if !ok {
		return nil, false
	}
	return v.(*shardRoute), true
}

// markPending marks one message of shard id pending on the shard's route
// in the table, which it returns: sr, the route the sender looked up,
// unless the region retired it meanwhile. See retire.
func (t *routeTable) markPending(id string, sr *shardRoute) (*shardRoute, *shardproto.Pending) {
	for {
		p := shardproto.NewPending(&sr.pending)
		if !sr.retired.Load() {
			return sr, p
		}
		// The region may be deleting sr: the mark goes on the route
		// that replaces it (or on sr again, if the region keeps it).
		p.Release()
		runtime.Gosched()
		sr = t.shard(id)
	}
}

// retire takes shard id's route sr out of the table, unless a message of
// the shard is pending on it. The region calls it, for a route through
// which nothing goes directly (not open, no remote home) of a shard it
// holds nothing of; the shard's next message makes a new route, with no
// mark, no home and nothing open, which is all sr has.
//
// Senders run on their own goroutines. One that looked sr up and marks a
// message pending on it must not leave its mark on a route that left the
// table: a later message of the same sender would find the new route's
// count at zero, and might go directly to a home the region learns
// meanwhile, ahead of the first one. So the two meet as in Dekker's
// algorithm, on Go's atomics, which are sequentially consistent: the
// sender adds its mark, then reads retired (markPending); the region sets
// retired, then reads the count. One of them sees the other's write:
// either the region sees the mark and keeps sr (clearing retired again),
// or the sender sees retired, takes its mark back and marks the route
// that the table has then. A route is never deleted with a mark on it,
// and a mark is never kept on a deleted route.
func (t *routeTable) retire(id string, sr *shardRoute) bool {
	if sr.pending.Load() != 0 || sr.open.Load() || sr.remote.Load() != nil {
		return false
	}
	sr.retired.Store(true)
	if sr.pending.Load() != 0 {
		sr.retired.Store(false)
		return false
	}
	t.shards.CompareAndDelete(id, sr)
	return true
}

// sweep retires every route that retire takes of a shard that keep does
// not hold on to, and returns how many routes are left.
func (t *routeTable) sweep(keep func(shard string) bool) (left int) {
	t.shards.Range(func(k, v any) bool {
		if id := k.(string); keep(id) || !t.retire(id, v.(*shardRoute)) {
			left++
		}
		return true
	})
	return left
}

// closeAll closes every shard and remote home (the region stops or was
// removed).
func (t *routeTable) closeAll() {
	t.shards.Range(func(_, v any) bool {
		v.(*shardRoute).open.Store(false)
		v.(*shardRoute).closeRemote()
		return true
	})
}

// Open implements shardproto.EntityRoutes.
func (s *shardRoute) Open(id string, pid *actor.PID) {
	if e := s.table.entities.get(id); e != nil && e.pid == pid {
		return
	}
	if old := s.table.entities.swap(id, &entityRoute{shard: s, pid: pid}); old != nil {
		old.close()
	}
}

// Close implements shardproto.EntityRoutes.
func (s *shardRoute) Close(id string) {
	if e := s.table.entities.remove(id); e != nil {
		e.close()
	}
}

// TakeUsed implements shardproto.EntityRoutes.
func (s *shardRoute) TakeUsed(id string) bool {
	e := s.table.entities.get(id)
	return e != nil && e.guard.takeUsed()
}

// entityMap maps entity IDs to their routes for many readers (senders,
// on every message) and few writers (shards opening and closing routes):
// striped maps, each replaced whole on a change (copy on write), so a
// reader takes no lock and writes nothing. Routes exist only for entities
// in use (see shardproto.EntityRoutes), and a stripe holds 1/1024 of them,
// so the copies stay small.
type entityMap struct {
	stripes [entityStripes]entityStripe
}

const entityStripes = 1024

type entityStripe = cowMap[string, *entityRoute]

// stripe picks id's stripe from its length and last bytes, where IDs
// such as "order-1234" differ most: cheaper than hashing the whole ID on
// every message, and the map hashes it anyway.
func (m *entityMap) stripe(id string) *entityStripe {
	h := uint(len(id))
	if n := len(id); n > 0 {
		h += uint(id[n-1]) * 31
		if n > 1 {
			h += uint(id[n-2]) * 961
		}
		if n > 2 {
			h += uint(id[n-3]) * 29791
		}
	}
	return &m.stripes[h%entityStripes]
}

func (m *entityMap) get(id string) *entityRoute {
	e, _ := m.stripe(id).get(id)
	return e
}

// swap sets id's route and returns the one it replaces, or nil.
func (m *entityMap) swap(id string, e *entityRoute) *entityRoute {
	old, _ := m.stripe(id).swap(id, e)
	return old
}

// remove deletes id's route and returns it, or nil.
func (m *entityMap) remove(id string) *entityRoute {
	e, _ := m.stripe(id).remove(id)
	return e
}

// close refuses further direct sends and waits for those under way.
func (e *entityRoute) close() { e.guard.close() }

// send puts msg in the entity's mailbox, unless the entity was closed.
func (e *entityRoute) send(root *actor.RootContext, env *actor.MessageEnvelope, msg any) bool {
	v, ok := e.guard.enter()
	if !ok {
		return false
	}
	sendWithSender(root, e.pid, env, msg)
	e.guard.markUsed(v)
	e.guard.exit()
	return true
}

// routed is a message the router could route but not send directly: it
// goes through the region actor with what the router worked out, marked
// pending until it reaches its entity.
type routed struct {
	entityID string
	shard    string
	message  any // what the entity receives
	// to is the member incarnation another node's region forwarded the
	// message to ("": a sender of this node). The region checks it again
	// where it delivers: this node may have joined again as another
	// member since the router let it pass.
	to      string
	pending *shardproto.Pending
}

// forwarded reports whether another node's region sent the message.
func (r *routed) forwarded() bool { return r.to != "" }

// regionProcess is the region's PID: an actor.Process that routes on the
// sender's goroutine. A message for an entity that runs here goes straight
// to the entity's mailbox; anything else goes to the region actor, as
// before. A message from another node lands here too (proto.actor's
// remote delivers to the local process), so it costs one hop as well.
type regionProcess struct {
	region    actor.Process // the region actor's own process
	table     *routeTable
	extractor MessageExtractor
	cluster   *membership.Cluster
	// stale is the cluster's membershiphook Stale, resolved once: the
	// routes ask it on every message.
	stale    func() bool
	typeName string
	// hosting: a region that hosts shards; a proxy has no entities to
	// look up, and only sends to other nodes directly.
	hosting bool
	// maxMessageSize: WithMaxMessageSize's, for sends to another node.
	maxMessageSize int
	stopped        atomic.Bool
}

// SendUserMessage implements actor.Process.
func (p *regionProcess) SendUserMessage(pid *actor.PID, message any) {
	p.receive(pid, message, "")
}

// receive takes a message sent to the region's PID (to ""), or to its
// entry for member incarnation to, where only another node's region sends.
func (p *regionProcess) receive(pid *actor.PID, message any, to string) {
	env, _ := message.(*actor.MessageEnvelope)
	msg := message
	var sender *actor.PID
	if env != nil {
		msg, sender = env.Message, env.Sender
	}
	if err := guard.Check(message); err != nil {
		// proto.actor's default mailbox counts a nil message and then
		// cannot take it: the region would spin for ever.
		deadletters.PublishError(p.table.system, pid, msg, sender, fmt.Errorf("shard region %s: %w", p.typeName, err))
		return
	}
	if p.stopped.Load() {
		p.table.system.DeadLetter.SendUserMessage(pid, message)
		return
	}
	if to != "" && !p.isSelf(to) {
		// An entry of an earlier incarnation, closing as the region opens
		// the next one: the region actor would take the message for one of
		// this node's own senders.
		deadletters.PublishError(p.table.system, pid, msg, sender, fmt.Errorf("shard region %s: %w", p.typeName, earlierIncarnation(to)))
		return
	}
	if p.route(pid, env, msg, sender, to) {
		return
	}
	p.region.SendUserMessage(pid, message)
}

// isSelf reports whether memberID is this node's member incarnation, as
// the region last published it.
func (p *regionProcess) isSelf(memberID string) bool {
	self := p.table.memberID.Load()
	return self != nil && *self == memberID
}

// routing is what the router worked out about a message for an entity.
type routing struct {
	id string
	m  any // what the entity receives
	// packed: m's payload, already encoded, if it came in an envelope.
	packed *anypb.Any
	// plain: the sender's own message (no envelope), which goes to
	// another node's region as it is if the type is known there.
	plain proto.Message
	// byRef: plain does not name the entity (an EntityRef sends it, and
	// m is plain): it goes with the ID in a header, header if not nil.
	byRef  bool
	header map[string]string
}

// route sends msg directly, or to the region actor as routed; false: the
// region actor takes msg as it is (a protocol message, or one it drops
// with the reason). to: the member incarnation another node's region
// forwarded msg to, by itself to the entry ("": from a sender of this
// node, or in an envelope that names it).
func (p *regionProcess) route(pid *actor.PID, env *actor.MessageEnvelope, msg any, sender *actor.PID, to string) bool {
	switch em := msg.(type) {
	case *messages.EntityMessage:
		m, err := processTypeIDs.decode(em)
		p.routeCarried(pid, env, em, em.GetEntityId(), m, err, sender, to)
		return true
	case *messages.SequencedMessages:
		p.routeSequenced(pid, env, em, sender, to)
		return true
	case *entityRefMessage:
		m, err := em.msg, em.err()
		if m == nil && err == nil {
			// Set through reflection, not decoded by its own methods.
			m, err = processTypeIDs.decodeBytes(em.id, em.tid, em.raw())
		}
		p.routeCarried(pid, env, em, em.id, m, err, sender, to)
		return true
	}
	if id, ok := carriedEntityID(env, to); ok {
		// Another node's region sent an EntityRef's message: the entity
		// receives it as it is, whatever its type.
		if err := wire.CheckEntityID(id); err != nil {
			deadletters.PublishError(p.table.system, pid, msg, sender, fmt.Errorf("shard region %s: the %s header: %w", p.typeName, entityIDHeader, err))
			return true
		}
		return p.routeTo(pid, env, sender, to, &routing{id: id, m: msg})
	}
	var r routing
	switch x := msg.(type) {
	case *messages.ShardingEnvelope:
		r.id = x.GetEntityId()
		if wire.CheckEntityID(r.id) != nil {
			return false
		}
		if x.GetShardId() != "" && x.GetShardId() != p.extractor.ShardID(r.id) {
			return false
		}
		if t := x.GetToMemberId(); t != "" {
			// Another node's region forwarded it, to that incarnation of
			// this node: the region actor drops it if that is not this one.
			if !p.isSelf(t) {
				return false
			}
			to = t
		}
		var err error
		if r.m, err = unpackEnvelope(x); err != nil {
			return false
		}
		r.packed = x.GetMessage()
		if ack := x.GetKnownTypeAckTo(); ack != "" {
			p.ackKnownType(ack, r.m)
		}
		if hs := x.GetHeaders(); len(hs) > 0 && headerOf(env) == nil {
			// A sender's own envelope with a trace context: it goes on as
			// the message's header, as an EntityRef's does.
			env = &actor.MessageEnvelope{Header: hs, Sender: sender}
		}
	default:
		if isRegionMessage(msg) {
			return false
		}
		var ok bool
		if r.id, ok = entityIDOf(p.extractor, msg); !ok || wire.CheckEntityID(r.id) != nil {
			return false
		}
		var err error
		if r.m, err = p.extractor.UnwrapMessage(msg); err != nil || r.m == nil {
			return false
		}
		r.plain, _ = msg.(proto.Message)
	}
	return p.routeTo(pid, env, sender, to, &r)
}

// routeCarried routes m, the message that carrier (an EntityMessage or
// entityRefMessage) carried for entity id, decoded with err, to that
// entity as route does a message that names it; a message carrier does
// not carry validly is dropped with the reason. carrier must have reached
// the entry of member incarnation to: it came from another node's region,
// with a type ID this process gave.
func (p *regionProcess) routeCarried(pid *actor.PID, env *actor.MessageEnvelope, carrier any, id string, m proto.Message, err error, sender *actor.PID, to string) {
	if to == "" {
		deadletters.PublishError(p.table.system, pid, carrier, sender, fmt.Errorf(
			"shard region %s: a message for entity %q with its type ID reached the region, not its entry, which takes the messages of other nodes' regions: %w",
			p.typeName, id, deadletter.ErrNotSerializable))
		return
	}
	if err == nil {
		err = wire.CheckEntityID(id)
	}
	if err == nil && !p.routeTo(pid, env, sender, to, &routing{id: id, m: m}) {
		err = fmt.Errorf("the extractor gives no valid shard for entity %q: %w", id, messages.ErrInvalidID)
	}
	if err != nil {
		deadletters.PublishError(p.table.system, pid, carrier, sender, fmt.Errorf("shard region %s: %w", p.typeName, err))
	}
}

// sendFor routes msg, which does not name entity id, to that entity as
// route does a message that names it; the entity receives msg itself. An
// EntityRef calls it on its sender's goroutine, as a send to the region's
// PID would; pid is the region's, header entityIDHeaderOf(id) or nil.
func (p *regionProcess) sendFor(pid *actor.PID, env *actor.MessageEnvelope, id string, header map[string]string, msg proto.Message) {
	if p.stopped.Load() {
		if env == nil {
			p.table.system.DeadLetter.SendUserMessage(pid, msg)
		} else {
			p.table.system.DeadLetter.SendUserMessage(pid, &actor.MessageEnvelope{Header: env.Header, Message: msg, Sender: env.Sender})
		}
		return
	}
	if !p.routeTo(pid, env, senderOf(env), "", &routing{id: id, m: msg, plain: msg, byRef: true, header: header}) {
		deadletters.PublishError(p.table.system, pid, msg, senderOf(env),
			fmt.Errorf("shard region %s: the extractor gives no valid shard for entity %q: %w", p.typeName, id, messages.ErrInvalidID))
	}
}

// routeTo sends r's message directly, or to the region actor as routed;
// false: the extractor gives r's entity no valid shard.
func (p *regionProcess) routeTo(pid *actor.PID, env *actor.MessageEnvelope, sender *actor.PID, to string, r *routing) bool {
	// The hot path: one lookup, and the entity's shard says whether it
	// may go directly. Nothing runs in a proxy.
	if p.hosting {
		if e := p.table.entities.get(r.id); e != nil && e.shard.open.Load() && e.shard.drained() && !p.stale() &&
			e.send(p.table.system.Root, env, r.m) {
			return true
		}
	}
	shard := p.extractor.ShardID(r.id)
	if wire.CheckShardID(shard) != nil {
		return false
	}
	sr := p.table.shard(shard)
	if h := p.straightHome(sr); h != nil && to == "" {
		// Its home is another node: one hop there, as a raw remote send.
		// Not forwarded: r is the sender's own message (or envelope).
		if pm, ok := r.m.(proto.Message); ok && h.send(p.table.system.Root, env, shard, pm, r, p.maxMessageSize) {
			return true
		}
	}
	_, pending := p.table.markPending(shard, sr)
	rt := &routed{entityID: r.id, shard: shard, message: r.m, to: to, pending: pending}
	if env != nil {
		p.region.SendUserMessage(pid, &actor.MessageEnvelope{Header: env.Header, Message: rt, Sender: sender})
	} else {
		p.region.SendUserMessage(pid, rt)
	}
	return true
}

// straightHome is the home on another node to which a message of shard
// route sr from a sender of this node goes straight: the home is known
// and a live member's, none of the shard's messages is still on the slow
// way (the message would overtake them), and this node's membership is
// not stale. nil: the message goes through the region actor.
func (p *regionProcess) straightHome(sr *shardRoute) *remoteHome {
	if h := sr.remote.Load(); h != nil && sr.pending.Load() == 0 && !p.stale() {
		return h
	}
	return nil
}

// earlierIncarnation is the reason a message forwarded to member to, an
// earlier incarnation of this node, is dropped: its sender's later
// messages may have gone to where the shard lives now, and it must not
// overtake them.
func earlierIncarnation(to string) error {
	return fmt.Errorf("message forwarded to member %q, an earlier incarnation of this node (removed since); dropped so it cannot overtake its sender's later messages: %w",
		to, deadletter.ErrMemberRemoved)
}

// ackKnownType tells the region of this type on the member at address
// that this node knows m's type, if that is a member's address.
func (p *regionProcess) ackKnownType(address string, m any) {
	pm, ok := m.(proto.Message)
	self := p.table.memberID.Load()
	if !ok || self == nil || !slices.ContainsFunc(p.cluster.Members(), func(mb membership.Member) bool { return mb.Address == address }) {
		return
	}
	p.table.system.Root.Send(actor.NewPID(address, shardingadmin.RegionName(p.typeName)),
		&messages.MessageTypeKnown{TypeName: string(pm.ProtoReflect().Descriptor().FullName()), MemberId: *self, EntityIdHeader: true,
			TypeId: processTypeIDs.idOf(pm.ProtoReflect().Type()), EntityRefMessage: entityRefRegistered, SequencedMessages: true})
}

// SendSystemMessage implements actor.Process.
func (p *regionProcess) SendSystemMessage(pid *actor.PID, message any) {
	p.region.SendSystemMessage(pid, message)
}

// Stop implements actor.Process.
func (p *regionProcess) Stop(pid *actor.PID) { p.region.Stop(pid) }

// isRegionMessage tells the messages the region actor handles itself from
// those for entities: the router never routes them.
func isRegionMessage(msg any) bool {
	switch msg.(type) {
	case actor.SystemMessage, actor.AutoReceiveMessage, *actor.DeadLetterResponse, *actor.ReceiveTimeout,
		retryTick, restartShard, getRouteCounts, *SetActiveEntityLimit, *shardproto.HandOffReturned,
		*membership.CurrentClusterState, membership.MemberUp, membership.MemberLeft, membership.MemberRemoved:
		return true
	}
	return wire.IsProtocol(msg)
}

// installRouter puts router in front of the region actor spawned as pid:
// the process registry resolves the region's ID to router from now on.
// It returns a PID of the region with no process cached in it (a PID
// caches the process it first resolved: the region actor's own PID, used
// before, may hold the actor's process).
func installRouter(system *actor.ActorSystem, pid *actor.PID, router *regionProcess) (*actor.PID, error) {
	proc, ok := system.ProcessRegistry.GetLocal(pid.Id)
	if !ok {
		return nil, fmt.Errorf("region %s is not in the process registry", pid.Id)
	}
	router.region = proc
	system.ProcessRegistry.LocalPIDs.GetBucket(pid.Id).Set(pid.Id, router)
	return actor.NewPID(pid.Address, pid.Id), nil
}
