package actorsharding

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
)

// deliveryAction is where a region sends a message for a shard (Akka's
// deliverMessage), as decideDelivery chooses it.
type deliveryAction int

const (
	// deliverToShard: to the shard's running child on this node.
	deliverToShard deliveryAction = iota + 1
	// deliverDropRemoved: this member was removed from the cluster and
	// has not joined again (errRemoved).
	deliverDropRemoved
	// deliverDropStale: this node's membership is stale (errStale).
	deliverDropStale
	// deliverBuffer: into the shard's buffer, behind what waits there.
	deliverBuffer
	// deliverBufferAndAsk: into the shard's buffer; its home is unknown,
	// so the region asks the coordinator for it.
	deliverBufferAndAsk
	// deliverStartShard: this region is the home but no child of the
	// shard is alive: start one, then send to it.
	deliverStartShard
	// deliverToRegion: to the home, another node's region.
	deliverToRegion
)

// String names the action, for tests and logs.
func (a deliveryAction) String() string {
	switch a {
	case deliverToShard:
		return "toShard"
	case deliverDropRemoved:
		return "dropRemoved"
	case deliverDropStale:
		return "dropStale"
	case deliverBuffer:
		return "buffer"
	case deliverBufferAndAsk:
		return "bufferAndAsk"
	case deliverStartShard:
		return "startShard"
	case deliverToRegion:
		return "toRegion"
	}
	return fmt.Sprintf("deliveryAction(%d)", int(a))
}

// shardView is what a region knows of one shard when a message for it
// arrives: the input of decideDelivery.
type shardView struct {
	removed      bool // this member was removed and has not joined again
	shuttingDown bool // the region shuts down gracefully
	// awaiting: the shard's old home still forwards to this region, its
	// new home (see handOffs.awaits).
	awaiting   bool
	buffered   bool // the shard has buffered messages
	known      bool // the shard's home is known
	homeIsSelf bool // ... and it is this region
	running    bool // the shard's child runs here
	alive      bool // the shard has a child here, in any state
}

// shardViewOf is what the region's values say of shard.
func shardViewOf(t *shardTable, b *shardBuffers, h *handOffs, shard string, removed, shuttingDown bool) (shardView, *actor.PID) {
	home, known := t.home(shard)
	pid, running := t.running(shard)
	return shardView{removed: removed, shuttingDown: shuttingDown, awaiting: h.awaits(shard), buffered: b.has(shard),
		known: known, homeIsSelf: known && t.isSelf(home), running: running, alive: t.alive(shard)}, pid
}

// decideDelivery is where a message for a shard goes, given what the
// region knows of the shard (v), whether another region forwarded it
// here, and, asked only off the hot path, whether this node's membership
// is stale (the shard checks that itself for what reaches its mailbox).
//
// Order is what it keeps: a message waits behind what the shard's buffer
// holds, except that while the shard's old home still forwards to this
// new home, what other regions send is that forwarding, and goes ahead of
// what this region's own senders buffered; those wait for the end of it.
func decideDelivery(v shardView, forwarded bool, stale func() bool) deliveryAction {
	if v.removed {
		return deliverDropRemoved
	}
	ahead := false
	if v.awaiting {
		if !forwarded {
			return deliverBuffer
		}
		ahead = true
	}
	if v.known && (ahead || !v.buffered) && v.homeIsSelf && v.running {
		return deliverToShard
	}
	if stale() {
		// Paused or cut off past the TTL: the others may have removed this
		// node and started its shards elsewhere, and it has not heard yet.
		return deliverDropStale
	}
	switch {
	case v.buffered && !ahead:
		return deliverBuffer // older messages wait for the home: keep the order
	case !v.known:
		return deliverBufferAndAsk
	case v.homeIsSelf && (v.shuttingDown || v.alive):
		// See receiveShardHome; or an earlier child of the shard still
		// stops: the message waits for its Terminated.
		return deliverBuffer
	case v.homeIsSelf:
		return deliverStartShard
	}
	return deliverToRegion
}

// releaseBuffered takes, of what shard's buffer holds, what goes on now
// that its home is known or its old home's forwarding ended: while the old
// home still forwards (awaiting), only what other regions forwarded; at
// the home itself (homeIsSelf), what they forwarded first, since the old
// home's forwarding holds messages older than this region's own senders';
// elsewhere all of it, in order.
func (b *shardBuffers) releaseBuffered(shard string, awaiting, homeIsSelf bool) []bufferedMessage {
	switch {
	case awaiting:
		return b.takeForwarded(shard)
	case homeIsSelf:
		return append(b.takeForwarded(shard), b.take(shard)...)
	}
	return b.take(shard)
}

// usageStep reports whether the buffer has just filled another tenth of
// its limit: the region logs its usage then, not on every message.
func (b *shardBuffers) usageStep() bool {
	step := b.Limit() / 10
	return step > 0 && b.Len()%step == 0
}

// routeState is how the router reaches shard: open, straight to the
// running child, while it runs here, this region is its home, no old home
// still forwards to it and the region hosts shards and was not removed;
// remote, to the home's region, when it is another live member's.
func routeState(v shardView, proxy, remoteHomeLive bool) (open, remote bool) {
	open = !proxy && v.running && !v.removed && v.homeIsSelf && !v.awaiting
	remote = v.known && remoteHomeLive && !v.removed && !v.homeIsSelf
	return open, remote
}
