package coordinator

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/messages"
)

// errStashFull: the coordinator's stash holds Settings.StashCapacity
// messages already.
var errStashFull = errors.New("the coordinator's stash is full")

// stashed is a message the coordinator put aside, with its sender and
// when the first of its repeats came.
type stashed struct {
	message any
	sender  *actor.PID
	at      time.Time
}

// stash holds what the coordinator cannot handle yet (Akka's stash in
// waitingForState), in arrival order and bounded. A message that repeats
// one stashed already (see stashKey) takes the place of the first instead
// of a place of its own: regions resend Register and GetShardHome every
// retry interval, and a coordinator that waits long for its state would
// otherwise stash, and then answer, each request many times.
type stash struct {
	capacity int
	entries  []stashed
	index    map[string]int // stashKey -> position in entries
}

func newStash(capacity int) stash {
	return stash{capacity: capacity, index: map[string]int{}}
}

// add stashes msg from sender, come at now. It reports whether msg
// repeated a message stashed already (and replaced it, keeping when the
// first came); past the capacity it fails with errStashFull and keeps
// nothing.
func (s *stash) add(msg any, sender *actor.PID, now time.Time) (repeat bool, err error) {
	return s.put(stashed{message: msg, sender: sender, at: now})
}

// put stashes e as add does; e.at is when it first came.
func (s *stash) put(e stashed) (repeat bool, err error) {
	key := stashKey(e.message, e.sender)
	if i, ok := s.index[key]; ok && key != "" {
		e.at = s.entries[i].at
		s.entries[i] = e
		return true, nil
	}
	if len(s.entries) >= s.capacity {
		return false, fmt.Errorf("%w (%d messages)", errStashFull, s.capacity)
	}
	if key != "" {
		s.index[key] = len(s.entries)
	}
	s.entries = append(s.entries, e)
	return false, nil
}

// len is how many messages the stash holds.
func (s *stash) len() int { return len(s.entries) }

// take returns the stashed messages, oldest first, and empties the stash.
func (s *stash) take() []stashed {
	out := s.entries
	s.entries = nil
	clear(s.index)
	return out
}

// stashKey names what a message asks for, so that its repeats are
// stashed once: the same GetShardHome from the same sender, any Register,
// RegisterProxy, GracefulShutdownReq or RegionStopped of the same region
// (the latest says most). "" for a message kept however often it comes.
func stashKey(msg any, sender *actor.PID) string {
	switch m := msg.(type) {
	case *messages.GetShardHome:
		return "GetShardHome\x00" + m.GetShard() + "\x00" + RegionKey(sender)
	case *messages.Register:
		return "Register\x00" + RegionKey(m.GetShardRegion())
	case *messages.RegisterProxy:
		return "RegisterProxy\x00" + RegionKey(m.GetShardRegionProxy())
	case *messages.GracefulShutdownReq:
		return "GracefulShutdownReq\x00" + RegionKey(m.GetShardRegion())
	case *messages.RegionStopped:
		return "RegionStopped\x00" + RegionKey(m.GetShardRegion())
	}
	return ""
}
