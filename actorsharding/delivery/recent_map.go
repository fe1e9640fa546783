package delivery

// recentMap is a map that compares the key it found last before it hashes
// one: reliable delivery looks the same key up many times in a row (an
// entity mostly hears from one producer, a producer mostly sends one
// message type), and a comparison is cheaper than the map. The zero value
// is empty and ready.
type recentMap[K comparable, V any] struct {
	m       map[K]V
	lastKey K
	lastVal V
	hasLast bool
}

// get is k's value, and whether k is in the map.
func (r *recentMap[K, V]) get(k K) (V, bool) {
	if r.hasLast && k == r.lastKey {
		return r.lastVal, true
	}
	v, ok := r.m[k]
	if ok {
		r.lastKey, r.lastVal, r.hasLast = k, v, true
	}
	return v, ok
}

// put sets k's value.
func (r *recentMap[K, V]) put(k K, v V) {
	if r.m == nil {
		r.m = map[K]V{}
	}
	r.m[k] = v
	r.lastKey, r.lastVal, r.hasLast = k, v, true
}

// remove deletes k, if there.
func (r *recentMap[K, V]) remove(k K) {
	delete(r.m, k)
	if r.hasLast && k == r.lastKey {
		r.forgetLast()
	}
}

// reset empties the map.
func (r *recentMap[K, V]) reset() {
	r.m = nil
	r.forgetLast()
}

func (r *recentMap[K, V]) forgetLast() {
	var k K
	var v V
	r.lastKey, r.lastVal, r.hasLast = k, v, false
}

// len is the number of keys.
func (r *recentMap[K, V]) len() int { return len(r.m) }

// all is the map itself, to range over; not to be written.
func (r *recentMap[K, V]) all() map[K]V { return r.m }
