package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/mediator"
)

// Config configures New.
type Config struct {
	// Rate is the number of permits a second per key (across the fleet when Store is set) of
	// every key that Limits and LimitFor give no limit of its own. Required, since no rate
	// suits every dependency, and required with Limits too, as resilience4j's limiter registry
	// applies its default configuration to every name it was given none for: a key computed
	// from requests (a host, a tenant, a channel added later, a misspelt one) is then limited
	// at Rate rather than unlimited or failing every call. At most a billion (one permit a
	// nanosecond, the finest a time.Duration tells apart) and at least one a day (1/86400: a
	// permit 24 h apart at most; a slower limit is a quota, not a rate).
	Rate float64
	// Burst is how many permits a key limited at Rate has at once after a quiet spell; the
	// permits come evenly spaced, 1/Rate apart, once it is spent. Default 1: strictly smooth,
	// because a provider that states "N a second" seldom welcomes N at once. Burst/Rate, the
	// time the burst takes to come back, is at most 366 days (8784 h), so that the limiter's
	// times fit a time.Duration.
	Burst int
	// Limits gives keys a rate and a burst of their own, by the key Key computes (a request
	// type's behaviors.TypeKey, such as "*app.SendSMS", when Key is nil): sms at 50 a second
	// and email at 100 with one limiter, as Polly's partitioned limiter and resilience4j's
	// registry configure a limit per key. Keys not listed get Rate and Burst. Validate checks
	// every entry against the bounds of Rate and Burst, naming its key. New copies the map.
	// With a Store, the instances that share the limits should list the same ones: see
	// durable.RateLimitStore for a key whose rate differs between them (a deployment under
	// way). nil: every key has Rate and Burst (or LimitFor's).
	Limits map[string]Limit
	// LimitFor gives a key that Limits does not list a limit of its own computed at run time
	// (a tenant's plan, say): its Limit and true, or false to limit the key at Rate and Burst.
	// It is asked when a key's limit is made (at its first call, at Build for a request type's
	// when Key is nil, and again at the next call of a key that MaxKeys dropped), not at every
	// call: a Limit it returns differently later applies once the key's limit is made again.
	// It may be asked from several goroutines at once, and twice for a key made by two calls
	// at once. A Limit out of the bounds of Rate and Burst fails the call with an error naming
	// the key and the field (not a refusal: nothing retries it, and the key's limit is not
	// made, so LimitFor is asked again at its next call); for a request type's, Build fails.
	// nil: only Limits.
	LimitFor func(key string) (Limit, bool)
	// MaxWait is how long a call waits for its permit before it is refused. Default 0:
	// refused at once, as the bulkhead does, so that a limited dependency does not also hold
	// its callers; the refusal's RetryAfter says when the next permit comes. A call whose
	// context ends sooner than its permit comes is refused at once, and one marked
	// mediator.Stored (a durable queue's dispatch) does not wait: the queue parks the item
	// until the permit instead of holding a worker. Stored dispatches refused one after
	// another are each told a permit of their own (the next, the one after, ...), so that a
	// parked backlog comes back about one item a permit; with a Store, one slot of the
	// instance's share of the rate each (the instances' backlogs together come back at the
	// fleet's rate), and a stored dispatch takes a leased permit up to one such slot, and at
	// most an eighth of the store's LeasePeriod, away rather than be parked again.
	// With a Store, a call that finds no permit leased (its key was quiet, or is called too
	// seldom to lease ahead) waits for the lease it starts, up to an eighth of the store's
	// LeasePeriod when MaxWait is shorter: a round trip to the store rather than a refusal,
	// and a permit of the fleet's limit like any other.
	MaxWait time.Duration
	// Key maps a request to its limit's key. nil: one limit per request type, keyed by
	// behaviors.TypeKey, because a request type usually names one dependency. Keys should be
	// few (endpoints, tenants), not one per call: see MaxKeys.
	Key behaviors.KeyFunc
	// MaxKeys bounds the keys whose limits are kept. Zero: DefaultMaxKeys. Past it, a new key
	// drops the limits of idle keys (not called for a burst's time, so that their limits are
	// whole again and dropping them changes nothing), and when none is idle, those of the
	// least recently called: such a key's limit starts over, whole, the next time it is
	// called. A key with a caller waiting for its permit, a permit promised to a stored
	// dispatch, leased permits in hand or falling back to its share is never dropped, and the
	// limits of a request type (Key nil) neither; the keys kept may then exceed MaxKeys for as
	// long as they are busy. Keys are not folded into one overflow key, whose one limit would
	// limit unrelated keys together.
	MaxKeys int
	// Clock is the time source of the limiter and of its waits. nil: behaviors.SystemClock.
	Clock behaviors.Clock
	// Store shares each key's limit with the other instances of a fleet that use the same
	// store: Rate, and each rate of Limits and LimitFor, is then the fleet's. The limiter
	// leases permits from it in small batches, in the background, ahead of the instance's own
	// demand (a moving average of its calls), and hands them out locally: no call of a busy
	// key waits on the store. While the store does not answer, each instance keeps to its
	// share of each key's rate (the key's own rate divided by the instances it last knew of)
	// until it answers again. durable.NewRateLimitStore keeps the limits in a queue's
	// database. nil: the limit is this process's.
	Store PermitStore
	// OnPermit are the observers of every permit given, with the time its call waited for it
	// (0 when it was free at once), called with the call's context before the call goes on, in
	// the order listed, before the mediator's observers (PermitObserver). They are this
	// limiter's own: observers of every behavior attach once, with mediator.Mediator.Observe.
	OnPermit []func(context.Context, PermitEvent)
	// OnRefused are the observers of every call refused, called with the call's context
	// before Handle returns, before the mediator's observers (Observer).
	OnRefused []func(context.Context, RefusedEvent)
	// OnFallback are the observers of a key's moves into and out of its fleet share (the
	// store did not answer; it answers again), called by the goroutine of the lease that saw
	// it (the limiter's pass over its keys, or the lease a call of a key with no permit
	// started), with the leasing context (which Close cancels): several may call at once.
	OnFallback []func(context.Context, FallbackEvent)
}

// PermitEvent is a permit given (see Config.OnPermit).
type PermitEvent struct {
	// Key is the limit's key.
	Key string
	// Request is the request the permit is for.
	Request any
	// Wait is how long the call waited for it.
	Wait time.Duration
}

// RefusedEvent is a call refused (see Config.OnRefused).
type RefusedEvent struct {
	// Key is the limit's key.
	Key string
	// Request is the request refused.
	Request any
	// RetryAfter is the wait until the next permit.
	RetryAfter time.Duration
}

// FallbackEvent is a key's move into or out of its fleet share (see Config.OnFallback).
type FallbackEvent struct {
	// Key is the limit's key.
	Key string
	// Active is true when the key falls back to its share, false when it leases again.
	Active bool
	// Share is the rate the instance keeps to meanwhile: the key's rate (its own, or
	// Config.Rate) divided by Instances.
	Share float64
	// Instances is the number of instances the limiter last knew to share the key.
	Instances int
	// Err is the store's error that made the key fall back; nil when it leases again.
	Err error
}

// DefaultMaxKeys is the default Config.MaxKeys: a thousand, as the metrics bound their series
// and the hedge its keys; each limit is about 200 bytes (a fleet key's a few hundred more).
const DefaultMaxKeys = 1000

// maxRate is the highest Rate: one permit a nanosecond.
const maxRate = 1e9

// maxInterval is the longest time between two permits: a day (the lowest Rate is 1/86400).
const maxInterval = int64(24 * time.Hour)

// maxSpan is the longest a burst takes to come back, Burst intervals: 366 days.
const maxSpan = int64(366 * 24 * time.Hour)

// intervalOf is the time between two permits at rate, in nanoseconds, within [1, maxInterval]
// whatever rate is (New does not validate).
func intervalOf(rate float64) int64 {
	if !(rate > 0) {
		return maxInterval
	}
	iv := math.Ceil(1e9 / rate)
	if iv > float64(maxInterval) {
		return maxInterval
	}
	return max(int64(iv), 1)
}

// spanOf is n intervals, saturated at maxSpan so that no sum of times wraps.
func spanOf(n, interval int64) int64 {
	if n <= 0 {
		return 0
	}
	if n > maxSpan/interval {
		return maxSpan
	}
	return n * interval
}

// Validate reports every field with an invalid value.
func (c Config) Validate() error {
	errs := checkLimit("", c.Rate, c.Burst)
	if c.Rate == 0 && (len(c.Limits) > 0 || c.LimitFor != nil) {
		errs[0] = fmt.Errorf("%w: required with Limits and LimitFor too, as the rate of every key they give no limit of its own", errs[0])
	}
	errs = append(errs, checkLimits(c.Limits)...)
	if c.MaxKeys < 0 {
		errs = append(errs, fmt.Errorf("ratelimit MaxKeys %d must not be negative", c.MaxKeys))
	}
	if c.MaxWait < 0 {
		errs = append(errs, fmt.Errorf("ratelimit MaxWait %v must not be negative", c.MaxWait))
	}
	return errors.Join(errs...)
}

// Behavior is the rate limiter behavior: it gives each call a permit of its key's limit,
// waiting for it up to Config.MaxWait, or refuses the call with a *LimitedError. It is in
// mediator.StageDefault at behaviors.RateLimitOrder: inside the breaker, so a call an open
// breaker refuses spends no permit, and outside the per-attempt timeout, so waiting for a
// permit does not eat the attempt's time. Each attempt of a retried call takes a permit.
//
// A call that finds its permit free takes no lock and allocates nothing: one compare-and-swap
// of the key's theoretical arrival time (with a Store, one short lock of the key's leased
// permits instead).
type Behavior struct {
	cfg   Config
	clock behaviors.Clock
	fixed *limiter // the request type's limit, bound at Build when Key is nil
	root  *Behavior
	keys  sync.Map     // string → *limiter (the root's)
	nkeys atomic.Int64 // the keys in keys
	sweep sync.Mutex   // held while keys are dropped (see drop)
	lease *leaser      // with a Store (the root's)
	// The root's time base (see nanos): the clock's time at New.
	system     bool
	epoch      time.Time
	epochNanos int64
}

// nanos is the root's now in nanoseconds: since the Unix epoch by the clock at New, and then
// by the monotonic clock when the clock is the system's (one read of it, not two).
func (b *Behavior) nanos() int64 {
	if b.system {
		return b.epochNanos + int64(time.Since(b.epoch))
	}
	return b.clock.Now().UnixNano()
}

// wallOffset returns, for a time of nanos, the same time by the clock's wall time: nanos
// itself, but for the system clock's wall time moving otherwise than its monotonic time since
// New.
func (b *Behavior) wallOffset(n int64) int64 {
	if b.system {
		return time.Now().UnixNano() - (b.nanos() - n)
	}
	return n
}

// New returns a rate limiter behavior configured by cfg. It does not validate cfg: Validate
// does, and mediator's Build calls it, so that Build reports every invalid behavior at once.
// With a Store, Close stops its leasing.
func New(cfg Config) *Behavior {
	cfg.OnPermit, cfg.OnRefused, cfg.OnFallback = slices.Clone(cfg.OnPermit), slices.Clone(cfg.OnRefused), slices.Clone(cfg.OnFallback)
	if cfg.Burst == 0 {
		cfg.Burst = 1
	}
	cfg.Limits = withDefaultBursts(cfg.Limits)
	if cfg.MaxKeys == 0 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	b := &Behavior{cfg: cfg, clock: cfg.Clock}
	if b.clock == nil {
		b.clock = behaviors.SystemClock
	}
	b.root, b.system = b, b.clock == behaviors.SystemClock
	b.epoch = b.clock.Now()
	b.epochNanos = b.epoch.UnixNano()
	if cfg.Store != nil {
		b.lease = newLeaser(b)
	}
	return b
}

// Placement implements mediator.PlacedBehavior: Explain shows it as "rate-limit", in
// mediator.StageDefault, at behaviors.RateLimitOrder (see the table of orders in package
// behaviors).
func (b *Behavior) Placement() mediator.Placement {
	return mediator.Placement{Name: "rate-limit", Stage: mediator.StageDefault, Order: behaviors.RateLimitOrder}
}

// Validate reports what Config.Validate reports.
func (b *Behavior) Validate() error { return b.cfg.Validate() }

// Bind gives each request type its own limit when no key function was given, and attaches
// the mediator's observers (RequestInfo.Observers; see Observer and PermitObserver).
func (b *Behavior) Bind(info mediator.RequestInfo) (mediator.Behavior, error) {
	if b.cfg.Key != nil && len(info.Observers) == 0 {
		return b, nil
	}
	nb := &Behavior{cfg: observed(b.cfg, info.Observers), clock: b.clock, root: b.root, fixed: b.fixed}
	if b.cfg.Key == nil {
		fixed, err := b.root.pinned(behaviors.TypeKey(info.Request))
		if err != nil {
			return nil, err
		}
		nb.fixed = fixed
	}
	return nb, nil
}

// Close stops the leasing of a Behavior with a Store, waiting for a lease under way. The
// permits it holds are still given; once they are spent, calls are refused. Without a Store
// it does nothing.
func (b *Behavior) Close() error {
	if l := b.root.lease; l != nil {
		l.close()
	}
	return nil
}

// Handle gives the call a permit, then runs next.
func (b *Behavior) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	l := b.fixed
	if l == nil {
		var err error
		if l, err = b.root.limiterOf(b.keyOf(req)); err != nil {
			return nil, err
		}
	}
	maxWait := int64(b.cfg.MaxWait)
	now := b.root.nanos()
	if maxWait > 0 {
		if mediator.MarksOf(ctx, req).Has(mediator.Stored) {
			maxWait = 0 // a scheduler's worker: the item parks until the permit instead
		}
		if dl, ok := ctx.Deadline(); ok {
			maxWait = max(min(maxWait, dl.UnixNano()-b.root.wallOffset(now)), 0)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if l.fleet != nil && mediator.MarksOf(ctx, req).Has(mediator.Stored) {
		// A parked item back at its slot takes a leased permit up to one of the instance's
		// slots away (at most a tick of the leaser): the instance's permits come in the
		// store's batches, not at its slots, and a refusal would park the item again, a round
		// trip to its queue, behind every slot promised since.
		maxWait = min(l.fleet.shareInterval(), b.root.lease.tick)
		if dl, ok := ctx.Deadline(); ok {
			maxWait = max(min(maxWait, dl.UnixNano()-b.root.wallOffset(now)), 0)
		}
	}
	wait, ok := l.take(now, maxWait)
	for l.evicted.Load() {
		// Dropped as the call took its permit (see drop): take it of the key's new limit.
		nl, err := b.root.limiterOf(l.key)
		if err != nil {
			return nil, err // LimitFor's answer changed since
		}
		l = nl
		wait, ok = l.take(now, maxWait)
	}
	var waited int64 // for a lease
	if !ok && l.fleet != nil && wait < 0 {
		// No permit leased (the key was quiet, or its demand is too small to lease ahead):
		// wait for the lease the call wakes, a round trip to the store, up to leaseWait.
		lw := max(maxWait, b.root.lease.tick)
		if dl, ok := ctx.Deadline(); ok {
			lw = max(min(lw, dl.UnixNano()-b.root.wallOffset(now)), 0)
		}
		wait, waited, ok = b.awaitLease(ctx, l, now, lw)
		if !ok && ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if !ok {
		return nil, b.refuse(ctx, l, req, time.Duration(wait))
	}
	if wait > 0 {
		l.waiting.Add(1)
		ch, stop := b.clock.After(time.Duration(wait))
		select {
		case <-ch:
			l.waiting.Add(-1)
		case <-ctx.Done():
			stop()
			l.waiting.Add(-1)
			l.giveBack()
			return nil, ctx.Err()
		}
	}
	for _, f := range b.cfg.OnPermit {
		f(ctx, PermitEvent{Key: l.key, Request: req, Wait: time.Duration(waited + wait)})
	}
	return next(ctx, req)
}

// awaitLease waits, up to maxWait from start, for a lease of a fleet key that had no permit
// known, and takes a permit of it: the wait from now until the permit, how long it waited
// for the lease, and whether it took one.
func (b *Behavior) awaitLease(ctx context.Context, l *limiter, start, maxWait int64) (wait, waited int64, ok bool) {
	deadline := start + maxWait
	for {
		ch := l.fleet.refilled()
		b.root.lease.leaseNow(l) // one round trip, not the leaser's pass over every key
		now := b.root.nanos()
		left := deadline - now
		if left <= 0 {
			return l.fleet.retryAfter(b.root.lease.lastTrip.Load()), 0, false
		}
		timer, stop := b.clock.After(time.Duration(left))
		select {
		case <-ch:
			stop()
		case <-timer:
			return l.fleet.retryAfter(b.root.lease.lastTrip.Load()), 0, false
		case <-ctx.Done():
			stop()
			return 0, 0, false
		}
		now = b.root.nanos()
		wait, ok := l.take(now, max(deadline-now, 0))
		if ok || wait >= 0 {
			return wait, now - start, ok
		}
	}
}

func (b *Behavior) refuse(ctx context.Context, l *limiter, req any, wait time.Duration) error {
	l.refused.Add(1)
	// A stored dispatch is promised a slot behind those promised before it; an urgent one
	// (an item of a priority above the default) the next permit, ahead of them: the routine
	// item promised that permit is refused once more, where the urgent one would wait behind
	// the whole backlog.
	if marks := mediator.MarksOf(ctx, req); marks.Has(mediator.Stored) && !marks.Has(mediator.Urgent) {
		wait = time.Duration(l.promise(b.root.nanos(), int64(wait)))
	}
	for _, f := range b.cfg.OnRefused {
		f(ctx, RefusedEvent{Key: l.key, Request: req, RetryAfter: wait})
	}
	return &LimitedError{Key: l.key, Rate: l.rateNow(), Wait: wait, req: req}
}

// keyOf is req's key: Config.Key's, else its type's (for a Behavior used without Build).
func (b *Behavior) keyOf(req any) string {
	if b.cfg.Key != nil {
		return b.cfg.Key(req)
	}
	return behaviors.TypeKey(reflect.TypeOf(req))
}

// limiterOf returns the limit of key, making it on first use; an error when LimitFor gives it
// a limit out of bounds.
func (b *Behavior) limiterOf(key string) (*limiter, error) {
	if v, ok := b.keys.Load(key); ok {
		return v.(*limiter), nil
	}
	lim, err := b.cfg.limitOf(key)
	if err != nil {
		return nil, err
	}
	l := newLimiter(key, lim)
	now := b.nanos()
	if b.lease != nil {
		l.fleet = newFleetLimit(l, now, b.root.lease.tick)
	}
	if v, loaded := b.keys.LoadOrStore(key, l); loaded {
		return v.(*limiter), nil
	}
	if b.lease != nil {
		b.lease.add(l)
	}
	if b.nkeys.Add(1) > int64(b.cfg.MaxKeys) {
		b.drop(now, l)
	}
	return l, nil
}

// pinned returns the limit of key, made to be never dropped (a request type's).
func (b *Behavior) pinned(key string) (*limiter, error) {
	for {
		l, err := b.limiterOf(key)
		if err != nil {
			return nil, err
		}
		l.pinned.Store(true)
		if !l.evicted.Load() {
			return l, nil
		}
	}
}

// drop drops the limits of keys past Config.MaxKeys: every idle one, and then, if still too
// many, the least recently called of those that are not busy (see Config.MaxKeys). One
// goroutine drops at a time; the others go on (the next new key drops what is left). The new
// key, made just now, is kept.
func (b *Behavior) drop(now int64, made *limiter) {
	if !b.sweep.TryLock() {
		return
	}
	defer b.sweep.Unlock()
	type candidate struct {
		l    *limiter
		last int64
	}
	var spent []candidate
	b.keys.Range(func(_, v any) bool {
		l := v.(*limiter)
		if l == made {
			return true
		}
		switch idle, last := l.idle(now, b.lease); {
		case idle:
			b.evict(l, now)
		case last >= 0:
			spent = append(spent, candidate{l, last})
		}
		return true
	})
	over := int(b.nkeys.Load()) - b.cfg.MaxKeys
	if over <= 0 {
		return
	}
	sort.Slice(spent, func(i, j int) bool { return spent[i].last < spent[j].last })
	for _, c := range spent {
		if over <= 0 {
			break
		}
		if b.evict(c.l, now) {
			over--
		}
	}
}

// evict drops l if it is still not busy, and reports whether it did. A call that took a permit
// of l meanwhile sees l.evicted after its take, and takes its permit again of the key's new
// limit; one that took it before is seen here.
func (b *Behavior) evict(l *limiter, now int64) bool {
	tat := l.tat.Load()
	l.evicted.Store(true)
	if _, last := l.idle(now, b.lease); last < 0 || l.tat.Load() != tat {
		l.evicted.Store(false)
		return false
	}
	if l.fleet != nil {
		l.fleet.mu.Lock()
		busy := l.fleet.busy(now, b.lease)
		l.fleet.mu.Unlock()
		if busy {
			l.evicted.Store(false)
			return false
		}
		b.lease.remove(l)
	}
	if b.keys.CompareAndDelete(l.key, l) {
		b.nkeys.Add(-1)
	}
	return true
}

// idle reports whether l's limit is as a new one would be (dropping it changes nothing), or,
// when not, its last use (the later the more recent) if it may be dropped, -1 if it is busy.
func (l *limiter) idle(now int64, lease *leaser) (idle bool, last int64) {
	if l.pinned.Load() || l.waiting.Load() > 0 || l.promised.Load() > now {
		return false, -1
	}
	if l.fleet != nil {
		f := l.fleet
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.busy(now, lease) {
			return false, -1
		}
		return now-f.lastAsk > idleAfter(lease.period), f.lastAsk
	}
	tat := l.tat.Load()
	return tat <= now, tat
}

// limiter is one key's limit: a GCRA on its theoretical arrival time, or, with a Store, the
// permits leased for it.
type limiter struct {
	key      string
	rate     float64
	burst    int
	interval int64 // nanoseconds between permits
	tol      int64 // how far ahead of now the theoretical arrival time may be: (burst-1) intervals
	tat      atomic.Int64
	promised atomic.Int64 // the slot after the last one told a stored dispatch (see promise)
	waiting  atomic.Int64
	refused  atomic.Int64
	evicted  atomic.Bool // dropped from the keys (see Behavior.drop)
	pinned   atomic.Bool // never dropped: a request type's limit
	fleet    *fleetLimit // with a Store
}

func newLimiter(key string, lim Limit) *limiter {
	interval := intervalOf(lim.Rate)
	return &limiter{key: key, rate: lim.Rate, burst: lim.Burst, interval: interval, tol: spanOf(int64(lim.Burst)-1, interval)}
}

// take reserves the next permit at now if it comes within maxWait: its wait and true; else
// the wait until it and false. With a Store and no permit known, it returns -1 and false.
func (l *limiter) take(now, maxWait int64) (int64, bool) {
	if l.fleet != nil {
		return l.fleet.take(now, maxWait)
	}
	for {
		tat := l.tat.Load()
		base := max(tat, now)
		wait := max(base-l.tol-now, 0)
		if wait > maxWait {
			return wait, false
		}
		if l.tat.CompareAndSwap(tat, base+l.interval) {
			return wait, true
		}
	}
}

// promise returns the wait to tell a stored dispatch refused at now whose next permit is wait
// away: until a slot of its own, one interval after the one told the previous stored dispatch
// and never before the next permit, so that a parked backlog comes back one item a permit
// instead of all at the next permit. The slots before now are forgotten: the items told them
// have come back (or been taken by other calls), and the next permit bounds what is promised.
// With a Store the slots are the instance's share of the key's rate (interval × the instances):
// every instance promises its own backlog slots, and at the fleet's rate each the backlogs of
// three instances would come back three times as fast as the permits, to be refused again.
func (l *limiter) promise(now, wait int64) int64 {
	step := l.interval
	if l.fleet != nil {
		step = l.fleet.shareInterval()
	}
	for {
		p := l.promised.Load()
		slot := max(p, now+wait)
		if l.promised.CompareAndSwap(p, slot+step) {
			return slot - now
		}
	}
}

// giveBack returns a permit taken but not used (its caller gave up waiting).
func (l *limiter) giveBack() {
	if l.fleet != nil {
		l.fleet.giveBack()
		return
	}
	l.tat.Add(-l.interval)
}

// rateNow is the rate the limit keeps to now: its share while a fleet's store is away.
func (l *limiter) rateNow() float64 {
	if l.fleet != nil {
		return l.fleet.rateNow()
	}
	return l.rate
}

// KeySnapshot is one key's limit as Snapshot reports it.
type KeySnapshot struct {
	// Key is the limit's key.
	Key string `json:"key"`
	// Rate is the key's limit in permits a second (the fleet's, with a Store): its own
	// (Config.Limits, Config.LimitFor) or Config.Rate.
	Rate float64 `json:"rate"`
	// Burst is the key's burst: its own or Config.Burst, as Rate.
	Burst int `json:"burst"`
	// Available is the number of permits a call could take now without waiting.
	Available int `json:"available"`
	// Waiting is the number of calls waiting for their permit.
	Waiting int `json:"waiting"`
	// Refused is the number of calls refused since the limit was made.
	Refused int64 `json:"refused"`
	// Fleet is true for a limit shared through a Store.
	Fleet bool `json:"fleet"`
	// Fallback is true while the store does not answer and the instance keeps to its share.
	Fallback bool `json:"fallback"`
	// Instances is the number of instances the limit was last known to be shared by (1
	// without a Store).
	Instances int `json:"instances"`
	// Leased is the number of permits leased from the store (with a Store).
	Leased int64 `json:"leased"`
}

// Snapshot returns the state of every key's limit, in key order.
func (b *Behavior) Snapshot() []KeySnapshot {
	var out []KeySnapshot
	now := b.root.nanos()
	b.root.keys.Range(func(_, v any) bool {
		l := v.(*limiter)
		s := KeySnapshot{Key: l.key, Rate: l.rate, Burst: l.burst, Waiting: int(l.waiting.Load()), Refused: l.refused.Load(), Instances: 1}
		if l.fleet != nil {
			l.fleet.snapshot(now, &s)
		} else {
			if ahead := max(l.tat.Load(), now) - now; ahead <= l.tol {
				s.Available = int(min((l.tol-ahead)/l.interval+1, int64(l.burst)))
			}
		}
		out = append(out, s)
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}
