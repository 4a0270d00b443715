package gate

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// Limits is an instance's view of the limited breaker keys: read from the store with the pauses
// (Look), and changed at once by the instance's own SetConcurrencyLimit and
// RemoveConcurrencyLimit. It is read without a lock for every item claimed, and no key is
// limited nearly always.
type Limits struct {
	keys atomic.Pointer[map[string]int] // key → limit; nil or empty: none

	mu    sync.Mutex
	gen   uint64
	freed map[string]struct{} // keys with a slot freed or free: wake the items parked on them
}

func (l *Limits) update(f func(m map[string]int)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := map[string]int{}
	if p := l.keys.Load(); p != nil {
		m = maps.Clone(*p)
	}
	f(m)
	l.keys.Store(&m)
	l.gen++
}

// Set limits key to n running items.
func (l *Limits) Set(key string, n int) { l.update(func(m map[string]int) { m[key] = n }) }

// Drop ends the limit of key.
func (l *Limits) Drop(key string) { l.update(func(m map[string]int) { delete(m, key) }) }

// limited reports whether key has a limit.
func (l *Limits) limited(key string) bool {
	p := l.keys.Load()
	if p == nil || len(*p) == 0 || key == "" {
		return false
	}
	_, ok := (*p)[key]
	return ok
}

// any reports whether any key is limited.
func (l *Limits) any() bool {
	p := l.keys.Load()
	return p != nil && len(*p) > 0
}

// replace sets the limited keys to those of rows, read when the view was at generation gen,
// unless this instance changed the view since (the read may predate the change; the next
// look brings both), and notes the keys with free slots, reporting whether there are any.
func (l *Limits) replace(rows []store.LimitRow, gen uint64) (free bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range rows {
		if r.InUse < r.Max {
			l.freeLocked(r.Key)
			free = true
		}
	}
	if l.gen != gen {
		return free
	}
	m := make(map[string]int, len(rows))
	for _, r := range rows {
		m[r.Key] = r.Max
	}
	l.keys.Store(&m)
	return free
}

func (l *Limits) generation() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gen
}

// Free notes that key has a slot free: the items parked on it are woken at the next Turn.
func (l *Limits) Free(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.freeLocked(key)
}

func (l *Limits) freeLocked(key string) {
	if l.freed == nil {
		l.freed = map[string]struct{}{}
	}
	l.freed[key] = struct{}{}
}

// takeFreed returns the keys noted free since the last call, sorted, and forgets them.
func (l *Limits) takeFreed() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.freed) == 0 {
		return nil
	}
	keys := slices.Sorted(maps.Keys(l.freed))
	clear(l.freed)
	return keys
}

// limitKeyOf returns the limited key that guards c, if one does: its breaker key (guardOf), or
// the key its enqueue named when no breaker is configured. Without limits it looks at nothing.
func (g *Gate) limitKeyOf(c *store.Claimed, req any) (string, bool) {
	if !g.limits.any() {
		return "", false
	}
	_, key := g.guardOf(c, req)
	if key == "" {
		key = c.GuardKey
	}
	return key, g.limits.limited(key)
}

// limit takes a slot for c if its key is limited. It reports false, with the completion that
// parks c, when every slot is taken (or the database could not say); otherwise comp notes the
// key whose slot c holds, if it holds one.
func (g *Gate) limit(comp *store.Completion, c *store.Claimed, req any) (store.Completion, bool) {
	key, limited := g.limitKeyOf(c, req)
	if !limited {
		return store.Completion{}, true
	}
	// Held back: no attempt, parked on the key, by the statement that found no slot, so the
	// item is not left running in the database (where a crash would charge it an attempt) until
	// its completion is written. A slot freeing wakes it (wakeLimited); the recheck bounds the
	// wait should no word of one reach any instance.
	p := *comp
	p.State, p.Outcome, p.ParkedKey, p.StartedAt, p.Limited = store.StatePending, "", key, time.Time{}, true
	p.NextAt = CapAt(p.EndedAt.Add(g.cfg.Recheck), c.Deadline)
	var got, parked bool
	err := g.storeCall("take a concurrency slot", func(ctx context.Context) (err error) {
		got, parked, err = g.cfg.Store.Acquire(ctx, key, c.Fence(), &store.HoldBack{NextAt: p.NextAt, Now: p.EndedAt})
		return err
	})
	if got {
		comp.Held = key
		return store.Completion{}, true
	}
	p.Stored = parked
	if err != nil {
		// A database that could not answer is asked again about a poll interval later.
		p.NextAt = CapAt(p.EndedAt.Add(time.Duration(float64(g.cfg.PollInterval)*(0.5+g.cfg.Rand()))), c.Deadline)
	}
	return p, false
}

// lookAtLimits reads the limits, and notes the keys with free slots, whose parked items are
// woken.
func (g *Gate) lookAtLimits() {
	gen := g.limits.generation()
	var rows []store.LimitRow
	err := g.storeCall("read the concurrency limits", func(ctx context.Context) (err error) {
		rows, err = g.cfg.Store.Limits(ctx)
		return err
	})
	if err != nil {
		return
	}
	if g.limits.replace(rows, gen) {
		signal(g.unpark)
	}
}

// wakeLimited makes due the items parked on the keys whose slots freed, as many as each has
// free slots, unless a pause or a breaker holds the key back (their items wait for them), and
// tells this instance's claim loop and the other instances.
func (g *Gate) wakeLimited() {
	keys := g.limits.takeFreed()
	if len(keys) == 0 {
		return
	}
	now := g.cfg.Clock.Now()
	woke := 0
	var firstErr error
	for _, k := range keys {
		if _, paused := g.pauses.Paused(k, now); paused {
			continue
		}
		if reg, a := g.strictest(k); reg != nil && a.Refuses() {
			continue
		}
		ctx, cancel := g.cfg.StoreContext()
		n, err := g.cfg.Store.WakeLimited(ctx, k, now)
		cancel()
		if err != nil {
			g.limits.Free(k) // again next turn
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		woke += n
	}
	g.cfg.Health.Note("wake the items parked on a concurrency limit", firstErr)
	if woke > 0 {
		g.cfg.Wake() // this turn of the claim loop may have claimed already
		g.cfg.NotifyDue()
	}
}
