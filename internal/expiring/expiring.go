// Package expiring keeps what a node must remember about removed members
// for a while, but not for ever: the IDs of removed members, the actor
// systems and addresses it quarantines. A node that re-joins after each
// removal gets a new member ID each time, so a map that only grows would
// grow for the life of the process.
package expiring

import "time"

// SafetyFactor is how many times the longest interval a removed member's
// leftovers can matter for (see Window) an entry is kept at least.
const SafetyFactor = 10

// Window returns how long to keep an entry that must outlive bound, the
// longest a removed member's leftovers can still matter for: def, or
// SafetyFactor times bound (taken as a minute at least) if that is longer.
// The factor covers what the bound cannot know of: a process or a network
// that stalls a while on top of it.
func Window(def, bound time.Duration) time.Duration {
	return max(def, SafetyFactor*max(bound, time.Minute))
}

// Set maps keys to values, each kept at least its retention after it was
// last put. It is pruned on writes only (Put), so reads take no clock: an
// entry past its retention stays until the next Put, never less long. An
// entry that pinned (if set) reports in use when it would expire starts
// its retention again (Akka's rule for quarantined associations:
// quarantined and unused for the duration). Not safe for concurrent use.
type Set[V any] struct {
	retention time.Duration
	pinned    func(key string) bool
	entries   map[string]entry[V]
	// due: no entry expires before it (zero: the set is empty).
	due time.Time
	// peak is the size the map grew to since it was last made: Go's maps
	// keep the memory of their peak, so one that lost most of it is
	// copied into a new one.
	peak int
}

type entry[V any] struct {
	value V
	at    time.Time
}

// NewSet returns an empty set whose entries are kept retention; pinned
// (nil: none) keeps an entry in use past that.
func NewSet[V any](retention time.Duration, pinned func(key string) bool) Set[V] {
	return Set[V]{retention: retention, pinned: pinned}
}

// Retention is how long an entry is kept at least.
func (s *Set[V]) Retention() time.Duration { return s.retention }

// Put sets key to v as of now, after it pruned what expired by now.
func (s *Set[V]) Put(key string, v V, now time.Time) {
	s.Prune(now)
	if s.entries == nil {
		s.entries = map[string]entry[V]{}
	}
	s.entries[key] = entry[V]{value: v, at: now}
	s.peak = max(s.peak, len(s.entries))
	if exp := now.Add(s.retention); s.due.IsZero() || exp.Before(s.due) {
		s.due = exp
	}
}

// Get returns key's value.
func (s *Set[V]) Get(key string) (V, bool) {
	e, ok := s.entries[key]
	return e.value, ok
}

// Has reports whether key is in the set.
func (s *Set[V]) Has(key string) bool {
	_, ok := s.entries[key]
	return ok
}

// Delete removes key.
func (s *Set[V]) Delete(key string) { delete(s.entries, key) }

// Len is the number of entries.
func (s *Set[V]) Len() int { return len(s.entries) }

// Prune removes the entries whose retention has passed by now, unless
// pinned; a pinned one starts its retention again at now. It scans only
// when an entry is due.
func (s *Set[V]) Prune(now time.Time) {
	if s.due.IsZero() || now.Before(s.due) {
		return
	}
	var due time.Time
	for k, e := range s.entries {
		exp := e.at.Add(s.retention)
		if !now.Before(exp) {
			if s.pinned == nil || !s.pinned(k) {
				delete(s.entries, k)
				continue
			}
			e.at, exp = now, now.Add(s.retention)
			s.entries[k] = e
		}
		if due.IsZero() || exp.Before(due) {
			due = exp
		}
	}
	s.due = due
	if len(s.entries) < s.peak/4 {
		fresh := make(map[string]entry[V], len(s.entries))
		for k, e := range s.entries {
			fresh[k] = e
		}
		s.entries, s.peak = fresh, len(fresh)
	}
}
