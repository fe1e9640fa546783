package shardeddaemonprocess

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

var (
	// ErrChangeInProgress: ChangeNumberOfProcesses came while an earlier
	// change was still stopping the previous revision's workers (Akka
	// refuses it as well).
	ErrChangeInProgress = errors.New("shardeddaemonprocess: a change of the number of processes is in progress")
	// ErrInvalidNumberOfProcesses: the number of processes is below 1.
	ErrInvalidNumberOfProcesses = errors.New("shardeddaemonprocess: the number of processes must be at least 1")
)

// Processes is what the coordinator stores: the number of workers and the
// revision they run under. While Completed is false, a change is under
// way: the workers of revision Revision-1 (PreviousCount of them) are
// being stopped, and no worker may run until all have.
type Processes struct {
	Revision      int64
	Count         int
	PreviousCount int
	Completed     bool
	// StartedUnixMilli is when the revision began (Akka's started).
	StartedUnixMilli int64
}

// initialProcesses is the state of a daemon process that never changed
// its number of processes: Init's count, revision 1, begun at now.
func initialProcesses(count int, now time.Time) Processes {
	return Processes{Revision: 1, Count: count, Completed: true, StartedUnixMilli: now.UnixMilli()}
}

// change begins a change to count workers at now: the new revision, not
// yet completed, whose workers wait for the current ones to stop. The
// current count again changes nothing (as in Akka).
func (p Processes) change(count int, now time.Time) (Processes, error) {
	switch {
	case count < 1:
		return p, fmt.Errorf("%d: %w", count, ErrInvalidNumberOfProcesses)
	case !p.Completed:
		return p, ErrChangeInProgress
	case count == p.Count:
		return p, nil
	}
	return Processes{Revision: p.Revision + 1, Count: count, PreviousCount: p.Count, StartedUnixMilli: now.UnixMilli()}, nil
}

// complete ends a change: the new revision's workers may run.
func (p Processes) complete() Processes {
	p.Completed = true
	p.PreviousCount = 0
	return p
}

// toStop returns the workers a change must stop before it completes.
func (p Processes) toStop() []string {
	if p.Completed || p.Revision < 2 {
		return nil
	}
	return workerIDs(p.Revision-1, p.PreviousCount)
}

// allows reports whether the worker id may run: it belongs to the current,
// completed revision.
func (p Processes) allows(id string) bool {
	w, err := parseWorkerID(id)
	return err == nil && p.Completed && w.revision == p.Revision && w.count == p.Count
}

// keepAliveTargets returns the workers a pinger starts when the
// coordinator answered n: none while a change is under way.
func keepAliveTargets(rev int64, count int, rescaleInProgress bool) []string {
	if rescaleInProgress || rev < 1 || count < 1 {
		return nil
	}
	return workerIDs(rev, count)
}

// stopRound tracks the workers a change waits for.
type stopRound struct {
	remaining []string
}

func newStopRound(ids []string) stopRound { return stopRound{remaining: slices.Clone(ids)} }

// stopped records that id stopped; it reports whether id was awaited.
func (r *stopRound) stopped(id string) bool {
	i := slices.Index(r.remaining, id)
	if i < 0 {
		return false
	}
	r.remaining = slices.Delete(r.remaining, i, i+1)
	return true
}

func (r stopRound) done() bool { return len(r.remaining) == 0 }
