package durable

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
)

// ConcurrencyLimitOption tweaks one Queue.SetConcurrencyLimit.
type ConcurrencyLimitOption func(*limitConfig)

type limitConfig struct{ reason string }

// LimitReason records why the key is limited (optional; at most 1024 bytes), for the operators
// who see the limit and for the audit log.
func LimitReason(reason string) ConcurrencyLimitOption {
	return func(c *limitConfig) { c.reason = reason }
}

// maxConcurrencyLimit bounds a limit: no fleet runs a million items of one key at once, and a
// larger number is a typing mistake, not a limit.
const maxConcurrencyLimit = 1_000_000

// SetConcurrencyLimit lets at most n items guarded by the breaker key key run at once across
// every instance sharing the queue's database, until RemoveConcurrencyLimit; actor (required)
// is who set it, as the audit log records it. Setting the limit of a limited key replaces it
// (a lower limit lets the items running finish; no new one starts until fewer than n run).
//
// An item's key is its breaker key: the key of WithBreakerKey, or the key WithBreaker's or
// SchedulerConfig.Breakers' key function gives for the request. The scheduler claims the item,
// and before dispatching it takes one of the key's slots in the database; a slot is the
// running item itself, freed when its attempt's outcome is written or, should its instance
// die, when its lease runs out and is swept. An item that finds every slot taken is not
// attempted (no attempt charged; SchedulerConfig.OnSettled says "concurrency_limited"): it is parked on the
// key and made due again as slots free, by the instance that freed one at once and by every
// instance at its next look at the limits (every SchedulerConfig.PollInterval, at most every
// second), or Config.Recheck later at the latest. This instance applies a new limit at once;
// the others from their next look at the limits, and they apply it exactly from then on.
func (q *Queue) SetConcurrencyLimit(ctx context.Context, key string, n int, actor string, opts ...ConcurrencyLimitOption) (record.ConcurrencyLimit, error) {
	var c limitConfig
	for _, o := range opts {
		o(&c)
	}
	errs := append(checkLimitKey(key, actor), checkReason(c.reason)...)
	if n < 1 || n > maxConcurrencyLimit {
		errs = append(errs, fmt.Errorf("n %d is outside [1, %d]: a limit lets at least one item run (pause the key to hold them all back)", n, maxConcurrencyLimit))
	}
	if err := errors.Join(errs...); err != nil {
		return record.ConcurrencyLimit{}, fmt.Errorf("durable: SetConcurrencyLimit: %w", err)
	}
	now := q.clock.Now()
	row := store.LimitRow{Key: key, Max: n, Actor: actor, Reason: c.reason, CreatedAt: now}
	err := q.store.SetLimit(ctx, row, func(tx *sql.Tx, prev store.LimitRow, had bool) error {
		detail := "at most " + strconv.Itoa(n) + " running"
		if c.reason != "" {
			detail += "; reason: " + c.reason
		}
		if had {
			detail += "; replaces the limit of " + strconv.Itoa(prev.Max) + " set by " + prev.Actor
		}
		return q.audit(ctx, tx, record.AuditEntry{At: now, Actor: actor, Action: record.AuditSetConcurrencyLimit,
			TargetKind: record.AuditTargetBreakerKey, Target: key, Detail: detail, Outcome: record.AuditDone})
	})
	if err != nil {
		return record.ConcurrencyLimit{}, err
	}
	if s := q.running.Load(); s != nil {
		s.limits.set(key, n)
		s.limits.free(key) // a raised limit has room for the items parked on it
	}
	return limitOf(row), nil
}

// RemoveConcurrencyLimit ends the limit of key on every instance; actor (required) is who
// removed it, as the audit log records it. It reports whether there was one (the log records
// that nothing changed when there was none). The items parked on the key are due at once.
func (q *Queue) RemoveConcurrencyLimit(ctx context.Context, key, actor string) (bool, error) {
	if err := errors.Join(checkLimitKey(key, actor)...); err != nil {
		return false, fmt.Errorf("durable: RemoveConcurrencyLimit: %w", err)
	}
	now := q.clock.Now()
	removed := false
	err := q.store.DeleteLimit(ctx, key, func(tx *sql.Tx, prev store.LimitRow, had bool) error {
		e := record.AuditEntry{At: now, Actor: actor, Action: record.AuditRemoveConcurrencyLimit, TargetKind: record.AuditTargetBreakerKey,
			Target: key, Outcome: record.AuditDone}
		if had {
			removed = true
			e.Detail = "was at most " + strconv.Itoa(prev.Max) + " running, set by " + prev.Actor
		} else {
			e.Outcome, e.Detail = record.AuditNoChange, "not limited"
		}
		return q.audit(ctx, tx, e)
	})
	if err != nil {
		return false, err
	}
	if removed {
		// The items it parked wait for nothing now (a breaker or pause of the key still holds
		// them back when they are claimed).
		if _, err := q.store.Unpark(ctx, []string{key}, now); err != nil {
			return true, err
		}
	}
	if s := q.running.Load(); s != nil {
		s.limits.drop(key)
		s.Wake()
	}
	return removed, nil
}

// ConcurrencyLimits returns the stored concurrency limits by key, each with the number of its
// items running now.
func (q *Queue) ConcurrencyLimits(ctx context.Context) ([]record.ConcurrencyLimit, error) {
	rows, err := q.store.Limits(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]record.ConcurrencyLimit, len(rows))
	for i, r := range rows {
		out[i] = limitOf(r)
	}
	return out, nil
}

// ConcurrencyLimitUse returns the limit of each limited key and how many of its items run now
// (ConcurrencyLimits in maps of standard types, for metrics.Recorder.CollectConcurrencyLimits).
func (q *Queue) ConcurrencyLimitUse(ctx context.Context) (limits, inUse map[string]int, err error) {
	rows, err := q.store.Limits(ctx)
	if err != nil {
		return nil, nil, err
	}
	limits, inUse = make(map[string]int, len(rows)), make(map[string]int, len(rows))
	for _, r := range rows {
		limits[r.Key], inUse[r.Key] = r.Max, r.InUse
	}
	return limits, inUse, nil
}

func limitOf(r store.LimitRow) record.ConcurrencyLimit {
	return record.ConcurrencyLimit{Key: r.Key, Max: r.Max, InUse: r.InUse, Actor: r.Actor, Reason: r.Reason, CreatedAt: r.CreatedAt}
}

func checkLimitKey(key, actor string) []error {
	var errs []error
	switch {
	case strings.TrimSpace(key) == "":
		errs = append(errs, errors.New("key is empty: a concurrency limit names a breaker key"))
	case len(key) > maxPauseTarget:
		errs = append(errs, fmt.Errorf("key is %d bytes, more than %d: no breaker key is that long", len(key), maxPauseTarget))
	default:
		if err := keyProblem("breaker", key); err != nil {
			errs = append(errs, err)
		}
	}
	if actor == "" {
		errs = append(errs, errors.New("actor is required: the audit log records who set and removed limits"))
	}
	return errs
}

// outcomeLimited is the OnSettled outcome of an item held back by its key's concurrency limit,
// as SchedulerConfig.OnSettled documents it: no attempt was made.
const outcomeLimited = "concurrency_limited"

// keyLimits is a scheduler's view of the limited breaker keys: read from the store every
// PollInterval, at most every pauseCheck (with the pauses), and changed at once by this
// instance's SetConcurrencyLimit and RemoveConcurrencyLimit. It is read without a lock for
// every item claimed, and no key is limited nearly always.
type keyLimits struct {
	keys atomic.Pointer[map[string]int] // key → limit; nil or empty: none

	mu    sync.Mutex
	gen   uint64
	freed map[string]struct{} // keys with a slot freed or free: wake the items parked on them
}

func (l *keyLimits) update(f func(m map[string]int)) {
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

func (l *keyLimits) set(key string, n int) { l.update(func(m map[string]int) { m[key] = n }) }
func (l *keyLimits) drop(key string)       { l.update(func(m map[string]int) { delete(m, key) }) }

// limited reports whether key has a limit.
func (l *keyLimits) limited(key string) bool {
	p := l.keys.Load()
	if p == nil || len(*p) == 0 || key == "" {
		return false
	}
	_, ok := (*p)[key]
	return ok
}

// any reports whether any key is limited.
func (l *keyLimits) any() bool {
	p := l.keys.Load()
	return p != nil && len(*p) > 0
}

// replace sets the limited keys to those of rows, read when the view was at generation gen,
// unless this instance changed the view since (the read may predate the change; the next
// look brings both), and notes the keys with free slots, reporting whether there are any.
func (l *keyLimits) replace(rows []store.LimitRow, gen uint64) (free bool) {
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

func (l *keyLimits) generation() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gen
}

func (l *keyLimits) free(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.freeLocked(key)
}

func (l *keyLimits) freeLocked(key string) {
	if l.freed == nil {
		l.freed = map[string]struct{}{}
	}
	l.freed[key] = struct{}{}
}

// takeFreed returns the keys noted free since the last call, sorted, and forgets them.
func (l *keyLimits) takeFreed() []string {
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
func (s *scheduler) limitKeyOf(c *store.Claimed, req any) (string, bool) {
	if !s.limits.any() {
		return "", false
	}
	_, key := s.guardOf(c, req)
	if key == "" {
		key = c.GuardKey
	}
	return key, s.limits.limited(key)
}

// limit takes a slot for c if its key is limited. It reports false, with the completion that
// parks c, when every slot is taken (or the database could not say); otherwise comp notes the
// key whose slot c holds, if it holds one.
func (s *scheduler) limit(comp *store.Completion, c *store.Claimed, req any) (store.Completion, bool) {
	key, limited := s.limitKeyOf(c, req)
	if !limited {
		return store.Completion{}, true
	}
	// Held back: no attempt, parked on the key, by the statement that found no slot, so the
	// item is not left running in the database (where a crash would charge it an attempt) until
	// its completion is written. A slot freeing wakes it (wakeLimited); the recheck bounds the
	// wait should no word of one reach any instance.
	p := *comp
	p.State, p.Outcome, p.ParkedKey, p.StartedAt, p.Limited = store.StatePending, "", key, time.Time{}, true
	p.NextAt = capAt(p.EndedAt.Add(s.q.recheck), c.Deadline)
	ctx, cancel := s.storeCtx()
	got, parked, err := s.q.store.Acquire(ctx, key, c.Fence(), &store.HoldBack{NextAt: p.NextAt, Now: p.EndedAt})
	cancel()
	s.noteStore("take a concurrency slot", err)
	if got {
		comp.Held = key
		return store.Completion{}, true
	}
	p.Stored = parked
	if err != nil {
		// A database that could not answer is asked again about a poll interval later.
		p.NextAt = capAt(p.EndedAt.Add(time.Duration(float64(s.cfg.PollInterval)*(0.5+s.q.rand()))), c.Deadline)
	}
	return p, false
}

// slotsFreed notes the keys of the slots the written completions of batch freed.
func (s *scheduler) slotsFreed(batch []store.Completion, results []error) {
	for i, c := range batch {
		if c.Held != "" && results[i] == nil {
			s.limits.free(c.Held)
		}
	}
}

// lookAtLimits reads the limits, and notes the keys with free slots, whose parked items are
// woken.
func (s *scheduler) lookAtLimits() {
	gen := s.limits.generation()
	ctx, cancel := s.storeCtx()
	rows, err := s.q.store.Limits(ctx)
	cancel()
	s.noteStore("read the concurrency limits", err)
	if err != nil {
		return
	}
	if s.limits.replace(rows, gen) {
		signal(s.unpark)
	}
}

// wakeLimited makes due the items parked on the keys whose slots freed, as many as each has
// free slots, unless a pause or a breaker holds the key back (their items wait for them), and
// tells this instance's claim loop and the other instances.
func (s *scheduler) wakeLimited() {
	keys := s.limits.takeFreed()
	if len(keys) == 0 {
		return
	}
	now := s.q.clock.Now()
	woke := 0
	var firstErr error
	for _, k := range keys {
		if _, paused := s.pauses.paused(k, now); paused {
			continue
		}
		if reg, a := s.strictest(k); reg != nil && a.Refuses() {
			continue
		}
		ctx, cancel := s.storeCtx()
		n, err := s.q.store.WakeLimited(ctx, k, now)
		cancel()
		if err != nil {
			s.limits.free(k) // again next turn
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		woke += n
	}
	s.noteStore("wake the items parked on a concurrency limit", firstErr)
	if woke > 0 {
		s.Wake() // this turn of the claim loop may have claimed already
		s.q.notifyDue()
	}
}
