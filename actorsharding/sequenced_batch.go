package actorsharding

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/deadletters"
	"github.com/protoshard/protoshard/internal/entityrefs"
	"github.com/protoshard/protoshard/internal/wire"
	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// A reliable-delivery producer takes its queued Sends whole in each turn,
// hundreds at a time under load, and sends each numbered message through
// its entity's ref. To an entity on another node, proto.actor's remote
// costs about as much per message as the reliable message itself: an
// envelope, the target's and the sender's lookups and a serializer call on
// the sender, the decoding, a MessageEnvelope and the dispatch on the
// receiver. So the SequencedMessages that one turn sends straight to one
// node's region entry go there together, in one SequencedMessages with the
// producer as its one sender, and the receiving region routes each as if
// it had come alone (regionProcess.routeSequenced).

// takesSequencedMessages is noted in a member's set of known types once its
// regions said they take SequencedMessages
// (MessageTypeKnown.sequenced_messages); a region of an earlier version
// would close the stream on the unknown type.
const takesSequencedMessages protoreflect.FullName = "protoshard.sequenced-messages"

// sequencedMessageName is the type a batch carries; a home must know it
// as well (its messages then go to the entry by themselves).
var sequencedMessageName = (&messages.SequencedMessage{}).ProtoReflect().Descriptor().FullName()

// maxSequencedBatch bounds a batch's encoded size, well under gRPC's
// 4 MB: a batch is one message on the remote's stream, and a long one
// would delay the messages of other senders behind it.
const maxSequencedBatch = 64 << 10

// sequencedBatch is the entityrefs.Batch of one producer. A message joins
// it only if the router would send it straight to a remote home, as
// routeTo does: its entity does not run here, its shard has a home on
// another live member and nothing on the slow way, this node's membership
// is not stale, it names its entity, it has a sender and fits the size
// limit, and the home said it takes batches. Anything else first sends
// what is held, then goes alone: the order is that of the Sends.
//
// A held message keeps its home open: it entered the home's sendGuard,
// and leaves it once sent, so the region cannot close the home (and send
// the shard's messages another way) under it. The region actor then waits
// in closeRemote for at most the rest of the producer's turn.
type sequencedBatch struct {
	sender *actor.PID
	root   *actor.RootContext
	// nodes holds, per entry, what goes there, in the order of their
	// first message; a producer talks to few nodes.
	nodes []*nodeBatch
}

// nodeBatch is what a batch holds for one node's region entry.
type nodeBatch struct {
	entry *actor.PID
	msgs  []*messages.SequencedMessage
	// homes are the shard homes the messages entered, one per message.
	homes []heldHome
	size  int // the SequencedMessages' encoded size
	limit int
}

// heldHome is a home a held message entered, with what enter returned.
type heldHome struct {
	home *remoteHome
	v    int64
}

func init() {
	entityrefs.NewBatch = func() entityrefs.Batch { return &sequencedBatch{} }
}

// Send implements entityrefs.Batch.
func (b *sequencedBatch) Send(ref any, msg any, sender *actor.PID) error {
	if e, ok := ref.(*EntityRef); ok && e != nil && sender != nil {
		if m, ok := msg.(*messages.SequencedMessage); ok && m != nil && b.hold(e, m, sender) {
			return nil
		}
	}
	b.Flush()
	return entityrefs.SendFrom(ref, msg, sender)
}

// hold adds m, from sender, to the batch; false: m cannot join and must go
// alone (the batch was sent if sender is not its sender).
func (b *sequencedBatch) hold(e *EntityRef, m *messages.SequencedMessage, sender *actor.PID) bool {
	p := e.router
	if e.sharding == nil || p == nil || p.stopped.Load() || !namesEntity(e.extractor, m, e.id) {
		return false
	}
	if p.hosting && p.table.entities.get(e.id) != nil {
		return false // it runs here: the direct path
	}
	shard := p.extractor.ShardID(e.id)
	if wire.CheckShardID(shard) != nil {
		return false
	}
	sr, ok := p.table.existing(shard)
	if !ok {
		return false
	}
	h := p.straightHome(sr)
	if h == nil || !has(h.types, takesSequencedMessages) || !has(h.types, sequencedMessageName) {
		return false
	}
	n := proto.Size(m)
	if n > p.maxMessageSize {
		return false // alone, it is refused with the reason
	}
	if b.sender != nil && !b.sender.Equal(sender) {
		b.Flush()
	}
	v, ok := h.guard.enter()
	if !ok {
		return false // closed meanwhile
	}
	b.sender, b.root = sender, e.sharding.system.Root
	nb := b.node(h.entry, min(maxSequencedBatch, p.maxMessageSize))
	add := protowire.SizeTag(1) + protowire.SizeBytes(n)
	if len(nb.msgs) > 0 && nb.size+add > nb.limit {
		nb.send(b.root, b.sender)
	}
	nb.msgs = append(nb.msgs, m)
	nb.homes = append(nb.homes, heldHome{home: h, v: v})
	nb.size += add
	return true
}

// node is the part of the batch for entry, made on first use.
func (b *sequencedBatch) node(entry *actor.PID, limit int) *nodeBatch {
	for _, nb := range b.nodes {
		if nb.entry.Equal(entry) {
			return nb
		}
	}
	nb := &nodeBatch{entry: entry, limit: limit}
	b.nodes = append(b.nodes, nb)
	return nb
}

// Flush implements entityrefs.Batch.
func (b *sequencedBatch) Flush() {
	for _, nb := range b.nodes {
		nb.send(b.root, b.sender)
	}
	b.nodes = b.nodes[:0]
	b.sender, b.root = nil, nil
}

// send sends what nb holds, a batch of one as the message alone, and
// leaves the homes its messages entered.
func (nb *nodeBatch) send(root *actor.RootContext, sender *actor.PID) {
	if len(nb.msgs) == 0 {
		return
	}
	var out any = nb.msgs[0]
	if len(nb.msgs) > 1 {
		// Its own slice: the remote encodes it later, on its writer.
		out = &messages.SequencedMessages{Messages: nb.msgs}
	}
	root.Send(nb.entry, envelopeFor(out, sender))
	for _, hh := range nb.homes {
		hh.home.guard.markUsed(hh.v)
		hh.home.guard.exit()
	}
	nb.msgs = nil
	clear(nb.homes)
	nb.homes = nb.homes[:0]
	nb.size = 0
}

// routeSequenced routes each message of batch, in order, as if it had
// come alone with the batch's sender and header; a nil one is dropped with
// the reason, and the others still go.
func (p *regionProcess) routeSequenced(pid *actor.PID, env *actor.MessageEnvelope, batch *messages.SequencedMessages, sender *actor.PID, to string) {
	if batch == nil {
		deadletters.PublishError(p.table.system, pid, batch, sender, fmt.Errorf("shard region %s: nil batch: %w", p.typeName, deadletter.ErrNilMessage))
		return
	}
	var header map[string]string
	if env != nil {
		header = env.Header
	}
	for i, m := range batch.GetMessages() {
		if m == nil {
			deadletters.PublishError(p.table.system, pid, batch, sender,
				fmt.Errorf("shard region %s: message %d of a batch of reliable-delivery messages: %w", p.typeName, i, deadletter.ErrNilMessage))
			continue
		}
		if sender == nil && header == nil {
			if !p.route(pid, nil, m, nil, to) {
				p.region.SendUserMessage(pid, m)
			}
			continue
		}
		one := &actor.MessageEnvelope{Header: header, Message: m, Sender: sender}
		if !p.route(pid, one, m, sender, to) {
			p.region.SendUserMessage(pid, one)
		}
	}
}
