package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/coordinatoractor"
	"go.opentelemetry.io/otel/trace"
)

// errWriteOrder: a transition of stateWrites that its state does not
// allow (a write reported done while none is in flight, an event before
// the state was claimed...). A coordinator that sees it has lost track of
// what is stored, and stops.
var errWriteOrder = errors.New("coordinator state writes out of order")

// update is a change of the coordinator's state waiting to be written, or
// (event nil) a reply waiting for the changes before it.
type update struct {
	event Event
	// key, when set, names a reply: a second reply with a key that waits
	// already (the same GetShardHome from the same region, asked again
	// while the answer waits for its write) is not queued again.
	key string
	// then runs once the write that carries the update succeeded, as
	// Akka's update(evt){...} runs its callback once evt is stored: what
	// depends on a change is said only once the change is durable.
	then func(actor.Context)
	// refused runs instead when the update will never be written: the
	// store refused the write (the state went back to the last one
	// written) or the coordinator stops.
	refused func(actor.Context, error)
}

// stateWrites is the coordinator's state and the bookkeeping of its writes
// to the StateStore. An event changes state at once, in place; the events
// are written in batches, one write in flight at a time: what is applied
// meanwhile waits (pending), and the next write carries all of it in one
// check-and-set of a snapshot of the state. Replies wait in the same
// queue, behind the events they depend on.
//
// The first write claims the state that load read (see the coordinator's
// fencing), at the version read. Events are accepted once the state is
// loaded, and those decided before the claim starts go with it, in the
// same check-and-set: a coordinator that starts with work to do (regions
// of crashed members to end, remembered shards to allocate) writes once,
// not twice, and nothing it decided is acted on before that write
// succeeded. Until then no shard counts as settled and every reply waits
// for it, since replies carry the epoch, the version the claim wrote.
type stateWrites struct {
	state   State  // written plus every event since: what the coordinator decides on
	durable State  // as last written (or loaded): a snapshot, never changed in place
	version uint64 // the store's version of durable

	loaded  bool
	claimed bool // the first write succeeded
	stopped bool // abandoned: nothing more is written

	pending       []update // applied, in no write yet
	pendingEvents int      // how many of pending carry an event
	inFlight      []update // carried by the write in flight
	inFlightEvent bool     // an update in flight carries an event
	writing       bool
	snapshot      State // what the write in flight carries

	keys      map[string]int // keys of the updates not yet written
	unwritten map[string]int // shard -> events about it not yet written
}

// load takes the state read from the store at version. It is what the
// first write (the claim) writes back.
func (w *stateWrites) load(st State, version uint64) error {
	if w.loaded {
		return fmt.Errorf("%w: the state was loaded already", errWriteOrder)
	}
	w.durable = st
	w.state = st.Clone()
	w.version = version
	w.loaded = true
	w.keys = map[string]int{}
	w.unwritten = map[string]int{}
	return nil
}

// claimable is st, as read from the store, made the state the coordinator
// claims under its settings: without remember-entities it keeps no
// shards that lost their home.
func claimable(st State, rememberEntities bool) State {
	st.RememberEntities = rememberEntities
	if !rememberEntities {
		st.Unallocated = map[string]struct{}{}
	}
	return st
}

// apply changes the state by u.event and queues u for the next write. An
// event that does not fit the state is an error, and nothing changes.
func (w *stateWrites) apply(u update) error {
	if !w.loaded || w.stopped {
		return fmt.Errorf("%w: %v before the state was loaded or after the writes stopped", errWriteOrder, u.event)
	}
	if u.event == nil {
		return fmt.Errorf("%w: an update without an event", errWriteOrder)
	}
	if err := w.state.Apply(u.event); err != nil {
		return err
	}
	w.pending = append(w.pending, u)
	w.pendingEvents++
	w.count(u, 1)
	return nil
}

// wait queues a reply behind every update not yet written, unless one
// with the same key waits already. It returns false, and queues nothing,
// when everything is written, the claim included: the caller replies at
// once.
func (w *stateWrites) wait(key string, then func(actor.Context), refused func(actor.Context, error)) bool {
	if key != "" && w.keys[key] > 0 {
		return true
	}
	u := update{key: key, then: then, refused: refused}
	switch {
	case w.pendingEvents > 0, !w.claimed && !w.writing:
		w.pending = append(w.pending, u)
	case w.writing:
		// Everything it waits for is in flight.
		w.inFlight = append(w.inFlight, u)
	default:
		return false
	}
	w.count(u, 1)
	return true
}

// settled reports whether the state is claimed and every event about
// shard is written.
func (w *stateWrites) settled(shard string) bool { return w.claimed && w.unwritten[shard] == 0 }

// begin starts the next write: the claim, or the pending events, when no
// write is in flight. It returns the snapshot to write and the version the
// store must still hold; false when there is nothing to start.
func (w *stateWrites) begin() (State, uint64, bool) {
	if !w.loaded || w.stopped || w.writing || (w.claimed && w.pendingEvents == 0) {
		return State{}, 0, false
	}
	w.inFlight, w.inFlightEvent, w.pending, w.pendingEvents = w.pending, w.pendingEvents > 0, nil, 0
	w.writing = true
	w.snapshot = w.state.Clone()
	return w.snapshot, w.version, true
}

// done: the write in flight succeeded, and the store holds its snapshot
// at version. It returns the updates it carried, in order, whose then
// runs now.
func (w *stateWrites) done(version uint64) ([]update, error) {
	if !w.writing {
		return nil, fmt.Errorf("%w: a write succeeded while none was in flight", errWriteOrder)
	}
	// The same version is no error: Consul keeps the ModifyIndex of a key
	// whose value a write does not change (a claim of a state nobody
	// changed since, events that cancel out).
	if version < w.version {
		return nil, fmt.Errorf("%w: the store answered version %d to a write at version %d", errWriteOrder, version, w.version)
	}
	batch := w.inFlight
	w.durable, w.snapshot, w.version = w.snapshot, State{}, version
	w.inFlight, w.inFlightEvent, w.writing, w.claimed = nil, false, false, true
	for _, u := range batch {
		w.count(u, -1)
	}
	return batch, nil
}

// refuse: the store refused the write in flight, before it wrote anything
// (a state too large or invalid). The state goes back to the one last
// written (or loaded), and every update not written, in flight and
// pending, is returned, in order, for its refused: the pending ones were
// decided on the refused state. A refused claim that carried events is
// written again without them by the next begin; one that carried none
// would be refused again, and is an error.
func (w *stateWrites) refuse() ([]update, error) {
	if !w.writing || (!w.claimed && !w.inFlightEvent) {
		return nil, fmt.Errorf("%w: a refused write while none, or the bare claim, was in flight", errWriteOrder)
	}
	w.state = w.durable.Clone()
	return w.drain(), nil
}

// writeEnd is what the end of a write asks of the coordinator: exactly
// one of done (run their then), refused (run their refused, with the
// store's reason cause) or fail (stop) applies.
type writeEnd struct {
	claim   bool // the write was the claim: the epoch is the new version
	done    []update
	refused []update
	cause   error // refused: why the store refused the state
	fail    error
}

// ended ends the write in flight on its result: the store's version on
// success, else the error. A store that refuses the state (too large,
// invalid) wrote nothing: the updates are refused and the coordinator
// goes on from the state last written, or claims the state it read
// without them. Any other failure, or a result out of order, fails.
func (w *stateWrites) ended(version uint64, err error) writeEnd {
	end := writeEnd{claim: !w.claimed}
	switch {
	case errors.Is(err, coordinatoractor.ErrStateTooLarge), errors.Is(err, ErrInvalidState):
		end.refused, end.fail = w.refuse()
		end.cause = err
	case err != nil:
		what := "write the state"
		if end.claim {
			what = "claim the state"
		}
		end.fail = fmt.Errorf("%s: %w", what, err)
	default:
		end.done, end.fail = w.done(version)
	}
	return end
}

// abandon stops the writes for good (the coordinator stops): it returns
// every update not written, in order, for their refused, and no write
// starts after it. The state stays as it is.
func (w *stateWrites) abandon() []update {
	w.stopped = true
	return w.drain()
}

// drain forgets every update not written and returns them, in order.
func (w *stateWrites) drain() []update {
	all := append(w.inFlight, w.pending...)
	w.inFlight, w.inFlightEvent, w.pending, w.pendingEvents = nil, false, nil, 0
	w.writing, w.snapshot = false, State{}
	clear(w.keys)
	clear(w.unwritten)
	return all
}

// count adds d to the bookkeeping of u's key and shard.
func (w *stateWrites) count(u update, d int) {
	if u.key != "" {
		add(w.keys, u.key, d)
	}
	switch e := u.event.(type) {
	case ShardHomeAllocated:
		add(w.unwritten, e.Shard, d)
	case ShardHomeDeallocated:
		add(w.unwritten, e.Shard, d)
	}
}

func add(m map[string]int, k string, d int) {
	if n := m[k] + d; n > 0 {
		m[k] = n
	} else {
		delete(m, k)
	}
}

// handOffStart is when the coordinator started a shard's hand-off, and
// whether for the rebalance (else for a region's graceful shutdown).
type handOffStart struct {
	at        time.Time
	rebalance bool
	span      trace.Span // ends with the hand-off
}

// The outcomes of a state write, for metrics.
const (
	writeOK       = "ok"
	writeConflict = "conflict" // another coordinator wrote since: this one is stale and stops
	writeRefused  = "refused"  // the state is too large or invalid; nothing was written
	writeTimeout  = "timeout"
	writeError    = "error"
)

// writeOutcome classifies a StateStore.Save result.
func writeOutcome(err error) string {
	switch {
	case err == nil:
		return writeOK
	case errors.Is(err, coordinatoractor.ErrVersionConflict):
		return writeConflict
	case errors.Is(err, coordinatoractor.ErrStateTooLarge), errors.Is(err, ErrInvalidState):
		return writeRefused
	case errors.Is(err, context.DeadlineExceeded):
		return writeTimeout
	default:
		return writeError
	}
}
