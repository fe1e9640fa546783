package actorsharding

import (
	"errors"
	"fmt"
	"github.com/asynkron/protoactor-go/actor"
	"strings"
	"time"

	"github.com/protoshard/protoshard/internal/backoff"
)

// registrationSchedule is when an unregistered region registers, as
// Akka's ShardRegion schedules it: when something may have changed the
// coordinator (the region started, joined, lost its coordinator, or the
// oldest member of its role changed) it registers at once, then again
// after a delay that doubles from Akka's initial registration delay up to
// the retry interval. From there on the region's periodic retry tick
// registers it, so a coordinator that is slow to start is asked a few
// times and then at the retry interval, never in a tight loop. A Register
// that found the coordinator still starting, or was lost on its way
// through a proxy that had not yet seen the change, is sent again well
// before the retry interval.
type registrationSchedule struct {
	delays  backoff.Exponential
	limit   time.Duration // the retry interval: the periodic retry takes over
	attempt int
	gen     int // of the current series; a retry of another is stale
}

// minRegistrationDelay is the floor of Akka's initial registration delay.
const minRegistrationDelay = 100 * time.Millisecond

func newRegistrationSchedule(retryInterval time.Duration) registrationSchedule {
	// Akka: initRegistrationDelay = 100.millis max (retryInterval / 2 / 2 / 2).
	return registrationSchedule{
		delays: backoff.Exponential{Min: max(minRegistrationDelay, retryInterval/8), Max: retryInterval},
		limit:  retryInterval,
	}
}

// registerRetry is the timer of one retry of series gen.
type registerRetry struct{ gen int }

// start begins a new series (the region registers now) and returns the
// retry to schedule after delay, unless ok is false: the first delay is
// the retry interval already.
func (s *registrationSchedule) start() (retry registerRetry, delay time.Duration, ok bool) {
	s.gen++
	s.attempt = 0
	return s.following()
}

// due tells whether retry belongs to the current series (the region
// registers again then) and returns the retry after it, as start does.
func (s *registrationSchedule) due(retry registerRetry) (current bool, next registerRetry, delay time.Duration, ok bool) {
	if retry.gen != s.gen {
		return false, registerRetry{}, 0, false
	}
	s.attempt++
	next, delay, ok = s.following()
	return true, next, delay, ok
}

// stop ends the current series: the region registered.
func (s *registrationSchedule) stop() { s.gen++ }

func (s *registrationSchedule) following() (registerRetry, time.Duration, bool) {
	d := s.delays.Delay(s.attempt)
	if d >= s.limit {
		return registerRetry{}, 0, false
	}
	return registerRetry{gen: s.gen}, d, true
}

// acceptCoordinator decides whether a region follows the coordinator of a
// RegisterAck at epoch, having obeyed coordinators up to maxEpoch. A lower
// epoch is a stale coordinator (an old ack, a paused node), unless the
// coordinator runs on the oldest member, where the membership says the
// coordinator is: then the store's versions went back (Consul lost its
// data, or it was restored from an older snapshot), and why says so.
func acceptCoordinator(maxEpoch, epoch uint64, onOldest bool) (accept bool, why string) {
	switch {
	case epoch >= maxEpoch:
		return true, ""
	case onOldest:
		return true, fmt.Sprintf("coordinator epoch %d is below the highest seen (%d) but it runs on the oldest member: "+
			"its state store was reset or restored; following it", epoch, maxEpoch)
	default:
		return false, fmt.Sprintf("RegisterAck from a stale coordinator: epoch %d, below the highest seen (%d), and not on the oldest member",
			epoch, maxEpoch)
	}
}

// missedCoordinatorChange tells whether a command at epoch from sender
// that the region rejected means that a newer coordinator runs: the epoch
// is above every epoch the region obeyed (maxEpoch), and sender is the
// coordinator of this type (its process ID is coordinatorID) or one of its
// workers, on a live member. A higher epoch from any other sender (an
// unrelated actor, a message forged with that epoch) changes nothing.
func missedCoordinatorChange(coordinatorID string, maxEpoch uint64, sender *actor.PID, epoch uint64, liveMember bool) bool {
	if sender == nil || epoch <= maxEpoch || !liveMember {
		return false
	}
	id := sender.GetId()
	return id == coordinatorID || strings.HasPrefix(id, coordinatorID+"/")
}

// commandRejection says why a region registered with coordinator at
// coordinatorEpoch must not obey a command from sender at epoch, or "".
// A command comes from the coordinator itself or from one of its
// rebalance workers, which are its children (their PID ids extend its id).
func commandRejection(coordinator *actor.PID, coordinatorEpoch uint64, sender *actor.PID, epoch uint64) string {
	switch {
	case coordinator == nil:
		return "coordinator command while the region is not registered with a coordinator"
	case sender == nil:
		return "coordinator command without a sender"
	case !sender.Equal(coordinator) && !isChildOf(sender, coordinator):
		return fmt.Sprintf("coordinator command from %s, which is neither the coordinator the region registered with (%s) nor one of its workers",
			sender, coordinator)
	case epoch != coordinatorEpoch:
		return fmt.Sprintf("coordinator command at epoch %d; the registered coordinator's epoch is %d", epoch, coordinatorEpoch)
	}
	return ""
}

// isChildOf reports whether pid names a descendant of parent: proto.actor
// names a child "<parent id>/<name>".
func isChildOf(pid, parent *actor.PID) bool {
	return pid.GetAddress() == parent.GetAddress() && strings.HasPrefix(pid.GetId(), parent.GetId()+"/")
}

// coordinatorLink is a region's registration with its coordinator: the
// coordinator it follows and its epoch (the only source of commands the
// region obeys), the highest epoch it has obeyed, the member incarnation
// it registered as, and when it registers again while it has none. It
// does no I/O: the region feeds it acks, commands and retries, and sends,
// watches and schedules what it answers.
type coordinatorLink struct {
	coordinator *actor.PID
	epoch       uint64
	// maxEpoch is the highest coordinator epoch the region has obeyed.
	maxEpoch uint64
	// registeredAs is the member incarnation the region last registered
	// as (see messages.ShardRegionStatus.RegisteredMemberId).
	registeredAs string
	schedule     registrationSchedule
}

// errStaleCoordinator: a RegisterAck the region does not follow (see
// acceptCoordinator); the link is unchanged.
var errStaleCoordinator = errors.New("stale coordinator")

// staleAck is ack's error: its text is acceptCoordinator's reason, the
// RegisterAck's drop reason.
type staleAck struct{ why string }

func (e staleAck) Error() string        { return e.why }
func (e staleAck) Is(target error) bool { return target == errStaleCoordinator }

// linkAck is what a RegisterAck the region follows asks of it.
type linkAck struct {
	// repeated: a late answer to a Register resent before the first ack,
	// from the coordinator the region follows already.
	repeated bool
	// unwatch: the coordinator the region followed before, another one.
	unwatch *actor.PID
	// warning: the region follows a coordinator below the highest epoch
	// (see acceptCoordinator).
	warning string
}

// registered reports whether the region follows a coordinator.
func (l *coordinatorLink) registered() bool { return l.coordinator != nil }

// ack: coordinator c (not nil) acknowledged the Register of member
// incarnation memberID at epoch; onOldest tells whether c runs on the
// oldest member of the region's role. A stale coordinator is an error
// (errStaleCoordinator, with acceptCoordinator's reason) and changes
// nothing.
func (l *coordinatorLink) ack(c *actor.PID, epoch uint64, onOldest bool, memberID string) (linkAck, error) {
	if l.coordinator != nil && l.coordinator.Equal(c) && l.epoch == epoch {
		return linkAck{repeated: true}, nil
	}
	accept, why := acceptCoordinator(l.maxEpoch, epoch, onOldest)
	if !accept {
		return linkAck{}, staleAck{why: why}
	}
	out := linkAck{warning: why}
	if l.coordinator != nil && !l.coordinator.Equal(c) {
		out.unwatch = l.coordinator
	}
	l.coordinator = c
	l.schedule.stop()
	l.epoch = epoch
	l.maxEpoch = max(l.maxEpoch, epoch)
	l.registeredAs = memberID
	return out, nil
}

// command tells whether the region obeys a command at epoch from sender;
// if not, why (see commandRejection), and whether the command shows that
// a newer coordinator runs (see missedCoordinatorChange), so the region
// registers again. coordinatorID is the coordinator's process ID and live
// whether sender is on a live member.
func (l *coordinatorLink) command(sender *actor.PID, epoch uint64, coordinatorID string, live bool) (why string, missed bool) {
	why = commandRejection(l.coordinator, l.epoch, sender, epoch)
	if why == "" {
		return "", false
	}
	return why, l.coordinator != nil && missedCoordinatorChange(coordinatorID, l.maxEpoch, sender, epoch, live)
}

// lose forgets the coordinator (it terminated, its member was removed, a
// newer one runs, or this member was removed) and returns it, to unwatch;
// nil if the region had none.
func (l *coordinatorLink) lose() *actor.PID {
	c := l.coordinator
	l.coordinator = nil
	return c
}

// retry tells whether a registration retry is due (the region registers
// again then), and the retry after it, as registrationSchedule.due. A
// registered region ends the series.
func (l *coordinatorLink) retry(retry registerRetry) (due bool, next registerRetry, delay time.Duration, ok bool) {
	if l.coordinator != nil {
		l.schedule.stop()
		return false, registerRetry{}, 0, false
	}
	return l.schedule.due(retry)
}

// removed: this member was removed from the cluster. The region follows
// no coordinator and registers no more until it has joined again; removed
// returns the coordinator to unwatch, nil if none.
func (l *coordinatorLink) removed() *actor.PID {
	l.schedule.stop()
	return l.lose()
}
