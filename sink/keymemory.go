package sink

// keyMemory is what a check knows of its key table (cdc_user_claim's
// counts, cdc_order_key's balanced keys) as of the last committed batch,
// so that a batch reads only the keys it does not know. Only the leading
// cdc of a checkpoint writes the table, so what it wrote stays true; a
// retried transaction puts back what its failed run changed (mark), and a
// start forgets everything (the table is the truth then). Bounded: past
// maxKnownKeys keys it starts empty again (forgetting is always safe).
type keyMemory[K comparable, V any] struct {
	m    map[K]V
	undo []keyWas[K, V] // what the running transaction replaced
}

// keyWas is a key's entry before a transaction changed it.
type keyWas[K comparable, V any] struct {
	key K
	v   V
	had bool
}

// maxKnownKeys bounds the keys a check of the cdc's key tables keeps in
// memory (about 100 bytes each): the counts per user, the balanced order
// keys.
const maxKnownKeys = 1 << 17

func (km *keyMemory[K, V]) get(k K) (V, bool) {
	v, ok := km.m[k]
	return v, ok
}

// set notes k's value, and what it replaced.
func (km *keyMemory[K, V]) set(k K, v V) {
	if km.m == nil {
		km.m = map[K]V{}
	}
	old, ok := km.m[k]
	km.undo = append(km.undo, keyWas[K, V]{k, old, ok})
	km.m[k] = v
}

// del forgets k, noting what it had.
func (km *keyMemory[K, V]) del(k K) {
	if old, ok := km.m[k]; ok {
		km.undo = append(km.undo, keyWas[K, V]{k, old, true})
		delete(km.m, k)
	}
}

// forget drops every key (a start, a bootstrap).
func (km *keyMemory[K, V]) forget() {
	clear(km.m)
	km.undo = km.undo[:0]
}

// bound starts empty again when the memory holds more than maxKnownKeys.
func (km *keyMemory[K, V]) bound() {
	if len(km.m) > maxKnownKeys {
		clear(km.m)
	}
}

// mark returns what puts the memory back as it is now, before a batch's
// transaction: each run of it starts from there.
func (km *keyMemory[K, V]) mark() func() {
	km.undo = km.undo[:0]
	return func() {
		for i := len(km.undo) - 1; i >= 0; i-- {
			if u := km.undo[i]; u.had {
				km.m[u.key] = u.v
			} else {
				delete(km.m, u.key)
			}
		}
		km.undo = km.undo[:0]
	}
}
