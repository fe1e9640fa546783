package actorsharding

import (
	"maps"
	"sync"
	"sync/atomic"
)

// cowMap is a map for many readers on hot paths and few writers: each
// change replaces the map whole (copy on write), so a reader takes no
// lock and writes nothing. Keep each one small (see entityMap).
type cowMap[K comparable, V any] struct {
	mu sync.Mutex // writers
	m  atomic.Pointer[map[K]V]
}

func (c *cowMap[K, V]) get(k K) (V, bool) {
	if m := c.m.Load(); m != nil {
		v, ok := (*m)[k]
		return v, ok
	}
	var zero V
	return zero, false
}

// swap sets k to v and returns the value it replaces, if any.
func (c *cowMap[K, V]) swap(k K, v V) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := map[K]V{}
	var old V
	var had bool
	if cur := c.m.Load(); cur != nil {
		old, had = (*cur)[k]
		next = make(map[K]V, len(*cur)+1)
		maps.Copy(next, *cur)
	}
	next[k] = v
	c.m.Store(&next)
	return old, had
}

// remove deletes k and returns its value, if it had one.
func (c *cowMap[K, V]) remove(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero V
	cur := c.m.Load()
	if cur == nil {
		return zero, false
	}
	v, ok := (*cur)[k]
	if !ok {
		return zero, false
	}
	next := fresh(*cur)
	delete(next, k)
	c.m.Store(&next)
	return v, true
}

// fresh copies m into a map made for its size: Go's maps keep the memory
// of their peak size, and so does a clone (maps.Clone).
func fresh[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
