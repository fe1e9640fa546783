package shardeddaemonprocess

import (
	"errors"
	"slices"
	"testing"
	"time"
)

var t0, t1 = time.UnixMilli(1000), time.UnixMilli(2000)

func TestWorkerIDRoundTripsAndRefusesMalformedIDs(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want workerID
		ok   bool
	}{
		{"1|4|0", workerID{1, 4, 0}, true},
		{"12|100|99", workerID{12, 100, 99}, true},
		{"1|4|4", workerID{}, false},   // index beyond the count
		{"0|4|1", workerID{}, false},   // revisions start at 1
		{"1|0|0", workerID{}, false},   // no workers
		{"1|4|-1", workerID{}, false},  // negative index
		{"1|4", workerID{}, false},     // too few parts
		{"1|4|1|2", workerID{}, false}, // too many parts
		{"1|04|1", workerID{}, false},  // not the canonical form: two IDs for one worker
		{"a|4|1", workerID{}, false},
		{"", workerID{}, false},
	} {
		got, err := parseWorkerID(tc.id)
		switch {
		case tc.ok && (err != nil || got != tc.want):
			t.Errorf("parseWorkerID(%q) = %+v, %v; want %+v", tc.id, got, err, tc.want)
		case !tc.ok && !errors.Is(err, errMalformedWorkerID):
			t.Errorf("parseWorkerID(%q) = %+v, %v; want errMalformedWorkerID", tc.id, got, err)
		case tc.ok && got.String() != tc.id:
			t.Errorf("%+v.String() = %q, want %q", got, got.String(), tc.id)
		}
	}
}

func TestChangeStopsThePreviousRevisionBeforeTheNextRuns(t *testing.T) {
	p := initialProcesses(3, t0)
	if !p.allows("1|3|2") || p.allows("1|3|3") || p.allows("2|3|0") || p.allows("1|2|0") {
		t.Fatalf("initial %+v allows the wrong workers", p)
	}
	if got := p.toStop(); got != nil {
		t.Fatalf("initial toStop = %v, want none", got)
	}

	if same, err := p.change(3, t1); err != nil || same != p {
		t.Fatalf("change to the current count = %+v, %v; want no change", same, err)
	}
	next, err := p.change(5, t1)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Processes{Revision: 2, Count: 5, PreviousCount: 3, StartedUnixMilli: 2000}); next != want {
		t.Fatalf("change(5) = %+v, want %+v", next, want)
	}
	if got, want := next.toStop(), []string{"1|3|0", "1|3|1", "1|3|2"}; !slices.Equal(got, want) {
		t.Fatalf("toStop = %v, want %v", got, want)
	}
	for _, id := range []string{"1|3|0", "2|5|0", "2|5|4"} {
		if next.allows(id) {
			t.Errorf("a change under way allows %s", id)
		}
	}
	if _, err := next.change(2, t1); !errors.Is(err, ErrChangeInProgress) {
		t.Errorf("change during a change: %v, want ErrChangeInProgress", err)
	}

	done := next.complete()
	if want := (Processes{Revision: 2, Count: 5, Completed: true, StartedUnixMilli: 2000}); done != want {
		t.Fatalf("complete = %+v, want %+v", done, want)
	}
	if !done.allows("2|5|4") || done.allows("1|3|0") || done.allows("2|3|0") {
		t.Errorf("completed %+v allows the wrong workers", done)
	}
	if _, err := done.change(0, t1); !errors.Is(err, ErrInvalidNumberOfProcesses) {
		t.Errorf("change(0): %v, want ErrInvalidNumberOfProcesses", err)
	}
}

func TestKeepAliveTargets(t *testing.T) {
	for _, tc := range []struct {
		rev               int64
		count             int
		rescaleInProgress bool
		want              []string
	}{
		{1, 2, false, []string{"1|2|0", "1|2|1"}},
		{3, 1, false, []string{"3|1|0"}},
		{3, 2, true, nil}, // a change under way: start nothing
		{0, 2, false, nil},
		{1, 0, false, nil},
	} {
		if got := keepAliveTargets(tc.rev, tc.count, tc.rescaleInProgress); !slices.Equal(got, tc.want) {
			t.Errorf("keepAliveTargets(%d, %d, %t) = %v, want %v", tc.rev, tc.count, tc.rescaleInProgress, got, tc.want)
		}
	}
}

func TestStopRound(t *testing.T) {
	r := newStopRound([]string{"1|2|0", "1|2|1"})
	if r.done() || r.stopped("9|9|0") || !r.stopped("1|2|1") || r.stopped("1|2|1") || r.done() {
		t.Fatalf("round after one stop: %+v", r)
	}
	if !r.stopped("1|2|0") || !r.done() {
		t.Fatalf("round after both stops: %+v", r)
	}
	if !newStopRound(nil).done() {
		t.Fatal("an empty round waits")
	}
}
