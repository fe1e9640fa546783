package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/coordinatoractor"
)

// The coordinator's store I/O: the load at its start, the claim and the
// writes of its events, off the actor's goroutine, and their results.

// Internal messages of the store I/O.
type (
	stateLoaded struct {
		state   State
		version uint64
		err     error
	}
	// stateWritten: the write in flight is over; version is the store's
	// new version of the state when err is nil.
	stateWritten struct {
		version uint64
		err     error
	}
	reloadState struct{}
)

// errEventRejected: an event that does not apply to the state, or a state
// the store refuses to hold (too large, invalid). The state is as it was
// and the coordinator goes on; the message that caused it is dropped.
var errEventRejected = errors.New("state change rejected")

// errStopped: the store failed and the coordinator is stopping; the caller
// must stop handling its message.
var errStopped = errors.New("the coordinator is stopping")

// load reads the state off the actor's goroutine: a Consul read may take
// a while, and the coordinator must keep taking (stashing) messages.
func (c *coordinator) load(ctx actor.Context) {
	self := ctx.Self()
	root := ctx.ActorSystem().Root
	timeout := c.settings.WaitingForStateTimeout
	store := c.store
	go func() {
		lctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		st, v, err := LoadState(lctx, store)
		root.Send(self, &stateLoaded{state: st, version: v, err: err})
	}()
}

// onStateLoaded takes the state read at the start, or reads it again
// after the back-off when the read failed.
func (c *coordinator) onStateLoaded(ctx actor.Context, msg *stateLoaded) {
	if msg.err != nil {
		c.log.Warn("shard coordinator: cannot read its state; retrying", slog.Any("error", msg.err),
			slog.Duration("backoff", c.settings.CoordinatorFailureBackoff))
		c.timers.SendOnce(c.settings.CoordinatorFailureBackoff, ctx.Self(), reloadState{})
		return
	}
	st := claimable(msg.state, c.settings.RememberEntities)
	// Writing the state back at once (startWrite, once this message
	// is handled) claims it: a stale coordinator that still runs
	// elsewhere fails its next check-and-set. The version claimed is
	// this coordinator's epoch. What the coordinator decides on the
	// state read (the stash, the regions of gone members, remembered
	// shards) goes in the same write, and is acted on once it
	// succeeded (see stateWrites).
	if err := c.writes.load(st, msg.version); err != nil {
		c.storeFailed(ctx, err)
		return
	}
	c.activate(ctx)
}

// storeFailed: the state in the store is not what this coordinator thinks
// (ErrVersionConflict: a newer coordinator claimed it, so this one is
// stale), or the store did not confirm the write (it may or may not have
// happened). Either way this coordinator can no longer speak for the
// state: it stops, with its workers and timers. Its supervisor starts a
// fresh one after the back-off, which reads the state and claims it under
// a new epoch; never this one, which would overwrite a newer coordinator.
// What waited for a write, or in the stash, is dropped with the reason.
func (c *coordinator) storeFailed(ctx actor.Context, err error) {
	msg := "shard coordinator: state write failed; stopping (a new coordinator starts after the back-off)"
	if errors.Is(err, coordinatoractor.ErrVersionConflict) {
		msg = "shard coordinator: another coordinator wrote the state, so this one is stale; stopping"
	}
	c.log.Error(msg, slog.Any("error", err), slog.Uint64("epoch", c.epoch))
	c.become(ctx, StateStopped, c.stopped)
	c.dropUnwritten(ctx, fmt.Errorf("%w: %w", errStopped, err))
	ctx.Stop(ctx.Self())
}

// dropUnwritten drops what waits for a write, in the stash or held for
// its member (see holdEarly): the coordinator stops.
func (c *coordinator) dropUnwritten(ctx actor.Context, why error) {
	refuseAll(ctx, c.writes.abandon(), why)
	for _, s := range append(c.stash.take(), c.early.take()...) {
		c.drop(ctx, s.message, s.sender, why.Error())
	}
}

// refuseAll tells the updates that their write never succeeds.
func refuseAll(ctx actor.Context, updates []update, why error) {
	for _, u := range updates {
		if u.refused != nil {
			u.refused(ctx, why)
		}
	}
}

// update applies u.event to the state at once and queues it for the next
// write (see stateWrites); u.then runs once that write succeeded, u.refused
// if it never will be. A nil error means the event applied;
// errEventRejected, that it does not fit the state, which is unchanged;
// errStopped, that the coordinator is stopping.
func (c *coordinator) update(u update) error {
	if c.stateName != StateActive {
		return errStopped
	}
	if err := c.writes.apply(u); err != nil {
		c.log.Warn("shard coordinator: event does not apply; ignored", slog.Any("error", err))
		return fmt.Errorf("%w: %v", errEventRejected, err)
	}
	c.log.Debug("shard coordinator event", slog.String("event", u.event.String()))
	return nil
}

// whenWritten runs then once every change made so far is written: at once
// when it is, otherwise after the write that carries the last one (refused
// instead if that write never succeeds). A reply whose key waits already is
// not queued twice.
func (c *coordinator) whenWritten(ctx actor.Context, key string, then func(actor.Context), refused func(actor.Context, error)) {
	if !c.writes.wait(key, then, refused) {
		then(ctx)
	}
}

// startWrite writes the state with every event not yet written, off the
// actor, unless a write is in flight already (its stateWritten starts the
// next one); the claim first of all.
func (c *coordinator) startWrite(ctx actor.Context) {
	if c.stateName == StateStopped || c.replaying {
		return
	}
	snapshot, version, ok := c.writes.begin()
	if !ok {
		return
	}
	self, root, store, timeout, m := ctx.Self(), ctx.ActorSystem().Root, c.store, c.settings.UpdatingStateTimeout, c.metrics
	go func() {
		wctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		started := time.Now()
		v, err := SaveState(wctx, store, snapshot, version)
		m.StateWrite(time.Since(started), writeOutcome(err))
		root.Send(self, &stateWritten{version: v, err: err})
	}()
}

// onStateWritten ends the write in flight (see stateWrites.ended) and
// runs what waited for it; the claim also sets the epoch. After a refused
// write the state is the one last written again: regions whose
// termination was dropped are watched again (one that is gone is
// reported again), and those of removed members terminated again.
func (c *coordinator) onStateWritten(ctx actor.Context, msg *stateWritten) {
	end := c.writes.ended(msg.version, msg.err)
	switch {
	case end.fail != nil:
		c.storeFailed(ctx, end.fail)
	case end.cause != nil:
		c.log.Error("shard coordinator: the store refuses the state after these changes; they are dropped",
			slog.Int("updates", len(end.refused)), slog.Any("error", end.cause))
		refuseAll(ctx, end.refused, fmt.Errorf("%w: %w", errEventRejected, end.cause))
		c.watchRegions(ctx)
		c.terminateGoneMembers(ctx)
	default:
		if end.claim {
			c.epoch = c.writes.version
			c.log.Debug("shard coordinator claimed its state", slog.Uint64("epoch", c.epoch))
		}
		c.log.Debug("shard coordinator state written", slog.Int("updates", len(end.done)), slog.Uint64("version", msg.version))
		for _, u := range end.done {
			if u.then != nil {
				u.then(ctx)
			}
		}
	}
}

// LoadState reads and decodes the state. A store with nothing stored
// gives the empty state at version 0.
func LoadState(ctx context.Context, store coordinatoractor.StateStore) (State, uint64, error) {
	data, v, err := store.Load(ctx)
	if err != nil {
		return State{}, 0, err
	}
	st, err := DecodeState(data)
	if err != nil {
		return State{}, 0, fmt.Errorf("state at version %d: %w", v, err)
	}
	return st, v, nil
}

// SaveState encodes the state and writes it with a check-and-set on
// version. A state that could not be loaded again fails with
// ErrInvalidState before the store sees it.
func SaveState(ctx context.Context, store coordinatoractor.StateStore, st State, version uint64) (uint64, error) {
	data, err := EncodeState(st)
	if err != nil {
		return 0, err
	}
	return store.Save(ctx, data, version)
}
