// Package msgbuffer is the one bounded buffer of messages that wait (for a
// shard's home, for a shard to be ready, for a singleton to be known):
// Akka's MessageBufferMap, and with a single key its MessageBuffer.
package msgbuffer

import "slices"

// Buffer holds messages by key (a shard ID; struct{} for a single queue),
// each key's in arrival order, at most its limit of them in all. The zero
// Buffer holds nothing; make one with New.
type Buffer[K comparable, M any] struct {
	limit int
	byKey map[K]*waiting[M] // never an empty queue
	// order lists the keys in the order their messages began to wait. A
	// key that lost its last message stays in it, stale, until the next
	// compaction: taking every key one by one (a shard starting its
	// entities) would otherwise cost a scan of order per key.
	order []turn[K]
	stale int // entries of order that are stale
	turns uint64
	total int
}

// waiting is one key's messages, oldest first, and the turn they began
// to wait in.
type waiting[M any] struct {
	msgs []M
	turn uint64
}

// turn is an entry of Buffer.order: key began to wait in turn.
type turn[K comparable] struct {
	key  K
	turn uint64
}

// New returns an empty Buffer that holds at most limit messages.
func New[K comparable, M any](limit int) Buffer[K, M] {
	return Buffer[K, M]{limit: limit, byKey: map[K]*waiting[M]{}}
}

// current reports whether t is the turn key's messages wait in now (not
// a turn whose messages were all taken since).
func (b *Buffer[K, M]) current(t turn[K]) bool {
	w, ok := b.byKey[t.key]
	return ok && w.turn == t.turn
}

// Limit is the most messages the buffer holds.
func (b *Buffer[K, M]) Limit() int { return b.limit }

// Len counts the messages held, all keys together.
func (b *Buffer[K, M]) Len() int { return b.total }

// Full reports whether Add would refuse a message.
func (b *Buffer[K, M]) Full() bool { return b.total >= b.limit }

// LenOf counts key's messages.
func (b *Buffer[K, M]) LenOf(key K) int { return len(b.msgsOf(key)) }

// Has reports whether key has messages waiting.
func (b *Buffer[K, M]) Has(key K) bool { return b.byKey[key] != nil }

// msgsOf is key's messages, oldest first (nil for none).
func (b *Buffer[K, M]) msgsOf(key K) []M {
	if w := b.byKey[key]; w != nil {
		return w.msgs
	}
	return nil
}

// Keys lists the keys with messages waiting, in the order their messages
// began to wait.
func (b *Buffer[K, M]) Keys() []K {
	keys := make([]K, 0, len(b.byKey))
	for _, t := range b.order {
		if b.current(t) {
			keys = append(keys, t.key)
		}
	}
	return keys
}

// Add appends m to key's messages and reports true, or, when the buffer is
// full, keeps nothing and reports false.
func (b *Buffer[K, M]) Add(key K, m M) bool {
	if b.Full() {
		return false
	}
	b.append(key, m)
	return true
}

// AddDroppingOldest appends m to key's messages; when the buffer is full,
// it first takes the oldest message of the key that has waited longest and
// returns it (dropped) to be dropped. A buffer with no room at all (a
// limit of zero) returns m itself.
func (b *Buffer[K, M]) AddDroppingOldest(key K, m M) (dropped M, ok bool) {
	if b.limit <= 0 {
		return m, true
	}
	if b.Full() {
		for !b.current(b.order[0]) {
			b.order = b.order[1:]
			b.stale--
		}
		first := b.byKey[b.order[0].key]
		dropped, ok = first.msgs[0], true
		b.set(b.order[0].key, first.msgs[1:], 1)
	}
	b.append(key, m)
	return dropped, ok
}

func (b *Buffer[K, M]) append(key K, m M) {
	w := b.open(key)
	w.msgs = append(w.msgs, m)
	b.total++
}

// open returns key's queue, begun in a new turn if key had no messages.
func (b *Buffer[K, M]) open(key K) *waiting[M] {
	w := b.byKey[key]
	if w == nil {
		b.turns++
		w = &waiting[M]{turn: b.turns}
		b.byKey[key] = w
		b.order = append(b.order, turn[K]{key: key, turn: b.turns})
	}
	return w
}

// Prepend puts msgs, in their order, before key's messages: they are older
// than all of them (given back after they were taken). They were let in
// once already, so the limit does not refuse them.
func (b *Buffer[K, M]) Prepend(key K, msgs []M) {
	if len(msgs) == 0 {
		return
	}
	w := b.open(key)
	w.msgs = append(slices.Clone(msgs), w.msgs...)
	b.total += len(msgs)
}

// Take returns key's messages, oldest first, and forgets them.
func (b *Buffer[K, M]) Take(key K) []M {
	msgs := b.msgsOf(key)
	b.set(key, nil, len(msgs))
	return msgs
}

// TakeFunc returns key's messages that take reports true for, oldest
// first, and forgets them; the others stay in their order.
func (b *Buffer[K, M]) TakeFunc(key K, take func(M) bool) []M {
	var out []M
	msgs := b.msgsOf(key)
	kept := make([]M, 0, len(msgs))
	for _, m := range msgs {
		if take(m) {
			out = append(out, m)
		} else {
			kept = append(kept, m)
		}
	}
	b.set(key, kept, len(out))
	return out
}

// TakeWhile returns key's oldest messages up to the first that take
// reports false for, and forgets them (to expire messages that have
// waited too long: the oldest go first).
func (b *Buffer[K, M]) TakeWhile(key K, take func(M) bool) []M {
	msgs := b.msgsOf(key)
	n := 0
	for n < len(msgs) && take(msgs[n]) {
		n++
	}
	if n == 0 {
		return nil
	}
	out := slices.Clone(msgs[:n])
	b.set(key, msgs[n:], n)
	return out
}

// set makes rest key's messages after removed of them were taken.
func (b *Buffer[K, M]) set(key K, rest []M, removed int) {
	b.total -= removed
	w := b.byKey[key]
	if w == nil {
		return
	}
	if len(rest) > 0 {
		w.msgs = rest
		return
	}
	delete(b.byKey, key)
	b.stale++
	if b.stale > len(b.byKey) {
		// Compacted when stale entries outnumber the current ones: each
		// entry is dropped once, so taking n keys costs O(n) in all.
		b.order = slices.DeleteFunc(b.order, func(t turn[K]) bool { return !b.current(t) })
		b.stale = 0
	}
}
