package breaker

import "time"

// added counts a breaker addLocked made and sweeps when the registry is past its bound, or its
// last sweep is older than IdleTTL.
func (r *Registry) added() {
	n := r.size.Add(1)
	switch {
	case r.cfg.MaxBreakers > 0 && n > r.sweepAt.Load():
		r.sweep(true)
	case r.idleSweepDue():
		r.sweep(false)
	}
}

// idleSweepDue reports whether the last sweep is IdleTTL old, for a new key. A clock read costs
// a new key more than the rest of its checks, so with the system clock a registry holding at
// least half of MaxBreakers, where new keys come fast, arms a timer for the time the last sweep
// will be IdleTTL old and reads the time again only once it fired (one caller takes the flag).
// A smaller registry reads the time: a pending timer of each registry would slow every other
// timer of the process (a context deadline, say) down a little.
func (r *Registry) idleSweepDue() bool {
	if r.cfg.IdleTTL <= 0 {
		return false
	}
	if r.idleFired != nil && r.idleArmed.Load() {
		if !r.idleFired.Load() || !r.idleFired.CompareAndSwap(true, false) {
			return false
		}
		r.idleArmed.Store(false)
	}
	left := r.lastSweep.Load() + int64(r.cfg.IdleTTL) - r.now()
	if left > 0 && r.idleFired != nil && r.cfg.MaxBreakers > 0 && r.size.Load() >= int64(r.cfg.MaxBreakers/2) &&
		r.idleArmed.CompareAndSwap(false, true) {
		r.armIdle(time.Duration(left))
	}
	return left <= 0
}

// armIdle sets idleFired after d. A new timer each time, not one reset, so that it runs on the
// time of its caller's testing/synctest bubble, or of none, as the registry's clock does. Its
// function holds the flag, not the registry, which a pending timer so does not keep alive.
func (r *Registry) armIdle(d time.Duration) {
	fired := r.idleFired
	time.AfterFunc(d, func() { fired.Store(true) })
}

// takeFree returns an evicted breaker to reuse for a new key of sh, whose lock the caller holds,
// or a new one.
func (r *Registry) takeFree(sh *shard) *breaker {
	if len(sh.spare) == 0 {
		r.freeMu.Lock()
		n := min(len(r.free), r.spareBatch)
		if sh.spare == nil && n > 0 {
			sh.spare = make([]*breaker, 0, r.spareBatch)
		}
		sh.spare = append(sh.spare, r.free[len(r.free)-n:]...)
		clear(r.free[len(r.free)-n:])
		r.free = r.free[:len(r.free)-n]
		r.freeMu.Unlock()
	}
	if n := len(sh.spare); n > 0 {
		b := sh.spare[n-1]
		sh.spare[n-1] = nil
		sh.spare = sh.spare[:n-1]
		return b
	}
	b := &breaker{reg: r}
	if r.cfg.FailureRate > 0 {
		b.window = newRateWindow(r.cfg.RateWindow, r.cfg.FailureRate, r.cfg.RateMinCalls)
	}
	return b
}

// putFreeLocked keeps b for a new key, unless enough breakers are kept already: at most half
// of MaxBreakers (what a pressure sweep evicts at once), 256 without a bound, besides the few
// of each shard's spares. Called under freeMu.
func (r *Registry) putFreeLocked(b *breaker) {
	limit := 256
	if r.cfg.MaxBreakers > 0 {
		limit = max(r.cfg.MaxBreakers/2, 1)
	}
	if len(r.free) < limit {
		r.free = append(r.free, b)
	}
}

// reuseLocked makes b the closed, unused breaker of key, in a generation after every one it
// had, so that a call holding a permit of its previous key's breaker never matches its word;
// sweeps is the number of sweeps begun (see sweep). The previous key and word stay in gone, for
// the outcome of a call that was let through before the eviction (see recordSlow). b is evicted
// or new: in no map, announcing nothing. (A field is stored only when it changes: an atomic
// store costs as much as a lock.)
func (b *breaker) reuseLocked(key string, h uint64, sweeps uint32) {
	b.key, b.hash = key, h
	b.word.Store(b.word.Load()&^stateMask + 1<<stateBits)
	if b.failures.Load() != 0 {
		b.failures.Store(0)
	}
	if b.openUntil.Load() != 0 {
		b.openUntil.Store(0)
	}
	b.openedAt = 0
	clear(b.slots)
	if b.window != nil {
		b.window.reset()
	}
	if b.shared != nil {
		b.shared = nil // the previous key's place in the fleet's state: the new key starts afresh
	}
	if b.touched.Load() {
		b.touched.Store(false)
	}
	b.born = sweeps
	if b.evictedNow() {
		b.inc.Add(1) // live again
	}
}

// forward records the outcome of a call whose breaker was evicted while the call ran on the
// key's live breaker (creating it if needed), as a call of its current generation, and reports
// whether it opened that breaker. Only calls let through by the evicted breaker while it was
// closed, in the generation it was evicted in, are forwarded, and only a closed live breaker
// takes the outcome: an open or half-open one has already decided without it.
func (r *Registry) forward(key string, o outcome, err error) trip {
	if o == outcomeIgnored || o == outcomeReleased {
		return trip{}
	}
	if live, w := r.find(key); stateOf(w) == StateClosed {
		return live.recordSlow(Permit{b: live, word: w}, o, err)
	}
	return trip{}
}

// Sweep evicts the breakers not used since the previous sweep that have nothing left to
// decide, and returns how many it evicted: closed breakers, open ones whose open time has
// passed, and half-open ones with no probe in flight. (A call that comes after the eviction
// finds a new, closed breaker.) Open breakers inside their open duration, half-open ones with
// a probe in flight and breakers bound to a request type stay. The registry sweeps by itself
// when a new key arrives and the previous sweep is older than IdleTTL, or past MaxBreakers; an
// application that adds no keys for long may call Sweep periodically. AddEvictionListener hears
// the key of every breaker evicted.
func (r *Registry) Sweep() int { return r.sweep(false) }

// sweep evicts idle breakers with a second chance: a breaker used (a call let through or
// refused) since the previous sweep has its mark cleared and survives this one, so every
// evicted breaker went unused for a whole sweep interval (a breaker made since the previous
// sweep began is never evicted: it records the sweeps begun when it was made; one whose last
// call is still running when it is evicted has that call's outcome forwarded to the key's live
// breaker). Only breakers with nothing left to decide go: see
// evictableLocked. Under size pressure it stops once the registry is down to three quarters
// of MaxBreakers, and the next pressure sweep waits until a quarter of MaxBreakers more keys
// have arrived: the registry stays below 1.25 × MaxBreakers plus the breakers still inside
// their open duration or probing, and sweeping costs O(1) per new key, amortised.
// The eviction listeners (AddEvictionListener) hear the keys evicted once sweepMu is released.
func (r *Registry) sweep(pressure bool) int {
	if pressure {
		r.sweepMu.Lock()
	} else if !r.sweepMu.TryLock() {
		return 0
	}
	evicted, gone := func() (int, []string) {
		defer r.sweepMu.Unlock()
		return r.sweepLocked(pressure)
	}()
	if len(gone) == 0 {
		return evicted
	}
	ls := r.evictListeners.load()
	for _, key := range gone {
		for _, l := range ls {
			l.fn(key)
		}
	}
	clear(gone) // hold no key
	r.sweepMu.Lock()
	if cap(gone) > cap(r.goneBuf) {
		r.goneBuf = gone[:0]
	}
	r.sweepMu.Unlock()
	return evicted
}

// sweepLocked is sweep under sweepMu. It returns the number of breakers evicted and, when
// eviction listeners are registered, their keys.
func (r *Registry) sweepLocked(pressure bool) (int, []string) {
	target := int64(-1)
	if pressure {
		if r.size.Load() <= r.sweepAt.Load() {
			return 0, nil // another sweep made room meanwhile
		}
		target = int64(r.cfg.MaxBreakers) * 3 / 4
	}
	notify := len(r.evictListeners.load()) > 0
	var gone []string
	if notify {
		gone, r.goneBuf = r.goneBuf[:0], nil
	}
	now := r.now()
	r.lastSweep.Store(now)
	sweep := r.sweeps.Add(1)
	evicted := 0
	// Under pressure a first pass takes from every shard its share of what must go, in
	// proportion to its size, so that the shards stay alike in size (a shard's map that outgrows
	// its room allocates); a second takes what the first could not find.
	passes, size, need := 1, int64(1), int64(0)
	if pressure {
		passes, size = 2, max(r.size.Load(), 1)
		need = size - target
		r.sweepShard = (r.sweepShard + 1) % shardCount // no shard always first
	}
	for pass := range passes {
		for i := range shardCount {
			if target >= 0 && r.size.Load() <= target {
				break
			}
			sh := &r.shards[(r.sweepShard+i)%shardCount]
			sh.mu.Lock()
			if pressure {
				sh.roomLocked(r.room)
			}
			r.freeMu.Lock() // taken under no breaker's lock elsewhere
			quota := -1
			if pass == 0 && pressure {
				quota = int(int64(len(sh.m)+len(sh.more))*need/size) + 1
			}
			v := visit{r: r, sh: sh, now: now, sweep: sweep, target: target, quota: quota, notify: notify, gone: gone}
			for _, b := range sh.m {
				if !v.next(b) {
					break
				}
			}
			for _, b := range sh.more {
				if !v.next(b) {
					break
				}
			}
			gone = v.gone
			r.freeMu.Unlock()
			r.size.Add(-int64(v.evicted))
			sh.mu.Unlock()
			evicted += v.evicted
		}
	}
	if pressure {
		r.sweepAt.Store(max(int64(r.cfg.MaxBreakers), r.size.Load()+int64(r.cfg.MaxBreakers)/4))
	}
	return evicted, gone
}

// visit is a sweep's visit of one shard, under its lock and the free list's.
type visit struct {
	r       *Registry
	sh      *shard
	now     int64
	sweep   uint32 // the sweep's number: see reuseLocked's sweeps
	target  int64  // the size to stop at; -1: none
	quota   int    // the most to evict from the shard; -1: no limit
	notify  bool
	gone    []string
	evicted int // from this shard: r.size is told once per shard
}

// next visits b, evicting it when it went unused since the previous sweep and has nothing left
// to decide, and reports whether the sweep goes on.
func (v *visit) next(b *breaker) bool {
	if v.target >= 0 && v.r.size.Load()-int64(v.evicted) <= v.target || v.evicted == v.quota {
		return false
	}
	if b.pinned.Load() {
		return true
	}
	if b.touched.Load() {
		b.touched.Store(false)
		return true
	}
	if v.sweep-b.born < 2 {
		return true // made since the previous sweep began, and unused since
	}
	if stateOf(b.word.Load()) == StateOpen && v.now < b.openUntil.Load() {
		return true // still refusing calls: the common case among open breakers, lock-free
	}
	// Decide under the breaker's lock, so that no outcome trips it between the check and the
	// removal, and every outcome after the removal is forwarded to the live breaker.
	b.mu.Lock()
	if !b.touched.Load() && b.evictableLocked(v.now) {
		v.sh.removeLocked(b)
		key := b.key
		if b.evictLocked() {
			v.r.putFreeLocked(b)
		}
		v.evicted++
		if v.notify {
			v.gone = append(v.gone, key)
		}
	}
	b.mu.Unlock()
	return true
}

// evictLocked marks b evicted, keeping its key and word for the calls it let through (see
// recordSlow), and reports whether a new key may reuse it: it has no state change still to
// announce.
func (b *breaker) evictLocked() (reusable bool) {
	b.inc.Add(1) // evicted, and its cache entries stale
	b.gone, b.goneKey, b.goneWord = true, b.key, b.word.Load()
	return !b.announcing && len(b.queue) == 0
}

// evictableLocked reports whether b has nothing left to decide, so that a sweep may evict it
// once unused: it is closed, open past its open time, or half-open with no probe in flight.
// Evicting such a breaker forgets no decision a call still waits for; a later call finds a new,
// closed breaker.
func (b *breaker) evictableLocked(now int64) bool {
	switch stateOf(b.word.Load()) {
	case StateClosed:
		return true
	case StateOpen:
		return now >= b.openUntil.Load()
	default:
		return !b.probesInFlightLocked()
	}
}

// AddEvictionListener adds fn to the functions called with the key of every breaker a sweep
// evicts (Sweep, IdleTTL, MaxBreakers), once the breaker is gone from the registry, and returns
// a function that removes it. Whatever keeps something per key (a metric's series, a cache of
// the breaker's state) drops it there, so that it stays as bounded as the registry. It is
// called after the sweep, outside the registry's locks (so it may call the registry), by the
// goroutine that swept: Sweep's caller, or the call whose new key set off the sweep, which
// waits for it; keep it cheap. A call of the key after the eviction makes a new breaker, which
// a later sweep evicts, and announces, again.
func (r *Registry) AddEvictionListener(fn func(key string)) (remove func()) {
	return r.evictListeners.add(fn)
}
