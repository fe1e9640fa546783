package caslease

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var testTiming = leaseTiming{Duration: 5 * time.Second, SafetyMargin: time.Second, Drift: 0.01}

func TestTiming(t *testing.T) {
	if got, want := testTiming.holdFor(), 3950*time.Millisecond; got != want {
		t.Errorf("holdFor = %v, want %v", got, want)
	}
	if got, want := testTiming.waitFor(), 6050*time.Millisecond; got != want {
		t.Errorf("waitFor = %v, want %v", got, want)
	}
	// The holder's end, at the slowest clock, comes before the earliest
	// takeover, at the fastest: Duration − m/(1−ρ) < Duration + m/(1+ρ).
	holderEnd := float64(testTiming.holdFor()) / (1 - testTiming.Drift)
	takeover := float64(testTiming.waitFor()) / (1 + testTiming.Drift)
	if holderEnd >= takeover {
		t.Errorf("holder ends at %v real time, a contender may take over at %v", time.Duration(holderEnd), time.Duration(takeover))
	}
}

func TestObserve(t *testing.T) {
	t0 := time.Now()
	other := leaseRecord{Holder: "b#2", Owner: "b", Token: 7, Renewals: 3}
	cases := []struct {
		name  string
		seen  []view        // earlier reads, at t0, t0+1s, ...
		view  view          // the read decided on
		at    time.Duration // after t0
		kind  kind          // expected
		retry time.Duration // kindBusy
		write leaseRecord   // kindWrite
		onV   uint64        // kindWrite
	}{
		{name: "absent: create with token 1", view: view{}, kind: kindWrite,
			write: leaseRecord{Holder: "a#1", Owner: "a", Token: 1}},
		{name: "free: take at once, token past version and token", view: view{Found: true, Version: 40, leaseRecord: leaseRecord{Token: 9}},
			kind: kindWrite, onV: 40, write: leaseRecord{Holder: "a#1", Owner: "a", Token: 41}},
		{name: "free with a token above the version", view: view{Found: true, Version: 4, leaseRecord: leaseRecord{Token: 9}},
			kind: kindWrite, onV: 4, write: leaseRecord{Holder: "a#1", Owner: "a", Token: 10}},
		{name: "own earlier holding: take at once", view: view{Found: true, Version: 12, leaseRecord: leaseRecord{Holder: "a#1", Token: 11}},
			kind: kindWrite, onV: 12, write: leaseRecord{Holder: "a#1", Owner: "a", Token: 13}},
		{name: "held, first seen: wait the whole waitFor", view: view{Found: true, Version: 20, leaseRecord: other},
			at: 10 * time.Second, kind: kindBusy, retry: testTiming.waitFor()},
		{name: "held, seen unchanged for less than waitFor", seen: []view{{Found: true, Version: 20, leaseRecord: other}},
			view: view{Found: true, Version: 20, leaseRecord: other}, at: 6 * time.Second, kind: kindBusy, retry: 50 * time.Millisecond},
		{name: "held, unchanged for waitFor: take over on that version", seen: []view{{Found: true, Version: 20, leaseRecord: other}},
			view: view{Found: true, Version: 20, leaseRecord: other}, at: testTiming.waitFor(), kind: kindWrite, onV: 20,
			write: leaseRecord{Holder: "a#1", Owner: "a", Token: 21}},
		{name: "renewed meanwhile: the count starts again", seen: []view{{Found: true, Version: 20, leaseRecord: other}},
			view: view{Found: true, Version: 25, leaseRecord: other}, at: 7 * time.Second, kind: kindBusy, retry: testTiming.waitFor()},
		{name: "count from the first read of the version, not a later one",
			seen: []view{{Found: true, Version: 20, leaseRecord: other}, {Found: true, Version: 20, leaseRecord: other}},
			view: view{Found: true, Version: 20, leaseRecord: other}, at: 6050 * time.Millisecond, kind: kindWrite, onV: 20,
			write: leaseRecord{Holder: "a#1", Owner: "a", Token: 21}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newState(testTiming, "a#1", "a")
			for i, v := range c.seen {
				if d := s.observe(v, t0.Add(time.Duration(i)*time.Second)); d.Kind != kindBusy {
					t.Fatalf("earlier read %d: %+v, want kindBusy", i, d)
				}
			}
			d := s.observe(c.view, t0.Add(c.at))
			if d.Kind != c.kind {
				t.Fatalf("observe = %+v, want kind %v", d, c.kind)
			}
			switch d.Kind {
			case kindBusy:
				if d.RetryIn != c.retry {
					t.Fatalf("RetryIn = %v, want %v", d.RetryIn, c.retry)
				}
			case kindWrite:
				if d.leaseRecord != c.write || d.Version != c.onV {
					t.Fatalf("write %+v on %d, want %+v on %d", d.leaseRecord, d.Version, c.write, c.onV)
				}
			}
		})
	}
}

// A holder's life: its holding lasts holdFor from the start of its last
// successful write, renewals count up and keep the token.
func TestHolding(t *testing.T) {
	t0 := time.Now()
	s := newState(testTiming, "a#1", "a")
	d := s.observe(view{}, t0)
	s.acquired(d.leaseRecord, 5, t0)
	if !s.heldAt(t0.Add(testTiming.holdFor()-time.Millisecond)) || s.heldAt(t0.Add(testTiming.holdFor())) {
		t.Fatalf("held until %v, want exactly holdFor %v after the write's start", s.lossAt().Sub(t0), testTiming.holdFor())
	}
	r := s.renewal()
	if r.Version != 5 || r.leaseRecord != (leaseRecord{Holder: "a#1", Owner: "a", Token: 1, Renewals: 1}) {
		t.Fatalf("renewal = %+v", r)
	}
	s.renewedOK(r.leaseRecord, 9, t0.Add(time.Second))
	if got := s.lossAt().Sub(t0); got != time.Second+testTiming.holdFor() {
		t.Fatalf("after a renewal started at 1s, loss at %v", got)
	}
	// An answer arriving late for an older request never moves the clock back.
	s.renewedOK(r.leaseRecord, 9, t0.Add(500*time.Millisecond))
	if got := s.lossAt().Sub(t0); got != time.Second+testTiming.holdFor() {
		t.Fatalf("an older renewal moved the loss to %v", got)
	}
	if r := s.renewal(); r.Version != 9 || r.leaseRecord.Renewals != 2 || r.leaseRecord.Token != 1 {
		t.Fatalf("second renewal = %+v", r)
	}
	if _, over := s.expire(t0.Add(4 * time.Second)); over {
		t.Fatal("expired before its time")
	}
	d, over := s.expire(t0.Add(time.Second + testTiming.holdFor()))
	if !over || d.Kind != kindLost || !strings.Contains(d.Reason, "no successful renewal") {
		t.Fatalf("expire = %+v, %v", d, over)
	}
	if s.heldAt(t0.Add(time.Second)) {
		t.Fatal("held after the loss")
	}
}

func TestConflict(t *testing.T) {
	t0 := time.Now()
	cases := []struct {
		name     string
		view     view
		wantLost string // reason substring; "" means it keeps the holding
	}{
		{"own earlier write went through: adopt its version", view{Found: true, Version: 30,
			leaseRecord: leaseRecord{Holder: "a#1", Owner: "a", Token: 1, Renewals: 4}}, ""},
		{"another holder took over", view{Found: true, Version: 30, leaseRecord: leaseRecord{Holder: "b#2", Owner: "b", Token: 31}}, "held by \"b\""},
		{"own name, another token (a later holding)", view{Found: true, Version: 30, leaseRecord: leaseRecord{Holder: "a#1", Token: 29}}, "token 29"},
		{"freed from outside", view{Found: true, Version: 30, leaseRecord: leaseRecord{Token: 1}}, "freed"},
		{"deleted", view{}, "deleted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newState(testTiming, "a#1", "a")
			s.acquired(leaseRecord{Holder: "a#1", Owner: "a", Token: 1}, 5, t0)
			d := s.conflict(c.view)
			if c.wantLost == "" {
				if d.Kind != kindWrite || d.Version != 30 || d.leaseRecord.Renewals != 5 || !s.heldAt(t0) {
					t.Fatalf("conflict = %+v, want a renewal on version 30", d)
				}
				if s.lossAt() != t0.Add(testTiming.holdFor()) {
					t.Fatal("adopting a write of unknown start moved the loss")
				}
				return
			}
			if d.Kind != kindLost || !strings.Contains(d.Reason, c.wantLost) || s.heldAt(t0) {
				t.Fatalf("conflict = %+v (held %v), want lost with %q", d, s.heldAt(t0), c.wantLost)
			}
		})
	}
}

func TestRelease(t *testing.T) {
	t0 := time.Now()
	s := newState(testTiming, "a#1", "a")
	if _, ok := s.release(); ok {
		t.Fatal("release without a holding")
	}
	s.acquired(leaseRecord{Holder: "a#1", Owner: "a", Token: 3, Renewals: 0}, 8, t0)
	s.renewedOK(leaseRecord{Holder: "a#1", Owner: "a", Token: 3, Renewals: 1}, 9, t0)
	d, ok := s.release()
	if !ok || d.Version != 9 || d.leaseRecord != (leaseRecord{Owner: "a", Token: 3, Renewals: 1}) {
		t.Fatalf("release = %+v, %v; want a free record keeping token 3 on version 9", d, ok)
	}
	if s.heldAt(t0) {
		t.Fatal("held after release")
	}
	// After a loss (or a release whose write raced a renewal): free the
	// record only while it is this holding's.
	mine := view{Found: true, Version: 12, leaseRecord: leaseRecord{Holder: "a#1", Owner: "a", Token: 3, Renewals: 2}}
	if d, ok := s.releaseAfterLoss(mine); !ok || d.Version != 12 || d.leaseRecord.Holder != "" || d.leaseRecord.Token != 3 {
		t.Fatalf("releaseAfterLoss(own record) = %+v, %v", d, ok)
	}
	for _, v := range []view{{}, {Found: true, Version: 12, leaseRecord: leaseRecord{Holder: "b#2", Token: 13}},
		{Found: true, Version: 12, leaseRecord: leaseRecord{Holder: "a#1", Token: 13}}} {
		if d, ok := s.releaseAfterLoss(v); ok {
			t.Fatalf("releaseAfterLoss(%+v) = %+v, want nothing to write", v, d)
		}
	}
}

func TestRecordCoding(t *testing.T) {
	r := leaseRecord{Holder: "a#1", Owner: "a", Token: 3, Renewals: 2}
	got, err := decodeRecord(encodeRecord(r))
	if err != nil || got != r {
		t.Fatalf("round trip = %+v, %v", got, err)
	}
	if _, err := decodeRecord([]byte("owner-a")); !errors.Is(err, errBadRecord) {
		t.Fatalf("decoding a session lease's value: %v, want errBadRecord", err)
	}
}

// watch (Lease.Observe) starts the count of another holder's version; a
// later observe counts from there.
func TestWatch(t *testing.T) {
	t0 := time.Now()
	other := view{Found: true, Version: 20, leaseRecord: leaseRecord{Holder: "b#2", Owner: "b", Token: 7}}
	s := newState(testTiming, "a#1", "a")
	s.watch(other, t0)
	s.watch(other, t0.Add(2*time.Second)) // the same version: the count goes on
	if d := s.observe(other, t0.Add(testTiming.waitFor())); d.Kind != kindWrite || d.Version != 20 {
		t.Fatalf("observe after watching for waitFor = %+v, want a takeover on version 20", d)
	}

	s = newState(testTiming, "a#1", "a")
	s.watch(other, t0)
	renewed := other
	renewed.Version = 21
	s.watch(renewed, t0.Add(time.Second)) // renewed: the count starts again
	if d := s.observe(renewed, t0.Add(testTiming.waitFor())); d.Kind != kindBusy || d.RetryIn != time.Second {
		t.Fatalf("observe = %+v, want busy for another second", d)
	}

	// Nothing to count: a free record, this value's own, or while holding.
	for _, v := range []view{{}, {Found: true, Version: 5, leaseRecord: leaseRecord{Token: 3}}, {Found: true, Version: 5, leaseRecord: leaseRecord{Holder: "a#1"}}} {
		s := newState(testTiming, "a#1", "a")
		s.watch(v, t0)
		if s.seen {
			t.Errorf("watch(%+v) started a count", v)
		}
	}
	s = newState(testTiming, "a#1", "a")
	s.acquired(leaseRecord{Holder: "a#1", Owner: "a", Token: 1}, 4, t0)
	s.watch(other, t0)
	if s.seen {
		t.Error("a holder started a count")
	}
}
