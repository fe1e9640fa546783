package caslease

import (
	"encoding/json"
	"fmt"
	"time"
)

// leaseRecord is the lease record as the store keeps it (JSON). A record with an
// empty Holder is free: its last holder released it.
type leaseRecord struct {
	// Holder identifies the holding: the owner name and a random suffix of
	// the Lease value, so that two values of one owner (a restarted
	// process) are different holders.
	Holder string `json:"holder"`
	// Owner is the owner name of the holder, for people reading the store.
	Owner string `json:"owner,omitempty"`
	// Token is the fencing token of the holding: larger than every earlier
	// holding's. It stays in a free record, so that the next holder counts
	// on from it.
	Token uint64 `json:"token"`
	// Renewals counts the holder's renewals; every renewal changes the
	// record, so that contenders see it is alive.
	Renewals uint64 `json:"renewals"`
}

func encodeRecord(r leaseRecord) []byte {
	b, err := json.Marshal(r)
	if err != nil { // a struct of strings and integers always marshals
		return nil
	}
	return b
}

func decodeRecord(b []byte) (leaseRecord, error) {
	var r leaseRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return leaseRecord{}, fmt.Errorf("%w: %w", errBadRecord, err)
	}
	return r, nil
}

// leaseTiming is the lease's clock arithmetic. The holder counts from the start
// of its last successful write (holdFor), a contender from the first time
// it read the record's current version (waitFor); both on their own
// monotonic clocks.
type leaseTiming struct {
	// Duration is how long a record left unchanged means its holder is
	// gone.
	Duration time.Duration
	// SafetyMargin separates the holder's end from the earliest takeover,
	// on each side: the holder's time to stop what the lease protects.
	SafetyMargin time.Duration
	// Drift is the bound ρ on the clock-rate difference from real time of
	// any node (0.01: a clock runs between 0.99 and 1.01 s per second).
	Drift float64
}

// holdFor is how long after the start of its last successful write the
// holder considers itself holder: Duration × (1 − ρ) − SafetyMargin.
func (t leaseTiming) holdFor() time.Duration {
	return time.Duration(float64(t.Duration)*(1-t.Drift)) - t.SafetyMargin
}

// waitFor is how long a contender must see a held record unchanged before
// it may take it over: Duration × (1 + ρ) + SafetyMargin.
func (t leaseTiming) waitFor() time.Duration {
	return time.Duration(float64(t.Duration)*(1+t.Drift)) + t.SafetyMargin
}

// view is one read of the record: its version (0 when absent) and content.
type view struct {
	Found       bool
	Version     uint64
	leaseRecord leaseRecord
}

// kind is what the lease does next.
type kind int

const (
	// kindBusy: another holder has the record; try again later (RetryIn says
	// when the takeover would be due if the record stays unchanged).
	kindBusy kind = iota
	// kindWrite: compare-and-set leaseRecord on Version (0: create the key).
	kindWrite
	// kindLost: the holding is over (Reason says why).
	kindLost
)

// decision is the outcome of an observation.
type decision struct {
	Kind        kind
	Version     uint64        // kindWrite: the version to compare with
	leaseRecord leaseRecord   // kindWrite: what to write
	RetryIn     time.Duration // kindBusy
	Reason      string        // kindLost
}

// state is one Lease value's decisions: as a contender it tracks how long
// it has seen another holder's record unchanged, as a holder how long its
// holding lasts. It does no I/O and reads no clock: every method is given
// the time, so the rules are table-tested.
type state struct {
	timing leaseTiming
	self   string // leaseRecord.Holder of this Lease value
	owner  string

	// Holding (held is true from a successful acquiring write until the
	// loss or release).
	held     bool
	token    uint64
	version  uint64    // the version of this holder's last known write
	renewed  time.Time // start of the last successful write
	renewals uint64

	// Contending: the version of another holder's record and when this
	// value first read it.
	seen   bool
	seenV  uint64
	seenAt time.Time
}

func newState(timing leaseTiming, self, owner string) state {
	return state{timing: timing, self: self, owner: owner}
}

// observe decides, for a value that does not hold the lease, what to do
// with a read of the record at now (when the read's answer arrived: the
// version existed by then).
func (s *state) observe(v view, now time.Time) decision {
	rec := v.leaseRecord
	if v.Found && rec.Holder != "" && rec.Holder != s.self {
		s.watch(v, now)
		if waited := now.Sub(s.seenAt); waited < s.timing.waitFor() {
			return decision{Kind: kindBusy, RetryIn: s.timing.waitFor() - waited}
		}
	}
	// Free, absent, this value's own earlier holding, or another's left
	// unchanged for waitFor: take it with a larger token.
	token := max(rec.Token, v.Version) + 1
	return decision{Kind: kindWrite, Version: v.Version,
		leaseRecord: leaseRecord{Holder: s.self, Owner: s.owner, Token: token}}
}

// watch records a read of the record by a value that is not about to
// write (Lease.Observe): when another holder's record shows a new version,
// the count of how long it stays unchanged starts at now.
func (s *state) watch(v view, now time.Time) {
	if s.held || !v.Found || v.leaseRecord.Holder == "" || v.leaseRecord.Holder == s.self {
		return
	}
	if !s.seen || s.seenV != v.Version {
		s.seen, s.seenV, s.seenAt = true, v.Version, now
	}
}

// acquired records a successful acquiring write of rec that started at
// start and produced version.
func (s *state) acquired(rec leaseRecord, version uint64, start time.Time) {
	s.held, s.token, s.version, s.renewed, s.renewals = true, rec.Token, version, start, rec.Renewals
	s.seen = false
}

// heldAt reports whether the holding still counts at now.
func (s *state) heldAt(now time.Time) bool {
	return s.held && now.Sub(s.renewed) < s.timing.holdFor()
}

// lossAt is when the holding stops counting unless renewed.
func (s *state) lossAt() time.Time { return s.renewed.Add(s.timing.holdFor()) }

// renewal is the holder's next write.
func (s *state) renewal() decision {
	return decision{Kind: kindWrite, Version: s.version,
		leaseRecord: leaseRecord{Holder: s.self, Owner: s.owner, Token: s.token, Renewals: s.renewals + 1}}
}

// renewed records a successful renewal write that started at start.
func (s *state) renewedOK(rec leaseRecord, version uint64, start time.Time) {
	if !s.held {
		return
	}
	s.version, s.renewals = version, rec.Renewals
	if start.After(s.renewed) {
		s.renewed = start
	}
}

// conflict decides, for the holder whose renewal found another version,
// on a read of the record: its own holding still there (an earlier write
// whose answer was lost went through) means renew on that version, keeping
// the clock of the last write it knows to have succeeded; anything else
// means the holding is over.
func (s *state) conflict(v view) decision {
	if !s.held {
		return decision{Kind: kindLost, Reason: "not held"}
	}
	switch {
	case !v.Found:
		return s.lose("the record was deleted")
	case v.leaseRecord.Holder == "":
		return s.lose("the record was freed by someone else")
	case v.leaseRecord.Holder != s.self || v.leaseRecord.Token != s.token:
		return s.lose(fmt.Sprintf("the record is held by %q with token %d", v.leaseRecord.Owner, v.leaseRecord.Token))
	}
	s.version, s.renewals = v.Version, v.leaseRecord.Renewals
	return s.renewal()
}

// expire ends the holding when its time is up at now.
func (s *state) expire(now time.Time) (decision, bool) {
	if !s.held || s.heldAt(now) {
		return decision{}, false
	}
	return s.lose(fmt.Sprintf("no successful renewal for %v", s.timing.holdFor())), true
}

func (s *state) lose(reason string) decision {
	s.held = false
	return decision{Kind: kindLost, Reason: reason}
}

// release is the write that frees the record: the token stays for the next
// holder to count on from. ok is false when nothing is held.
func (s *state) release() (decision, bool) {
	if !s.held {
		return decision{}, false
	}
	s.held = false
	return decision{Kind: kindWrite, Version: s.version,
		leaseRecord: leaseRecord{Owner: s.owner, Token: s.token, Renewals: s.renewals}}, true
}

// releaseAfterLoss is the write that frees the record of a holding already
// declared lost, if the record still names it (the holder lost it to
// timeouts, not to another holder): the holder has stopped, so others need
// not wait waitFor. ok is false when the record is someone else's.
func (s *state) releaseAfterLoss(v view) (decision, bool) {
	if !v.Found || v.leaseRecord.Holder != s.self || v.leaseRecord.Token != s.token || s.token == 0 {
		return decision{}, false
	}
	return decision{Kind: kindWrite, Version: v.Version,
		leaseRecord: leaseRecord{Owner: s.owner, Token: v.leaseRecord.Token, Renewals: v.leaseRecord.Renewals}}, true
}
