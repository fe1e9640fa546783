package actorsharding

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/coordinator"
)

// localShardState is the life of one local shard child, from its spawn to
// its Terminated.
type localShardState int

const (
	// shardRunning: the child hosts the shard and takes its messages.
	shardRunning localShardState = iota + 1
	// shardHandingOff: the child was told HandOff; it stops its entities
	// with the hand-off stop message, answers ShardStopped and stops.
	shardHandingOff
	// shardStopping: the region stopped the child (this member was
	// removed, or the coordinator named another home); it answers nothing.
	shardStopping
)

// String names the state, for logs.
func (s localShardState) String() string {
	switch s {
	case shardRunning:
		return "running"
	case shardHandingOff:
		return "handingOff"
	case shardStopping:
		return "stopping"
	}
	return fmt.Sprintf("localShardState(%d)", int(s))
}

// localShard is one live shard child of the region.
type localShard struct {
	pid   *actor.PID
	state localShardState
	// handOffReplyTo: who sent HandOff while the child was stopping (it
	// will not answer ShardStopped itself); answered when it terminates.
	handOffReplyTo []*actor.PID
}

// Errors of shardTable's transitions: a message that does not fit the
// table. The region logs them; none of them changes the table.
var (
	errShardAlive       = errors.New("an earlier child of the shard is still alive")
	errShardNotRunning  = errors.New("the shard has no running child")
	errShardNotStopping = errors.New("the shard's child is not stopping")
	errUnknownChild     = errors.New("not a shard child of this region")
)

// shardTable is the ShardRegion's bookkeeping of shards, Akka's
// regionByShard, regions, shards, shardsByRef and handingOff in one value:
// where every known shard lives, and the life of each local shard child.
//
// Its one rule: a shard has at most one child alive. A child that hands
// off or is stopped stays in the table until its Terminated, and no new
// child of the shard may start before that, on any path (a hand-off that
// timed out, a stale ShardHome, a re-join), so two incarnations of an
// entity never run on one node. Messages for the shard wait meanwhile.
//
// It does no I/O: the region asks it, changes it, and sends what it says.
type shardTable struct {
	self     *actor.PID
	homes    map[string]*actor.PID          // shard -> its home region
	byRegion map[string]map[string]struct{} // region key -> its shards
	local    map[string]*localShard         // shard -> its live child
	byChild  map[string]string              // child PID id -> shard
	// pendingStarts: HostShard senders waiting for ShardStarted of a shard
	// whose previous child is still alive.
	pendingStarts map[string][]*actor.PID
	// idle: per shard whose home is another region, the whole intervals
	// between sweeps that it went unused (see sweepIdleHomes); absent:
	// used (or learned) since the last sweep.
	idle map[string]int
}

func newShardTable(self *actor.PID) shardTable {
	return shardTable{
		self:          self,
		homes:         map[string]*actor.PID{},
		byRegion:      map[string]map[string]struct{}{},
		idle:          map[string]int{},
		local:         map[string]*localShard{},
		byChild:       map[string]string{},
		pendingStarts: map[string][]*actor.PID{},
	}
}

func (t *shardTable) isSelf(pid *actor.PID) bool {
	return pid != nil && t.self != nil && pid.Equal(t.self)
}

// --- homes ---

// home returns where shard lives, if known.
func (t *shardTable) home(shard string) (*actor.PID, bool) {
	ref, ok := t.homes[shard]
	return ref, ok
}

// homeIsSelf reports whether this region is shard's known home.
func (t *shardTable) homeIsSelf(shard string) bool {
	ref, ok := t.homes[shard]
	return ok && t.isSelf(ref)
}

// setHome records that shard lives at ref. It reports whether ref is a
// region the table did not know (the region watches it then).
func (t *shardTable) setHome(shard string, ref *actor.PID) (newRegion bool) {
	t.forgetHome(shard)
	t.homes[shard] = ref
	key := coordinator.RegionKey(ref)
	set, ok := t.byRegion[key]
	if !ok {
		set = map[string]struct{}{}
		t.byRegion[key] = set
		newRegion = !t.isSelf(ref)
	}
	set[shard] = struct{}{}
	return newRegion
}

// forgetHome forgets where shard lives (BeginHandOff).
func (t *shardTable) forgetHome(shard string) {
	ref, ok := t.homes[shard]
	if !ok {
		return
	}
	delete(t.homes, shard)
	delete(t.idle, shard)
	key := coordinator.RegionKey(ref)
	if set, ok := t.byRegion[key]; ok {
		delete(set, shard)
		if len(set) == 0 {
			delete(t.byRegion, key)
		}
	}
}

// forgetRegion forgets every home at ref (it terminated) and returns the
// shards that lived there.
func (t *shardTable) forgetRegion(ref *actor.PID) []string {
	key := coordinator.RegionKey(ref)
	set := t.byRegion[key]
	out := make([]string, 0, len(set))
	for shard := range set {
		delete(t.homes, shard)
		delete(t.idle, shard)
		out = append(out, shard)
	}
	delete(t.byRegion, key)
	return out
}

// regionsAt lists the other regions on address that homes name.
func (t *shardTable) regionsAt(address string) []*actor.PID {
	var out []*actor.PID
	seen := map[string]bool{}
	for _, ref := range t.homes {
		key := coordinator.RegionKey(ref)
		if ref.Address == address && !t.isSelf(ref) && !seen[key] {
			seen[key] = true
			out = append(out, ref)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Id < out[j].Id })
	return out
}

// forgetAllHomes forgets every home (this member was removed).
func (t *shardTable) forgetAllHomes() {
	t.homes = map[string]*actor.PID{}
	t.byRegion = map[string]map[string]struct{}{}
	t.idle = map[string]int{}
}

// homeUsed notes that a message went to shard's home.
func (t *shardTable) homeUsed(shard string) { delete(t.idle, shard) }

// sweepIdleHomes counts one sweep for the shards whose home is another
// region, and forgets the homes that went unused for idleSweeps whole
// intervals between sweeps: a shard that used (asked once per sweep)
// reports used since the sweep before, or noted with homeUsed, or that
// busy holds, starts again. It returns the shards whose home it forgot,
// sorted; their next message asks the coordinator again. A home on this
// region stays: its shard lives here.
func (t *shardTable) sweepIdleHomes(used, busy func(shard string) bool, idleSweeps int) []string {
	var out []string
	for shard, ref := range t.homes {
		if t.isSelf(ref) {
			continue
		}
		n, swept := t.idle[shard]
		if used(shard) || busy(shard) || !swept {
			t.idle[shard] = 0 // the interval from this sweep on is the first unused one
			continue
		}
		if t.idle[shard] = n + 1; n+1 >= idleSweeps {
			out = append(out, shard)
		}
	}
	for _, shard := range out {
		t.forgetHome(shard)
	}
	if len(out) > len(t.homes) {
		// Most homes went: give back the memory of the maps' peak.
		t.homes, t.idle = fresh(t.homes), fresh(t.idle)
	}
	slices.Sort(out)
	return out
}

// --- local children ---

// running returns shard's child if it runs (takes messages).
func (t *shardTable) running(shard string) (*actor.PID, bool) {
	l, ok := t.local[shard]
	if !ok || l.state != shardRunning {
		return nil, false
	}
	return l.pid, true
}

// alive reports whether shard has a child, in any state.
func (t *shardTable) alive(shard string) bool {
	_, ok := t.local[shard]
	return ok
}

// started records shard's new child pid. It fails while an earlier child
// of the shard is alive: that is what must never happen.
func (t *shardTable) started(shard string, pid *actor.PID) error {
	if l, ok := t.local[shard]; ok {
		return fmt.Errorf("start shard %s: %w (%s, %s)", shard, errShardAlive, l.pid.Id, l.state)
	}
	t.local[shard] = &localShard{pid: pid, state: shardRunning}
	t.byChild[pid.Id] = shard
	return nil
}

// handOff moves shard's running child to handingOff and returns it.
func (t *shardTable) handOff(shard string) (*actor.PID, error) {
	return t.leaveRunning(shard, shardHandingOff, "hand off")
}

// stop moves shard's running child to stopping and returns it.
func (t *shardTable) stop(shard string) (*actor.PID, error) {
	return t.leaveRunning(shard, shardStopping, "stop")
}

// leaveRunning moves shard's running child to state (what names the
// transition in the error) and returns it.
func (t *shardTable) leaveRunning(shard string, state localShardState, what string) (*actor.PID, error) {
	l, ok := t.local[shard]
	if !ok || l.state != shardRunning {
		return nil, fmt.Errorf("%s shard %s: %w", what, shard, errShardNotRunning)
	}
	l.state = state
	return l.pid, nil
}

// awaitStopped records replyTo, who sent HandOff for a shard whose child
// is stopping, to be answered ShardStopped when the child terminates.
func (t *shardTable) awaitStopped(shard string, replyTo *actor.PID) error {
	l, ok := t.local[shard]
	if !ok || l.state != shardStopping {
		return fmt.Errorf("await the stop of shard %s: %w", shard, errShardNotStopping)
	}
	if replyTo != nil && !slices.ContainsFunc(l.handOffReplyTo, replyTo.Equal) {
		l.handOffReplyTo = append(l.handOffReplyTo, replyTo)
	}
	return nil
}

// child returns shard's live child and its state, if it has one.
func (t *shardTable) child(shard string) (*actor.PID, localShardState, bool) {
	l, ok := t.local[shard]
	if !ok {
		return nil, 0, false
	}
	return l.pid, l.state, true
}

// terminated removes the child whose PID id is childID and returns its
// shard and what the table knew of it.
func (t *shardTable) terminated(childID string) (string, localShard, error) {
	shard, ok := t.byChild[childID]
	if !ok {
		return "", localShard{}, fmt.Errorf("terminated %s: %w", childID, errUnknownChild)
	}
	delete(t.byChild, childID)
	l := t.local[shard]
	delete(t.local, shard)
	return shard, *l, nil
}

// isChild reports whether childID is a live shard child of the region.
func (t *shardTable) isChild(childID string) bool {
	_, ok := t.byChild[childID]
	return ok
}

// runningShards lists the running children, by shard id.
func (t *shardTable) runningShards() []shardRef {
	out := make([]shardRef, 0, len(t.local))
	for s, l := range t.local {
		if l.state == shardRunning {
			out = append(out, shardRef{shard: s, pid: l.pid})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].shard < out[j].shard })
	return out
}

// hosted lists the shards with a running child, sorted: what the region
// tells a coordinator it registers with.
func (t *shardTable) hosted() []string {
	refs := t.runningShards()
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.shard
	}
	return out
}

// liveChildren counts the children alive, in any state.
func (t *shardTable) liveChildren() int { return len(t.local) }

// runningCount counts the running children.
func (t *shardTable) runningCount() int { return len(t.runningShards()) }

// --- HostShard acknowledgements ---

// awaitStart records a HostShard sender to answer once shard's next child
// has started.
func (t *shardTable) awaitStart(shard string, replyTo *actor.PID) {
	if replyTo == nil || slices.ContainsFunc(t.pendingStarts[shard], replyTo.Equal) {
		return
	}
	t.pendingStarts[shard] = append(t.pendingStarts[shard], replyTo)
}

// startAwaited reports whether a HostShard waits for shard's next child.
func (t *shardTable) startAwaited(shard string) bool {
	return len(t.pendingStarts[shard]) > 0
}

// takeAwaitedStarts returns and forgets the HostShard senders of shard.
func (t *shardTable) takeAwaitedStarts(shard string) []*actor.PID {
	out := t.pendingStarts[shard]
	delete(t.pendingStarts, shard)
	return out
}

// handOffStep is what a region does with a HandOff for one of its shards,
// as shardTable.handOffChild decides it.
type handOffStep int

const (
	// handOffAnswer: no child is alive; the region answers ShardStopped.
	handOffAnswer handOffStep = iota + 1
	// handOffForward: the running child hands off now; the region
	// forwards it the HandOff (and the shards' limit shares change).
	handOffForward
	// handOffForwardAgain: the child hands off already and answers every
	// HandOff it gets, a repeated one too.
	handOffForwardAgain
	// handOffAwaitStop: the region stopped the child, which answers
	// nobody; the region answers for it once it has terminated.
	handOffAwaitStop
)

// handOffChild moves shard's child as a HandOff from replyTo asks, and
// returns what the region does and the child it concerns.
func (t *shardTable) handOffChild(shard string, replyTo *actor.PID) (handOffStep, *actor.PID, error) {
	pid, state, alive := t.child(shard)
	switch {
	case !alive:
		return handOffAnswer, nil, nil
	case state == shardRunning:
		if _, err := t.handOff(shard); err != nil {
			return 0, nil, err
		}
		return handOffForward, pid, nil
	case state == shardHandingOff:
		return handOffForwardAgain, pid, nil
	}
	return handOffAwaitStop, pid, t.awaitStopped(shard, replyTo)
}

// restartWanted reports whether shard, whose last child has terminated,
// starts again here now: its home is still this region, which is neither
// shutting down nor removed, and messages (buffered) or a HostShard wait
// for it.
func (t *shardTable) restartWanted(shard string, buffered, shuttingDown, removed bool) bool {
	return t.homeIsSelf(shard) && !shuttingDown && !removed && (buffered || t.startAwaited(shard))
}

// shardHomeStep is what a region does with a ShardHome, as
// decideShardHome says.
type shardHomeStep int

const (
	// homeIgnoreGone: the home is on a member that is gone (a stale
	// answer): the shard's messages keep waiting, and are asked for again.
	homeIgnoreGone shardHomeStep = iota + 1
	// homeNotWhileShuttingDown: the home is this region, which shuts down
	// and does not run the shard: it does not start it.
	homeNotWhileShuttingDown
	// homeHere: the home is this region: it runs the shard.
	homeHere
	// homeElsewhere: the home is another live member's region.
	homeElsewhere
)

// decideShardHome is what a region does when the coordinator names a home
// for a shard: refIsSelf, the home is this region; refLive, it is on a
// live member; and v, what the region knows of the shard. stopLocal says
// that this region runs the shard that the coordinator homes elsewhere:
// it stops its copy and follows the coordinator.
func decideShardHome(v shardView, refIsSelf, refLive bool) (step shardHomeStep, stopLocal bool) {
	switch {
	case !refIsSelf && !refLive:
		return homeIgnoreGone, false
	case !refIsSelf:
		return homeElsewhere, v.running
	case v.shuttingDown && !v.running:
		return homeNotWhileShuttingDown, false
	}
	return homeHere, false
}

// shardEnd is what a region does when one of its shard children has
// terminated, as endOf says.
type shardEnd int

const (
	// shardEndExpected: the region handed the shard off or stopped it.
	shardEndExpected shardEnd = iota + 1
	// shardEndRestartLater: a remembering shard stopped unexpectedly; as
	// Akka's region, it starts again after the shard-failure back-off,
	// its remembered entities with it, or earlier on its next message.
	shardEndRestartLater
	// shardEndOnNextMessage: a shard stopped unexpectedly; it starts
	// again on its next message.
	shardEndOnNextMessage
)

// endOf is what the end of a child in state means, for a region whose
// shards remember their entities or not.
func endOf(state localShardState, remember bool) shardEnd {
	switch {
	case state != shardRunning:
		return shardEndExpected
	case remember:
		return shardEndRestartLater
	}
	return shardEndOnNextMessage
}
