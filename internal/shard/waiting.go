package shard

import (
	"fmt"
	"time"

	"github.com/protoshard/protoshard/deadletter"
)

// errWaitingFull: the shard holds as many waiting messages as it may.
var errWaitingFull = fmt.Errorf("too many messages wait for the shard to be ready: %w", deadletter.ErrBufferFull)

// waitingMessages holds, in arrival order, what reaches a shard that is not
// ready yet (acquiring its lease, reading its remembered entities), to be
// handled in the same order once it is. proto.actor's ctx.Stash would only
// give them back after a restart.
type waitingMessages struct {
	msgs []bufferedMessage
}

// add keeps m unless max messages wait already (errWaitingFull).
func (w *waitingMessages) add(m bufferedMessage, max int) error {
	if len(w.msgs) >= max {
		return errWaitingFull
	}
	w.msgs = append(w.msgs, m)
	return nil
}

// expire takes the messages that have waited longer than bound at now, the
// oldest first, to drop.
func (w *waitingMessages) expire(now time.Time, bound time.Duration) []bufferedMessage {
	n := 0
	for n < len(w.msgs) && now.Sub(w.msgs[n].since) > bound {
		n++
	}
	if n == 0 {
		return nil
	}
	out := make([]bufferedMessage, n)
	copy(out, w.msgs[:n])
	w.msgs = append(w.msgs[:0], w.msgs[n:]...)
	return out
}

// take hands back every waiting message, in order, and holds none after.
func (w *waitingMessages) take() []bufferedMessage {
	out := w.msgs
	w.msgs = nil
	return out
}

// len counts the waiting messages.
func (w *waitingMessages) len() int { return len(w.msgs) }
