package shard

import (
	"fmt"
	"time"

	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/msgbuffer"
)

// errWaitingFull: the shard holds as many waiting messages as it may.
var errWaitingFull = fmt.Errorf("too many messages wait for the shard to be ready: %w", deadletter.ErrBufferFull)

// waitingMessages holds, in arrival order, what reaches a shard that is not
// ready yet (acquiring its lease, reading its remembered entities), to be
// handled in the same order once it is. proto.actor's ctx.Stash would only
// give them back after a restart.
type waitingMessages struct {
	buf msgbuffer.Buffer[struct{}, bufferedMessage] // one queue: a single key
}

// newWaitingMessages holds at most max messages.
func newWaitingMessages(max int) waitingMessages {
	return waitingMessages{buf: msgbuffer.New[struct{}, bufferedMessage](max)}
}

// add keeps m unless as many messages as it may hold wait already
// (errWaitingFull).
func (w *waitingMessages) add(m bufferedMessage) error {
	if !w.buf.Add(struct{}{}, m) {
		return errWaitingFull
	}
	return nil
}

// expire takes the messages that have waited longer than bound at now, the
// oldest first, to drop.
func (w *waitingMessages) expire(now time.Time, bound time.Duration) []bufferedMessage {
	return w.buf.TakeWhile(struct{}{}, func(m bufferedMessage) bool { return now.Sub(m.since) > bound })
}

// take hands back every waiting message, in order, and holds none after.
func (w *waitingMessages) take() []bufferedMessage { return w.buf.Take(struct{}{}) }

// len counts the waiting messages.
func (w *waitingMessages) len() int { return w.buf.Len() }
