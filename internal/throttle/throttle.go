// Package throttle decides which of a stream of repeated log lines to
// write: at most one per key and interval, with a count of the ones held
// back. It keeps no clock and starts no timer; the caller passes the time
// and flushes the counts (see Limiter.Flush).
package throttle

import (
	"slices"
	"strings"
	"time"
)

// Limiter lets the first event of a key through, holds back the others of
// the same key for interval, and counts them. The zero value is not
// usable; see New. Not safe for concurrent use.
type Limiter struct {
	interval time.Duration
	windows  map[string]*window
}

type window struct {
	opened     time.Time
	suppressed int
}

// Decision is what Allow decided about one event.
type Decision struct {
	// Log: write this event.
	Log bool
	// Suppressed is, when Log, how many events of the key were held back
	// in the window before it and not reported by Flush.
	Suppressed int
	// FlushAt is, for the first event held back in a window, when that
	// window ends: Flush then reports it. Zero otherwise.
	FlushAt time.Time
}

// Held is the count of one key's events held back in a window that ended.
type Held struct {
	Key   string
	Count int
}

// New returns a Limiter that lets one event per key through per interval.
func New(interval time.Duration) *Limiter {
	return &Limiter{interval: interval, windows: map[string]*window{}}
}

// Interval is the limiter's window length.
func (l *Limiter) Interval() time.Duration { return l.interval }

// Allow decides about an event of key at now.
func (l *Limiter) Allow(key string, now time.Time) Decision {
	w, ok := l.windows[key]
	if !ok || !now.Before(w.opened.Add(l.interval)) {
		held := 0
		if ok {
			held = w.suppressed
		}
		l.windows[key] = &window{opened: now}
		return Decision{Log: true, Suppressed: held}
	}
	w.suppressed++
	if w.suppressed == 1 {
		return Decision{FlushAt: w.opened.Add(l.interval)}
	}
	return Decision{}
}

// Flush returns, by key, the counts held back in the windows that ended by
// now, and forgets those windows: the next event of their key is let
// through.
func (l *Limiter) Flush(now time.Time) []Held {
	var out []Held
	for key, w := range l.windows {
		if now.Before(w.opened.Add(l.interval)) {
			continue
		}
		if w.suppressed > 0 {
			out = append(out, Held{Key: key, Count: w.suppressed})
		}
		delete(l.windows, key)
	}
	slices.SortFunc(out, func(a, b Held) int { return strings.Compare(a.Key, b.Key) })
	return out
}
