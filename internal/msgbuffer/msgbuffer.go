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
	byKey map[K][]M // never an empty slice
	order []K       // keys in the order their messages began to wait
	total int
}

// New returns an empty Buffer that holds at most limit messages.
func New[K comparable, M any](limit int) Buffer[K, M] {
	return Buffer[K, M]{limit: limit, byKey: map[K][]M{}}
}

// Limit is the most messages the buffer holds.
func (b *Buffer[K, M]) Limit() int { return b.limit }

// Len counts the messages held, all keys together.
func (b *Buffer[K, M]) Len() int { return b.total }

// Full reports whether Add would refuse a message.
func (b *Buffer[K, M]) Full() bool { return b.total >= b.limit }

// LenOf counts key's messages.
func (b *Buffer[K, M]) LenOf(key K) int { return len(b.byKey[key]) }

// Has reports whether key has messages waiting.
func (b *Buffer[K, M]) Has(key K) bool { return len(b.byKey[key]) > 0 }

// Keys lists the keys with messages waiting, in the order their messages
// began to wait.
func (b *Buffer[K, M]) Keys() []K { return slices.Clone(b.order) }

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
		first := b.order[0]
		dropped, ok = b.byKey[first][0], true
		b.set(first, b.byKey[first][1:], 1)
	}
	b.append(key, m)
	return dropped, ok
}

func (b *Buffer[K, M]) append(key K, m M) {
	if _, open := b.byKey[key]; !open {
		b.order = append(b.order, key)
	}
	b.byKey[key] = append(b.byKey[key], m)
	b.total++
}

// Prepend puts msgs, in their order, before key's messages: they are older
// than all of them (given back after they were taken). They were let in
// once already, so the limit does not refuse them.
func (b *Buffer[K, M]) Prepend(key K, msgs []M) {
	if len(msgs) == 0 {
		return
	}
	if _, open := b.byKey[key]; !open {
		b.order = append(b.order, key)
	}
	b.byKey[key] = append(slices.Clone(msgs), b.byKey[key]...)
	b.total += len(msgs)
}

// Take returns key's messages, oldest first, and forgets them.
func (b *Buffer[K, M]) Take(key K) []M {
	msgs := b.byKey[key]
	b.set(key, nil, len(msgs))
	return msgs
}

// TakeFunc returns key's messages that take reports true for, oldest
// first, and forgets them; the others stay in their order.
func (b *Buffer[K, M]) TakeFunc(key K, take func(M) bool) []M {
	var out []M
	msgs := b.byKey[key]
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
	msgs := b.byKey[key]
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
	if len(rest) > 0 {
		b.byKey[key] = rest
		return
	}
	if _, open := b.byKey[key]; !open {
		return
	}
	delete(b.byKey, key)
	b.order = slices.DeleteFunc(b.order, func(k K) bool { return k == key })
}
