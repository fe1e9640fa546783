package testkit

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/protoshard/protoshard/internal/testwait"
)

// Ledger records when activations (a singleton's child, an entity) start
// and stop, so a test can check that at most one incarnation of each key is
// alive at any moment. Actors call Started and Stopped from their lifecycle
// handlers (actor.Started / actor.Stopped); an overlap is recorded at the
// moment the second incarnation starts, so a brief double activation is
// caught even if it is over before the test looks.
//
// Keys name what must be unique ("singleton/counter", "entity/<type>/<id>");
// incarnations tell the copies apart (for example member id + PID). A Ledger
// is safe for concurrent use.
type Ledger struct {
	mu       sync.Mutex
	active   map[string][]string // key -> incarnations alive, in start order
	starts   map[string]int
	overlaps []overlap
}

// overlap is one violation of at-most-one: Started came for Key while
// Active, another incarnation of the same key, had not stopped.
type overlap struct {
	Key     string    // the entity (or singleton) key
	Active  string    // the incarnation that was still running
	Started string    // the incarnation that started meanwhile
	At      time.Time // when the second one started
}

// String describes the overlap for a failure message.
func (o overlap) String() string {
	return fmt.Sprintf("%s: %s started at %s while %s was active",
		o.Key, o.Started, o.At.Format("15:04:05.000000"), o.Active)
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{active: map[string][]string{}, starts: map[string]int{}}
}

// Started records that incarnation of key is now alive. If another
// incarnation of key is alive, an overlap is recorded for each. A repeated
// Started of an incarnation already alive is counted but is not an overlap
// (it is the same copy, reported twice).
func (l *Ledger) Started(key, incarnation string) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.starts[key]++
	alive := l.active[key]
	if slices.Contains(alive, incarnation) {
		return
	}
	for _, other := range alive {
		l.overlaps = append(l.overlaps, overlap{Key: key, Active: other, Started: incarnation, At: now})
	}
	l.active[key] = append(alive, incarnation)
}

// Stopped records that incarnation of key is gone. Stopping an incarnation
// that is not alive is ignored: Stopped may come from a cleanup path that
// runs whether or not the activation had started.
func (l *Ledger) Stopped(key, incarnation string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	alive := l.active[key]
	i := slices.Index(alive, incarnation)
	if i < 0 {
		return
	}
	alive = slices.Delete(slices.Clone(alive), i, i+1)
	if len(alive) == 0 {
		delete(l.active, key)
		return
	}
	l.active[key] = alive
}

// Active returns the incarnations of key alive now, in start order.
func (l *Ledger) Active(key string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.active[key])
}

// Starts returns how many times key was started, in total.
func (l *Ledger) Starts(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.starts[key]
}

// overlapsSoFar returns every overlap recorded so far, in order.
func (l *Ledger) overlapsSoFar() []overlap {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.overlaps)
}

// AssertNoOverlap fails t (without stopping it) if any overlap was
// recorded, listing them all.
func (l *Ledger) AssertNoOverlap(t testing.TB) {
	t.Helper()
	overlaps := l.overlapsSoFar()
	if len(overlaps) == 0 {
		return
	}
	lines := make([]string, len(overlaps))
	for i, o := range overlaps {
		lines[i] = "  " + o.String()
	}
	t.Errorf("at-most-one violated: %d overlapping activation(s):\n%s", len(overlaps), strings.Join(lines, "\n"))
}

// WaitActive waits until exactly one incarnation of key is alive and
// returns it; it fails t (Fatal) after timeout.
func (l *Ledger) WaitActive(t testing.TB, key string, timeout time.Duration) string {
	t.Helper()
	var got string
	WaitFor(t, timeout, func() bool {
		alive := l.Active(key)
		if len(alive) == 1 {
			got = alive[0]
			return true
		}
		return false
	}, "exactly one active incarnation of %s (active now: %v)", key, Lazy(func() any { return l.Active(key) }))
	return got
}

// WaitFor polls cond until it is true, and fails t (Fatal) with msg when
// timeout passes first. msg is formatted with args; Lazy args, and funcs
// with no parameters and one result, are evaluated at failure time.
//
// Tests wait on conditions with generous timeouts rather than sleeping: the
// machines they run on are slow and shared, so only the event matters, never
// the time it took.
//
// It must be called from the test's goroutine, like t.Fatal.
func WaitFor(t testing.TB, timeout time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	testwait.For(t, timeout, cond, msg, args...)
}

// Lazy is a WaitFor message argument computed only when the message is
// printed, so the failure shows the state at the timeout, not at the call:
// testkit.Lazy(func() any { return node.Membership.Members() }). Any
// argument that is a func with no parameters and one result (such as
// func() []string) is treated the same way.
type Lazy func() any
