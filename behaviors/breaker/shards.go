package breaker

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// shardCount is the number of shards of a registry's map: readers of different keys rarely
// share a lock, and a sweep holds one shard's lock at a time.
const shardCount = 64

// shard is one part of a registry's map from key to breaker, padded to its own cache line. Its
// map is keyed by the key's hash, which the registry computes anyway: a lookup, an insertion
// and an eviction hash a word, not the key again (an evicted key's text is long out of the
// processor's caches). A key whose hash another key of the shard holds, which hardly ever
// happens, goes to more.
type shard struct {
	mu    sync.Mutex
	m     map[uint64]*breaker
	more  map[string]*breaker
	spare []*breaker // evicted breakers for the shard's new keys, taken from the free list in batches
	roomy bool       // see roomLocked
	_     [cacheLine - 56]byte
}

// lookupLocked returns the breaker of key, whose hash is h, or nil; under sh.mu.
func (sh *shard) lookupLocked(h uint64, key string) *breaker {
	if b := sh.m[h]; b != nil && b.key == key {
		return b
	}
	if len(sh.more) > 0 {
		return sh.more[key]
	}
	return nil
}

// insertLocked adds b, the new breaker of key, whose hash is h; under sh.mu.
func (sh *shard) insertLocked(h uint64, key string, b *breaker) {
	if _, taken := sh.m[h]; !taken {
		sh.m[h] = b
		return
	}
	if sh.more == nil {
		sh.more = make(map[string]*breaker)
	}
	sh.more[key] = b
}

// roomLocked gives sh's map, once, room for four times a shard's share of the breakers a
// registry at its bound holds (room): past its bound keys come and go, and a map whose groups
// fill up keeps the places of the keys deleted from them, so that it grows, allocating, now and
// then for good; one with room to spare deletes cleanly. A registry that never reaches its
// bound keeps small maps. Under sh.mu.
func (sh *shard) roomLocked(room int) {
	if sh.roomy {
		return
	}
	m := make(map[uint64]*breaker, room)
	for h, b := range sh.m {
		m[h] = b
	}
	sh.m, sh.roomy = m, true
}

// removeLocked removes b, held by sh; under sh.mu and b.mu.
func (sh *shard) removeLocked(b *breaker) {
	if sh.m[b.hash] == b {
		delete(sh.m, b.hash)
	} else {
		delete(sh.more, b.key)
	}
}

// spareBatch is the most evicted breakers a shard takes from the registry's free list at once,
// so that most new keys take none of the free list's lock. A registry whose pressure sweeps
// evict fewer takes fewer (see Registry.spareBatch): the spares of all shards stay a small part
// of what a sweep frees, and a shard seldom finds the free list empty while others hold spares.
const spareBatch = 8

// shard returns the shard of key and key's hash.
func (r *Registry) shard(key string) (*shard, uint64) {
	h := maphash.String(r.seed, key)
	return &r.shards[h%shardCount], h
}

// cacheSlots is the number of slots of a registry's cache of breakers: a key's slot is chosen
// by its hash, as its shard is, and holds the last breaker found there, so that the calls of a
// key used again and again take no lock.
const cacheSlots = 1024

// cacheEntry is a breaker found in the shards for key, while its inc was inc. It is stale once
// the breaker's inc has moved on: it was evicted (and may have been reused for another key).
//
// It fills a cache line of its own: every call of its key reads it, from every P, so it must
// share no line with an object written often. (Unpadded, it was 32 bytes, the size of many small
// objects written on every call, such as testing.PB's counter: two Ps calling one key then
// slowed each other down three times over.)
type cacheEntry struct {
	key string
	b   *breaker
	inc uint32
	_   [cacheLine - 28]byte
}

// cacheLine is the size of a cache line of the processors Go runs on most.
const cacheLine = 64

// find returns the breaker of key, creating it when missing, and its state word, read while
// the breaker is the key's: a breaker is evicted and reused for another key only under its
// shard's lock, and a new generation starts when it is, so a call that holds the word of an
// evicted (or reused) breaker is recognised as stale (see recordSlow). It marks a breaker it
// found used (see sweep); a breaker it made is new, which spares it a sweep as well.
func (r *Registry) find(key string) (*breaker, uint64) {
	h := maphash.String(r.seed, key)
	i := (h / shardCount) % cacheSlots
	e := r.cache[i].Load()
	if e == nil || e.key != key {
		e = r.cache[i^1].Load()
	}
	if e != nil && e.key == key {
		b := e.b
		w := b.word.Load()
		// inc unchanged after the word was read: the breaker was not evicted before, and
		// the word is of key's breaker.
		if b.inc.Load() == e.inc {
			if !b.touched.Load() {
				b.touched.Store(true)
			}
			return b, w
		}
	}
	return r.findLocked(h, key)
}

// findLocked is find of a key the cache does not hold: it looks the key up, and makes its
// breaker when missing, under one hold of the shard's lock.
func (r *Registry) findLocked(h uint64, key string) (*breaker, uint64) {
	sh := &r.shards[h%shardCount]
	sh.mu.Lock()
	if b := sh.lookupLocked(h, key); b != nil {
		w, inc := b.word.Load(), b.inc.Load()
		if !b.touched.Load() {
			b.touched.Store(true)
		}
		sh.mu.Unlock()
		r.remember(h, key, b, inc)
		return b, w
	}
	b := r.addLocked(sh, h, key)
	w := b.word.Load()
	sh.mu.Unlock()
	r.added()
	return b, w
}

// remember caches b, found as key's breaker while its inc was inc, in one of the key's two
// slots that holds no live breaker: two keys used alike do not take turns (and allocate) in
// one slot, and a third finds them in the shards.
func (r *Registry) remember(h uint64, key string, b *breaker, inc uint32) {
	i := (h / shardCount) % cacheSlots
	for _, c := range [2]*atomic.Pointer[cacheEntry]{&r.cache[i], &r.cache[i^1]} {
		e := c.Load()
		if e != nil && e.b.inc.Load() == e.inc {
			if e.key == key {
				return // cached meanwhile
			}
			continue
		}
		if c.CompareAndSwap(e, &cacheEntry{key: key, b: b, inc: inc}) {
			return
		}
	}
}

// create returns the breaker of key, making it when missing, from an evicted breaker when one
// is free; pin marks it never to be evicted.
func (r *Registry) create(key string, pin bool) *breaker {
	sh, h := r.shard(key)
	sh.mu.Lock()
	b := sh.lookupLocked(h, key)
	found := b != nil
	if !found {
		b = r.addLocked(sh, h, key)
	}
	if pin {
		b.pinned.Store(true) // no sweep runs on the shard meanwhile
	}
	sh.mu.Unlock()
	if !found {
		r.added()
	}
	return b
}

// addLocked makes the breaker of key, whose hash is h, missing from sh, whose lock the caller
// holds: an evicted breaker when one is free, else a new one. The caller calls added once it
// released the lock.
func (r *Registry) addLocked(sh *shard, h uint64, key string) *breaker {
	b := r.takeFree(sh)
	b.mu.Lock()
	b.reuseLocked(key, h, r.sweeps.Load())
	b.mu.Unlock()
	sh.insertLocked(h, key, b)
	return b
}
