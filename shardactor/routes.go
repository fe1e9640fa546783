package shardactor

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// EntityRoutes lets a region send to its shard's running entities straight
// from the sender's goroutine, one mailbox hop instead of three (region,
// shard, entity). The shard opens an entity once it runs and has had every
// message that waited for it, and closes it before anything that stops it
// (passivation, hand-off, the shard's own stop): what a region sends it
// afterwards goes through the region and the shard again, which hold it
// for the entity's next incarnation as before.
//
// Routes are a cache of the entities in use: the shard opens an entity
// when a message reaches it through the shard while it runs (not for the
// message that starts it, so an entity used once costs no route), and its
// idle check closes the routes no message used since the check before.
// Automatic passivation needs to know which entities are used: TakeUsed
// tells the idle check what reached an entity directly. With an
// active-entity limit, whose replacement policy orders entities by each
// use, the shard opens none.
type EntityRoutes interface {
	// Open lets messages for entity id go straight to pid's mailbox; a
	// route already open to pid stays as it is.
	Open(id string, pid *actor.PID)
	// Close stops that. It returns once no direct send to id is under
	// way, so what the shard sends the entity next (its stop message)
	// comes after every message sent to it directly.
	Close(id string)
	// TakeUsed reports whether a message reached id directly since the
	// last call.
	TakeUsed(id string) bool
}

// Pending marks one message on its way to an entity through the region's
// and the shard's mailboxes. While any message of a shard is pending, the
// region sends none of that shard's messages directly, so no message
// overtakes one of the same sender still on the slow way. Release ends the
// mark, once: when the message is in its entity's mailbox, forwarded to
// another node, or dropped. A nil Pending marks nothing.
type Pending struct {
	count *atomic.Int64
	done  atomic.Bool
}

// NewPending marks one message of the shard whose pending messages count
// counts.
func NewPending(count *atomic.Int64) *Pending {
	count.Add(1)
	return &Pending{count: count}
}

// Release ends the mark; later calls do nothing.
func (p *Pending) Release() {
	if p != nil && p.done.CompareAndSwap(false, true) {
		p.count.Add(-1)
	}
}

// openRoute lets the region send to the running entity id (pid)
// directly, unless the active-entity limit needs to see every use.
func (s *shard) openRoute(id string, pid *actor.PID) {
	if s.settings.Routes == nil || s.limit.limit() > 0 {
		return
	}
	s.settings.Routes.Open(id, pid)
}

// closeRoute makes messages for id come through the shard again.
func (s *shard) closeRoute(id string) {
	if s.settings.Routes != nil {
		s.settings.Routes.Close(id)
	}
}

// closeAllRoutes closes every live entity's route.
func (s *shard) closeAllRoutes() {
	if s.settings.Routes == nil {
		return
	}
	for _, id := range s.entities.liveIDs() {
		s.settings.Routes.Close(id)
	}
}

// foldDirectUse counts what reached active entities directly as a use,
// for the idle check, and closes the routes nothing used since the check
// before: an idle entity keeps no route.
func (s *shard) foldDirectUse() {
	if s.settings.Routes == nil {
		return
	}
	for _, id := range s.entities.liveIDs() {
		if s.settings.Routes.TakeUsed(id) {
			s.entities.markUsed(id)
		} else {
			s.settings.Routes.Close(id)
		}
	}
}
