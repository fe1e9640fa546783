package testkit

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeTB records failures instead of failing the real test; Fatal ends the
// calling goroutine like the real one, so it must run in its own goroutine
// (see runTB).
type fakeTB struct {
	testing.TB
	mu     sync.Mutex
	errors []string
	fatal  bool
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	f.mu.Lock()
	f.fatal = true
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeTB) messages() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.errors, "\n")
}

// runTB runs fn with a fakeTB in a goroutine and returns it when fn ended,
// normally or by Fatal.
func runTB(fn func(tb *fakeTB)) *fakeTB {
	tb := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(tb)
	}()
	<-done
	return tb
}

func TestLedgerStartStop(t *testing.T) {
	l := NewLedger()
	if got := l.Active("k"); len(got) != 0 {
		t.Fatalf("Active of an unknown key = %v", got)
	}
	l.Started("k", "i1")
	if got := l.Active("k"); !slices.Equal(got, []string{"i1"}) {
		t.Errorf("Active = %v, want [i1]", got)
	}
	l.Stopped("k", "i1")
	l.Started("k", "i2") // a hand-over: the old one stopped first
	l.Stopped("k", "i2")
	if got := l.Active("k"); len(got) != 0 {
		t.Errorf("Active after stops = %v", got)
	}
	if n := l.Starts("k"); n != 2 {
		t.Errorf("Starts = %d, want 2", n)
	}
	if o := l.overlapsSoFar(); len(o) != 0 {
		t.Errorf("Overlaps = %v, want none", o)
	}
	l.AssertNoOverlap(t)
}

func TestLedgerKeysAreIndependent(t *testing.T) {
	l := NewLedger()
	l.Started("a", "i1")
	l.Started("b", "i1")
	l.Started("b", "i2")
	if o := l.overlapsSoFar(); len(o) != 1 || o[0].Key != "b" {
		t.Errorf("Overlaps = %v, want one on b", o)
	}
	if n := l.Starts("a"); n != 1 {
		t.Errorf("Starts(a) = %d", n)
	}
}

func TestLedgerRecordsOverlapWhenItHappens(t *testing.T) {
	l := NewLedger()
	l.Started("k", "old")
	before := time.Now()
	l.Started("k", "new")
	after := time.Now()
	// Over before anyone looks: still recorded.
	l.Stopped("k", "old")
	l.Stopped("k", "new")

	o := l.overlapsSoFar()
	if len(o) != 1 {
		t.Fatalf("Overlaps = %v, want 1", o)
	}
	if o[0].Key != "k" || o[0].Active != "old" || o[0].Started != "new" {
		t.Errorf("overlap = %+v", o[0])
	}
	if o[0].At.Before(before) || o[0].At.After(after) {
		t.Errorf("overlap at %v, not between %v and %v", o[0].At, before, after)
	}
	if !strings.Contains(o[0].String(), "new started") {
		t.Errorf("String() = %q", o[0].String())
	}

	tb := runTB(func(tb *fakeTB) { l.AssertNoOverlap(tb) })
	if tb.fatal || !strings.Contains(tb.messages(), "k: new started") {
		t.Errorf("AssertNoOverlap reported %q (fatal %v)", tb.messages(), tb.fatal)
	}
}

func TestLedgerOverlapWithEachActive(t *testing.T) {
	l := NewLedger()
	l.Started("k", "i1")
	l.Started("k", "i2")
	l.Started("k", "i3")
	var got []string
	for _, o := range l.overlapsSoFar() {
		got = append(got, o.Active+"<"+o.Started)
	}
	if want := []string{"i1<i2", "i1<i3", "i2<i3"}; !slices.Equal(got, want) {
		t.Errorf("overlaps = %v, want %v", got, want)
	}
	l.Stopped("k", "i2")
	if got := l.Active("k"); !slices.Equal(got, []string{"i1", "i3"}) {
		t.Errorf("Active = %v, want [i1 i3] in start order", got)
	}
}

func TestLedgerRepeatedStartAndUnknownStop(t *testing.T) {
	l := NewLedger()
	l.Started("k", "i1")
	l.Started("k", "i1")
	l.Stopped("k", "never-started")
	l.Stopped("other", "i1")
	if o := l.overlapsSoFar(); len(o) != 0 {
		t.Errorf("the same incarnation twice is not an overlap: %v", o)
	}
	if got := l.Active("k"); !slices.Equal(got, []string{"i1"}) {
		t.Errorf("Active = %v, want [i1]", got)
	}
	if n := l.Starts("k"); n != 2 {
		t.Errorf("Starts = %d, want 2 (every Started counts)", n)
	}
}

func TestLedgerActiveIsACopy(t *testing.T) {
	l := NewLedger()
	l.Started("k", "i1")
	l.Active("k")[0] = "mutated"
	if got := l.Active("k"); got[0] != "i1" {
		t.Errorf("Active shares the ledger's slice: %v", got)
	}
}

func TestLedgerWaitActive(t *testing.T) {
	l := NewLedger()
	l.Started("k", "i1")
	l.Started("k", "i2")
	go func() {
		time.Sleep(20 * time.Millisecond)
		l.Stopped("k", "i1")
	}()
	if got := l.WaitActive(t, "k", 20*time.Second); got != "i2" {
		t.Errorf("WaitActive = %q, want i2", got)
	}
}

func TestLedgerWaitActiveTimesOut(t *testing.T) {
	l := NewLedger()
	l.Started("k", "i1")
	l.Started("k", "i2")
	tb := runTB(func(tb *fakeTB) { l.WaitActive(tb, "k", 30*time.Millisecond) })
	if !tb.fatal || !strings.Contains(tb.messages(), "[i1 i2]") {
		t.Errorf("WaitActive on two actives: fatal %v, %q", tb.fatal, tb.messages())
	}
}

func TestWaitFor(t *testing.T) {
	var mu sync.Mutex
	ready := false
	go func() {
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		ready = true
		mu.Unlock()
	}()
	WaitFor(t, 20*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return ready }, "ready")

	n := 0
	tb := runTB(func(tb *fakeTB) {
		WaitFor(tb, 30*time.Millisecond, func() bool { n++; return false }, "%s at %v", "x", Lazy(func() any { return n }))
	})
	msg := tb.messages()
	if !tb.fatal || !strings.Contains(msg, "waiting for x at") || strings.HasSuffix(msg, " at 0") {
		t.Errorf("WaitFor timeout: fatal %v, %q (the Lazy argument must be evaluated at the end)", tb.fatal, msg)
	}
	// Plain funcs with one result are evaluated too.
	tb = runTB(func(tb *fakeTB) {
		WaitFor(tb, 10*time.Millisecond, func() bool { return false }, "%v %v",
			func() []string { return []string{"evaluated"} }, func(int) string { return "" })
	})
	if msg := tb.messages(); !strings.Contains(msg, "[evaluated] 0x") {
		t.Errorf("func() []string argument: %q", msg)
	}
}

// Many goroutines hand keys over one after the other (stop, then start the
// next incarnation) while others read: no overlap, every start counted, and
// the race detector sees the locking.
func TestLedgerConcurrentHandOvers(t *testing.T) {
	l := NewLedger()
	const keys, rounds = 8, 200
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for k := 0; k < keys; k++ {
					key := fmt.Sprint("k", k)
					_ = l.Active(key)
					_ = l.Starts(key)
				}
				_ = l.overlapsSoFar()
			}
		}()
	}
	var writers sync.WaitGroup
	for k := 0; k < keys; k++ {
		writers.Add(1)
		go func() {
			defer writers.Done()
			key := fmt.Sprint("k", k)
			for i := 0; i < rounds; i++ {
				inc := fmt.Sprint("i", i)
				l.Started(key, inc)
				l.Stopped(key, inc)
			}
		}()
	}
	writers.Wait()
	close(stop)
	wg.Wait()
	l.AssertNoOverlap(t)
	for k := 0; k < keys; k++ {
		if n := l.Starts(fmt.Sprint("k", k)); n != rounds {
			t.Errorf("Starts(k%d) = %d, want %d", k, n, rounds)
		}
	}
}

// Concurrent starts of one key that never stop: whatever the interleaving,
// every pair overlaps exactly once.
func TestLedgerConcurrentStartsAllOverlap(t *testing.T) {
	l := NewLedger()
	const n = 50
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			l.Started("k", fmt.Sprint("i", i))
		}()
	}
	close(start)
	wg.Wait()
	if got, want := len(l.overlapsSoFar()), n*(n-1)/2; got != want {
		t.Errorf("%d overlaps, want %d", got, want)
	}
	if got := len(l.Active("k")); got != n {
		t.Errorf("%d active, want %d", got, n)
	}
}
