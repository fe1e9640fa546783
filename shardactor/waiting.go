package shardactor

import "errors"

// errWaitingFull: the shard holds as many waiting messages as it may.
var errWaitingFull = errors.New("too many messages wait for the shard to be ready")

// waitingMessages holds, in arrival order, what reaches a shard that is not
// ready yet (reading its remembered entities), to be handled in the same
// order once it is. proto.actor's ctx.Stash would only give them back
// after a restart.
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

// take hands back every waiting message, in order, and holds none after.
func (w *waitingMessages) take() []bufferedMessage {
	out := w.msgs
	w.msgs = nil
	return out
}

// len counts the waiting messages.
func (w *waitingMessages) len() int { return len(w.msgs) }
