package shard

import (
	"hash/maphash"
	"iter"
)

// entityTable holds a shard's entity records by entity ID: a hash table
// with open addressing and linear probing whose slots point at the
// records, each record carrying its own ID. A Go map of the records by ID
// spends a 24-byte slot on every entity (the key's string header and the
// pointer), about 44 bytes with its spare room; here a slot is the 8-byte
// pointer and a byte of its hash, about 15 bytes with spare room, and the
// ID's string header is in the record. There is one record per running
// entity, so this is most of what an idle entity costs its shard.
//
// Deleting moves the records that follow back into the hole (no
// tombstones), so a lookup never walks further than the run of records
// around its home slot. The zero value is an empty table, ready to use.
// Not safe for concurrent use.
type entityTable struct {
	seed  maphash.Seed
	slots []*entityRecord // nil or a power of two long
	// tags: for each slot, 0 if it is empty, else 7 bits of its record's
	// hash with the top bit set: a lookup reads a record only when its
	// tag matches, rather than at every slot of the run.
	tags []uint8
	n    int
}

// entityTableMinSlots is the size of the first slots of a table.
const entityTableMinSlots = 8

// len counts the records.
func (t *entityTable) len() int { return t.n }

// get returns the record of entity id, nil if there is none.
func (t *entityTable) get(id string) *entityRecord {
	if t.n == 0 {
		return nil
	}
	mask := len(t.slots) - 1
	h := t.hash(id)
	tag := tagOf(h)
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch t.tags[i] {
		case 0:
			return nil
		case tag:
			if r := t.slots[i]; r.id == id {
				return r
			}
		}
	}
}

// put stores r under r.id, in place of the record with that ID if there
// is one (its ID string then replaces the other's, as with a map key).
func (t *entityTable) put(r *entityRecord) {
	if (t.n+1)*8 > len(t.slots)*7 { // more than 7/8 full: twice the room
		t.grow()
	}
	mask := len(t.slots) - 1
	h := t.hash(r.id)
	tag := tagOf(h)
	i := int(h) & mask
	for ; t.tags[i] != 0; i = (i + 1) & mask {
		if t.tags[i] == tag && t.slots[i].id == r.id {
			t.slots[i] = r
			return
		}
	}
	t.slots[i], t.tags[i] = r, tag
	t.n++
}

// delete removes the record of entity id, if there is one.
func (t *entityTable) delete(id string) {
	if t.n == 0 {
		return
	}
	mask := len(t.slots) - 1
	h := t.hash(id)
	tag := tagOf(h)
	hole := int(h) & mask
	for ; ; hole = (hole + 1) & mask {
		if t.tags[hole] == 0 {
			return
		}
		if t.tags[hole] == tag && t.slots[hole].id == id {
			break
		}
	}
	// Move back each following record of the run that may sit in the hole:
	// one whose home is not in (hole, j], so that it is still found from
	// its home without crossing an empty slot.
	for j := (hole + 1) & mask; t.tags[j] != 0; j = (j + 1) & mask {
		if (j-int(t.hash(t.slots[j].id))&mask)&mask >= (j-hole)&mask {
			t.slots[hole], t.tags[hole] = t.slots[j], t.tags[j]
			hole = j
		}
	}
	t.slots[hole], t.tags[hole] = nil, 0
	t.n--
}

// all yields the records in no particular order. The table must not be
// changed meanwhile (a delete may move a record past the iteration).
func (t *entityTable) all() iter.Seq[*entityRecord] {
	return func(yield func(*entityRecord) bool) {
		for _, r := range t.slots {
			if r != nil && !yield(r) {
				return
			}
		}
	}
}

func (t *entityTable) hash(id string) uint64 { return maphash.String(t.seed, id) }

// tagOf is the tag of a record of hash h: its top 7 bits, never 0.
func tagOf(h uint64) uint8 { return uint8(h>>57) | 0x80 }

func (t *entityTable) grow() {
	old := t.slots
	if t.slots == nil {
		t.seed = maphash.MakeSeed()
	}
	t.slots = make([]*entityRecord, max(entityTableMinSlots, 2*len(old)))
	t.tags = make([]uint8, len(t.slots))
	t.n = 0
	for _, r := range old {
		if r != nil {
			t.put(r)
		}
	}
}
