package shard

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/msgbuffer"
	"github.com/protoshard/protoshard/internal/pidkey"
	"github.com/protoshard/protoshard/internal/shardproto"
	"github.com/protoshard/protoshard/internal/staleness"
	"github.com/protoshard/protoshard/messages"
)

// entityState is where one entity of a shard is in its life: Pekko's
// Shard.EntityState, with the same names and transitions (see entities).
type entityState uint8

const (
	// noState: the shard keeps nothing of the entity. Never stored: an
	// entity in it has no record.
	noState entityState = iota
	// rememberedButNotCreated: the entity's ID is in the remember-entities
	// store but no actor runs (read at recovery, or written and about to
	// start). A message starts it at once.
	rememberedButNotCreated
	// rememberingStart: the entity's ID is queued for the store, or being
	// written; it starts once written. Its messages are held.
	rememberingStart
	// rememberingStop: the entity was passivated and its removal from the
	// store is queued or being written. Its messages are held.
	rememberingStop
	// active: the entity's actor runs and takes its messages.
	active
	// passivating: the entity was sent its stop message; what arrives for
	// it meanwhile is held for its next incarnation.
	passivating
	// waitingForRestart: a remembered entity stopped without passivating;
	// it starts again after the back-off, or at once on a message.
	waitingForRestart
)

// String is Pekko's name of the state, for logs and errors.
func (s entityState) String() string {
	switch s {
	case noState:
		return "NoState"
	case rememberedButNotCreated:
		return "RememberedButNotCreated"
	case rememberingStart:
		return "RememberingStart"
	case rememberingStop:
		return "RememberingStop"
	case active:
		return "Active"
	case passivating:
		return "Passivating"
	case waitingForRestart:
		return "WaitingForRestart"
	}
	return fmt.Sprintf("entityState(%d)", int(s))
}

// bufferedMessage is a message (or a StartEntity) that waits: for an
// entity's next incarnation, for its ID to be written, or for the shard to
// be ready (lease, recovery).
type bufferedMessage struct {
	message any
	sender  *actor.PID
	start   bool                // a StartEntity: ack it to sender once the entity runs
	since   time.Time           // when it began to wait
	pending *shardproto.Pending // released once delivered or dropped
	header  map[string]string   // the message's header (a trace context), or nil
}

// heldMessage is a held message with the entity it was for, as handed back
// when it cannot be delivered.
type heldMessage struct {
	id string
	m  bufferedMessage
}

// original is the message as the shard received it, for dead-letter events.
func (m bufferedMessage) original(id string) any {
	if m.start {
		return &messages.StartEntity{EntityId: id}
	}
	return &shardproto.Deliver{EntityID: id, Message: m.message, Pending: m.pending}
}

// entityRecord is what the shard keeps of one entity that is not in
// noState. It is kept small, as there is one per running entity: the
// messages held for an entity are kept apart (entities.heldFor), as few
// entities ever have any, and its use is a number (see idleChecks).
type entityRecord struct {
	id    string     // its key in entities.byID
	pid   *actor.PID // active and passivating only
	mark  uint32     // active only: the mark of its last use (idleChecks)
	state entityState
	uses  uint8 // active only: uses of this incarnation, at most maxCountedUses
}

// Errors of the entities' transitions. errInvalidTransition means the
// shard asked for a transition the entity's state does not allow (a bug,
// or a message that does not fit); nothing changed.
var (
	errInvalidTransition = errors.New("invalid entity state transition")
	errHeldFull          = fmt.Errorf("too many held messages: %w", deadletter.ErrBufferFull)
	errUnknownEntity     = errors.New("not an entity of this shard")
	errAlreadyPassivate  = errors.New("entity is passivating already")
	errHandingOff        = errors.New("the shard is handing off")
)

// deliveryDecision is what the shard does with a message (or StartEntity)
// for an entity, as entities.deliver decides.
type deliveryDecision int

const (
	// sendNow: the entity runs; send it the message (ack a StartEntity).
	sendNow deliveryDecision = iota + 1
	// startNow: start the entity (then entities.started), then deliver.
	startNow
	// held: kept until the entity can take it; nothing to do now (but
	// flush the store's writes: the entity may have queued one).
	held
)

// terminatedDecision is what follows the termination of an entity actor.
type terminatedDecision int

const (
	// entityGone: the entity is forgotten (or, handing off, one fewer to
	// wait for).
	entityGone terminatedDecision = iota + 1
	// restartHeld: it was passivated while messages arrived for it: start
	// it again at once and deliver them (entities.started, then the held
	// messages returned with the decision).
	restartHeld
	// restartAfterBackoff: a remembered entity stopped without
	// passivating; start it again after the entity-restart back-off.
	restartAfterBackoff
	// writeStop: a remembered entity was passivated; its removal from the
	// store is queued (flush the writes).
	writeStop
)

// entities is the shard's bookkeeping of its entities, Pekko's
// Shard.Entities: the state of every entity the shard knows (see
// entityState), the messages held for those that cannot take them yet,
// the remember-entities writes queued and in flight, and the remembered
// entities whose StartEntity is not acknowledged yet.
//
// Every event is a method that either applies a transition Pekko's state
// machine allows and tells the shard what to do, or returns an error that
// wraps errInvalidTransition and changes nothing. It does no I/O and reads
// no clock: the shard actor passes the time in, spawns, sends and writes.
//
// Transitions (remembering: with remember-entities):
//
//	NoState                 -> Active                 message or StartEntity, not remembering
//	NoState                 -> RememberingStart       message or StartEntity, remembering
//	NoState                 -> RememberedButNotCreated  read at recovery
//	RememberedButNotCreated -> Active                 message, StartEntity or written
//	RememberedButNotCreated -> RememberingStop        started on another shard (extractor changed)
//	RememberingStart        -> RememberedButNotCreated  written (then started at once)
//	RememberingStart        -> NoState                the write failed for good
//	RememberingStop         -> NoState                written
//	RememberingStop         -> RememberingStart       written with messages held, or a message before the write
//	RememberingStop         -> RememberedButNotCreated  the write failed for good
//	Active                  -> Passivating            Passivate, or chosen by automatic passivation
//	Active                  -> WaitingForRestart      terminated, remembering
//	Active                  -> NoState                terminated, not remembering
//	Passivating             -> RememberingStop        terminated, remembering, nothing held
//	Passivating             -> NoState                terminated, not remembering, nothing held
//	Passivating             -> RememberedButNotCreated  terminated with messages held, remembering (restarted at once)
//	Passivating             -> NoState                terminated with messages held, not remembering (restarted at once)
//	WaitingForRestart       -> Active                 back-off over, message or StartEntity
//	WaitingForRestart       -> RememberedButNotCreated  its actor could not be spawned
//	WaitingForRestart       -> WaitingForRestart      its start refused: this node's membership is stale
//
// A passivated entity with messages held starts again without a write: its
// ID was never removed from the store. Pekko writes the stop and then the
// start; the result is the same.
//
// At hand-off (handOff) the entities that run are kept until they
// terminate, everything else is forgotten, and no transition but
// termination is allowed any more.
type entities struct {
	remembering bool
	handingOff  bool

	// byID: the record of every entity not in noState. The ID of a
	// running entity whose name is its ID shares the bytes of its PID's
	// ID, so the shard keeps no copy of the ID that reached it in a
	// message. There is no index by PID: an entity's actor is named after
	// its ID (EntityName), which entityOf reads back.
	byID    entityTable
	heldFor msgbuffer.Buffer[string, bufferedMessage] // by entity, in arrival order
	live    int                                       // active and passivating
	// checks: the uses of the active entities and the idle checks, for
	// idle passivation.
	checks idleChecks

	// pending: IDs in rememberingStart or rememberingStop whose write is
	// queued; writing: those of the write in flight (nil: no write in
	// flight). An ID is in at most one of them.
	pending map[string]struct{}
	writing map[string]struct{}
	// backingOff: the last write failed; the next waits for retryWrites.
	backingOff bool
	// unacked: remembered IDs whose StartEntity (sent through the region
	// at recovery) is not acknowledged yet.
	unacked map[string]struct{}
}

// newEntities holds at most maxHeld messages for entities that cannot take
// them yet.
func newEntities(remembering bool, maxHeld int) *entities {
	return &entities{
		remembering: remembering,
		heldFor:     msgbuffer.New[string, bufferedMessage](maxHeld),
		pending:     map[string]struct{}{},
		unacked:     map[string]struct{}{},
	}
}

func invalidTransition(id string, from entityState, event string) error {
	return fmt.Errorf("entity %q: %s in state %s: %w", id, event, from, errInvalidTransition)
}

// --- queries ---

// state is the state of entity id.
func (es *entities) state(id string) entityState {
	if r := es.byID.get(id); r != nil {
		return r.state
	}
	return noState
}

// activePID returns the actor of entity id if it is active: the hot path.
func (es *entities) activePID(id string) (*actor.PID, bool) {
	if r := es.byID.get(id); r != nil && r.state == active {
		return r.pid, true
	}
	return nil, false
}

// entityOf returns the ID of the live entity actor pid: the ID its name
// (the last part of its PID's ID) stands for, if that entity's actor is
// pid.
func (es *entities) entityOf(pid *actor.PID) (string, bool) {
	if pid == nil {
		return "", false
	}
	id, err := EntityID(childName(pid))
	if err != nil {
		return "", false
	}
	r := es.byID.get(id)
	if r == nil || r.pid == nil || pidkey.Of(r.pid) != pidkey.Of(pid) {
		return "", false
	}
	return id, true
}

// childName is the name pid has under its parent: the last part of its ID.
func childName(pid *actor.PID) string {
	return pid.Id[strings.LastIndexByte(pid.Id, '/')+1:]
}

// liveCount counts the entity actors alive, passivating ones included.
func (es *entities) liveCount() int { return es.live }

// heldCount counts the messages held for entities.
func (es *entities) heldCount() int { return es.heldFor.Len() }

// liveIDs lists the IDs of the entity actors alive, sorted.
func (es *entities) liveIDs() []string {
	ids := make([]string, 0, es.live)
	for r := range es.byID.all() {
		if r.pid != nil {
			ids = append(ids, r.id)
		}
	}
	slices.Sort(ids)
	return ids
}

// livePIDs lists the entity actors alive, in the order of their IDs.
func (es *entities) livePIDs() []*actor.PID {
	ids := es.liveIDs()
	pids := make([]*actor.PID, 0, len(ids))
	for _, id := range ids {
		pids = append(pids, es.byID.get(id).pid)
	}
	return pids
}

// --- messages ---

// deliver decides what becomes of m, a message or StartEntity for entity
// id: sent to the running entity (its PID is returned), the entity started
// first, or held. A message held for a remembered entity not yet written
// queues its write. It fails with errHeldFull when m would have to be held
// and as many messages as it may hold are held already (m is not held
// then).
func (es *entities) deliver(id string, m bufferedMessage) (deliveryDecision, *actor.PID, error) {
	r := es.byID.get(id)
	if r != nil && r.state == active {
		return sendNow, r.pid, nil
	}
	if es.handingOff {
		return 0, nil, fmt.Errorf("entity %q: message: %w", id, errHandingOff)
	}
	if r == nil {
		if !es.remembering {
			return startNow, nil, nil
		}
		if es.heldFor.Full() {
			return 0, nil, errHeldFull
		}
		es.byID.put(&entityRecord{id: id, state: rememberingStart})
		es.pending[id] = struct{}{}
		es.hold(id, m)
		return held, nil, nil
	}
	switch r.state {
	case rememberedButNotCreated, waitingForRestart:
		return startNow, nil, nil
	case passivating, rememberingStart, rememberingStop:
		if es.heldFor.Full() {
			return 0, nil, errHeldFull
		}
		es.hold(id, m)
		if _, inFlight := es.writing[id]; r.state == rememberingStop && !inFlight {
			// The stop is not written yet: a start replaces it in the
			// queue, and the ID simply stays in the store.
			r.state = rememberingStart
		}
		return held, nil, nil
	}
	return 0, nil, invalidTransition(id, r.state, "message")
}

func (es *entities) hold(id string, m bufferedMessage) {
	es.heldFor.Add(id, m) // not full: deliver checked
}

// started records that entity id's actor pid, named EntityName(id), runs
// now (Active) and hands back the messages held for it, in order, to
// deliver. Its start is a use.
func (es *entities) started(id string, pid *actor.PID) ([]bufferedMessage, error) {
	if pid == nil {
		return nil, fmt.Errorf("entity %q: started without a PID: %w", id, errInvalidTransition)
	}
	name := childName(pid)
	if name != EntityName(id) {
		return nil, fmt.Errorf("entity %q: started as %q, not named after it: %w", id, pid.Id, errInvalidTransition)
	}
	if es.handingOff {
		return nil, fmt.Errorf("entity %q: started: %w", id, errHandingOff)
	}
	r := es.byID.get(id)
	switch {
	case r == nil && es.remembering:
		return nil, invalidTransition(id, noState, "started before it was remembered")
	case r == nil:
		r = &entityRecord{id: id}
		es.byID.put(r)
	case r.state != rememberedButNotCreated && r.state != waitingForRestart:
		return nil, invalidTransition(id, r.state, "started")
	}
	if name == id {
		r.id = name // the same ID, in the PID's bytes
	}
	r.state, r.pid, r.mark, r.uses = active, pid, es.use(), 0
	es.live++
	return es.takeHeld(id), nil
}

// startFailed: entity id's actor could not be spawned, for err. The
// messages held for it are handed back to be dropped; a remembered entity
// stays remembered without running (a message tries again). One whose
// restart was due, refused because this node's membership is stale
// (staleness.ErrStale), keeps waiting for its restart instead
// (restartAgain: the shard arms the back-off again), so that it runs again
// once the node has confirmed its membership; the node's removal stops the
// shard first. A state no start comes from is refused.
func (es *entities) startFailed(id string, err error) (held []bufferedMessage, restartAgain bool, _ error) {
	r := es.byID.get(id)
	if r == nil {
		return nil, false, nil // not remembering: nothing is kept of it
	}
	switch r.state {
	case waitingForRestart:
		if errors.Is(err, staleness.ErrStale) {
			return es.takeHeld(id), true, nil
		}
		r.state = rememberedButNotCreated
		return es.takeHeld(id), false, nil
	case rememberedButNotCreated:
		return es.takeHeld(id), false, nil
	}
	return nil, false, invalidTransition(id, r.state, "start failed")
}

func (es *entities) takeHeld(id string) []bufferedMessage {
	return es.heldFor.Take(id)
}

// markUsed records a use of the active entity id (a user message or a
// StartEntity) and reports whether it is active.
func (es *entities) markUsed(id string) bool {
	r := es.byID.get(id)
	if r == nil || r.state != active {
		return false
	}
	r.mark = es.use()
	if r.uses < maxCountedUses {
		r.uses++
	}
	return true
}

// use records a use of an active entity and returns its mark, first
// numbering the active entities' marks again if they have run out (once
// in four billion uses).
func (es *entities) use() uint32 {
	if es.checks.full() {
		used := es.activeUses()
		slices.SortFunc(used, byMark)
		marks := make([]uint32, len(used))
		for i, u := range used {
			marks[i] = u.mark
		}
		es.checks.renumber(marks)
		for i, u := range used {
			es.byID.get(u.id).mark = uint32(i + 1)
		}
	}
	return es.checks.use()
}

// idle runs one idle check at now over the active entities and returns
// those idle for timeout or longer, sorted (see idleChecks).
func (es *entities) idle(now time.Time, timeout time.Duration) []string {
	idleUpTo, ok := es.checks.check(now, timeout)
	if !ok {
		return nil
	}
	var out []string
	for r := range es.byID.all() {
		if r.state == active && r.mark <= idleUpTo {
			out = append(out, r.id)
		}
	}
	slices.Sort(out)
	return out
}

// activeUses lists the uses of the active entities, in no order, for a
// replacement policy that starts tracking them (see activeEntityLimit).
func (es *entities) activeUses() []entityUse {
	out := make([]entityUse, 0, es.live)
	for r := range es.byID.all() {
		if r.state == active {
			out = append(out, entityUse{id: r.id, mark: r.mark, uses: int(r.uses)})
		}
	}
	return out
}

// --- passivation and termination ---

// passivate moves the active entity id to Passivating and returns its
// actor, to send the stop message to. errAlreadyPassivate: it is
// passivating already (nothing to send).
func (es *entities) passivate(id string) (*actor.PID, error) {
	r := es.byID.get(id)
	switch {
	case es.handingOff:
		return nil, fmt.Errorf("entity %q: passivate: %w", id, errHandingOff)
	case r == nil:
		return nil, invalidTransition(id, noState, "passivate")
	case r.state == passivating:
		return nil, fmt.Errorf("entity %q: %w", id, errAlreadyPassivate)
	case r.state != active:
		return nil, invalidTransition(id, r.state, "passivate")
	}
	r.state = passivating
	return r.pid, nil
}

// terminated applies the termination of entity actor pid and says what
// follows; with restartHeld it hands back the messages held for the next
// incarnation. errUnknownEntity: pid is no live entity of the shard.
func (es *entities) terminated(pid *actor.PID) (string, terminatedDecision, []bufferedMessage, error) {
	id, ok := es.entityOf(pid)
	if !ok {
		return "", 0, nil, fmt.Errorf("terminated %v: %w", pid, errUnknownEntity)
	}
	r := es.byID.get(id)
	es.live--
	r.pid = nil
	switch {
	case es.handingOff:
		es.forget(id)
		return id, entityGone, nil, nil
	case r.state == active && es.remembering:
		r.state = waitingForRestart
		return id, restartAfterBackoff, nil, nil
	case r.state == active:
		es.forget(id)
		return id, entityGone, nil, nil
	case es.heldFor.Has(id):
		// Passivating, with messages for the next incarnation. The ID
		// stays remembered: its stop was never written.
		msgs := es.takeHeld(id)
		if es.remembering {
			r.state = rememberedButNotCreated
		} else {
			es.forget(id)
		}
		return id, restartHeld, msgs, nil
	case es.remembering:
		r.state = rememberingStop
		es.pending[id] = struct{}{}
		return id, writeStop, nil, nil
	default:
		es.forget(id)
		return id, entityGone, nil, nil
	}
}

// forget drops the record of id (noState), with anything still held.
func (es *entities) forget(id string) {
	es.heldFor.Take(id)
	es.byID.delete(id)
	delete(es.pending, id)
	delete(es.writing, id)
}

// restartDue reports whether entity id still waits for its restart when
// its back-off is over (a message may have started it meanwhile).
func (es *entities) restartDue(id string) bool {
	return !es.handingOff && es.state(id) == waitingForRestart
}

// --- remember-entities ---

// recovered records the IDs read from the store when the shard started:
// each is remembered but not created, and waits for the acknowledgement of
// the StartEntity the shard sends for it through its region.
func (es *entities) recovered(ids []string) error {
	if !es.remembering {
		return fmt.Errorf("recovered %d entities: not remembering entities: %w", len(ids), errInvalidTransition)
	}
	for _, id := range ids {
		if s := es.state(id); s != noState {
			return invalidTransition(id, s, "recovered")
		}
	}
	for _, id := range ids {
		es.byID.put(&entityRecord{id: id, state: rememberedButNotCreated})
	}
	return nil
}

// startRequested records that StartEntity was sent for the remembered ids.
func (es *entities) startRequested(ids []string) {
	for _, id := range ids {
		es.unacked[id] = struct{}{}
	}
}

// unackedIDs lists the remembered IDs whose StartEntity is not
// acknowledged, sorted (to send it again).
func (es *entities) unackedIDs() []string {
	ids := make([]string, 0, len(es.unacked))
	for id := range es.unacked {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// acked applies a StartEntityAck for id from shard ackShard. It reports
// whether the ack counts (the first one for a StartEntity this shard sent)
// and whether the entity moved to another shard and is now being forgotten
// here (Pekko's EntitiesMovedToOtherShard): its removal is queued.
func (es *entities) acked(id, ackShard, ownShard string) (counted, moved bool) {
	if _, ok := es.unacked[id]; !ok || es.handingOff {
		return false, false
	}
	delete(es.unacked, id)
	if ackShard == ownShard {
		return true, false
	}
	r := es.byID.get(id)
	if r == nil || r.state != rememberedButNotCreated {
		// Started here meanwhile by a message routed here: it runs and
		// stays remembered.
		return true, false
	}
	r.state = rememberingStop
	es.pending[id] = struct{}{}
	return true, true
}

// nextWrite takes the queued starts and stops as the next write, unless a
// write is in flight, a failed write's back-off is not over, or nothing is
// queued (ok false). The lists are sorted.
func (es *entities) nextWrite() (started, stopped []string, ok bool) {
	if es.writing != nil || es.backingOff || len(es.pending) == 0 {
		return nil, nil, false
	}
	es.writing = es.pending
	es.pending = map[string]struct{}{}
	for id := range es.writing {
		if es.byID.get(id).state == rememberingStart {
			started = append(started, id)
		} else {
			stopped = append(stopped, id)
		}
	}
	slices.Sort(started)
	slices.Sort(stopped)
	return started, stopped, true
}

// written applies the success of the write in flight. It returns the
// entities now remembered that are to start at once (entities.started
// hands back what they hold), sorted. An entity whose stop was written
// while messages arrived for it is queued again, as started.
func (es *entities) written() (toStart []string, err error) {
	if es.writing == nil {
		return nil, fmt.Errorf("write done with no write in flight: %w", errInvalidTransition)
	}
	for id := range es.writing {
		r := es.byID.get(id)
		switch {
		case r.state == rememberingStart:
			r.state = rememberedButNotCreated
			toStart = append(toStart, id)
		case es.heldFor.Has(id):
			r.state = rememberingStart
			es.pending[id] = struct{}{}
		default:
			es.forget(id)
		}
	}
	es.writing = nil
	slices.Sort(toStart)
	return toStart, nil
}

// writeFailed: the write in flight failed and may be tried again; its
// starts and stops are queued again, and no write is taken before
// retryWrites (the back-off).
func (es *entities) writeFailed() error {
	if es.writing == nil {
		return fmt.Errorf("write failed with no write in flight: %w", errInvalidTransition)
	}
	for id := range es.writing {
		es.pending[id] = struct{}{}
	}
	es.writing = nil
	es.backingOff = true
	return nil
}

// retryWrites ends the back-off of a failed write: nextWrite takes what is
// queued again.
func (es *entities) retryWrites() { es.backingOff = false }

// writeFailedForGood: the store will never accept the write in flight. Its
// entities leave the store's queue as they are in the store (a start not
// written: NoState; a stop not written: remembered, not running) and the
// messages held for them are handed back, to drop.
func (es *entities) writeFailedForGood() []heldMessage {
	if es.writing == nil {
		return nil
	}
	var out []heldMessage
	ids := make([]string, 0, len(es.writing))
	for id := range es.writing {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		r := es.byID.get(id)
		for _, m := range es.takeHeld(id) {
			out = append(out, heldMessage{id: id, m: m})
		}
		if r.state == rememberingStart {
			es.forget(id)
		} else {
			r.state = rememberedButNotCreated
		}
	}
	es.writing = nil
	return out
}

// expire takes the messages that have waited for the store longer than
// bound at now (held for entities in RememberingStart or RememberingStop),
// to drop. Messages held for a passivating entity wait for its
// termination, whatever it takes, as in Akka.
func (es *entities) expire(now time.Time, bound time.Duration) []heldMessage {
	var out []heldMessage
	for _, id := range es.heldIDs() {
		if s := es.byID.get(id).state; s != rememberingStart && s != rememberingStop {
			continue
		}
		for _, m := range es.heldFor.TakeWhile(id, func(m bufferedMessage) bool { return now.Sub(m.since) > bound }) {
			out = append(out, heldMessage{id: id, m: m})
		}
	}
	return out
}

// --- hand-off and stop ---

// handOff starts the hand-off: the entities that run are kept until they
// terminate (their actors are returned, to send the stop message to),
// everything else is forgotten, and every held message is handed back, to
// drop: there is no next incarnation here. The store keeps the entities as
// they are written; a write in flight is no longer followed.
func (es *entities) handOff() ([]*actor.PID, []heldMessage) {
	dropped := es.takeAllHeld()
	var gone []string
	for r := range es.byID.all() {
		if r.pid == nil {
			gone = append(gone, r.id)
		}
	}
	for _, id := range gone {
		es.byID.delete(id)
	}
	es.handingOff = true
	es.pending = map[string]struct{}{}
	es.writing = nil
	es.unacked = map[string]struct{}{}
	return es.livePIDs(), dropped
}

// takeAllHeld hands back every held message, by entity ID, each entity's
// in order, to drop (the shard stops or hands off).
func (es *entities) takeAllHeld() []heldMessage {
	var out []heldMessage
	for _, id := range es.heldIDs() {
		for _, m := range es.takeHeld(id) {
			out = append(out, heldMessage{id: id, m: m})
		}
	}
	return out
}

// heldIDs lists the entities with messages held, sorted.
func (es *entities) heldIDs() []string {
	ids := es.heldFor.Keys()
	slices.Sort(ids)
	return ids
}
