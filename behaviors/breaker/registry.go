package breaker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
)

// Config configures the breakers of a Registry. Every zero field means its default, and each
// field's comment gives the reason for it.
type Config struct {
	// Key maps a request to its breaker's key, for example the remote endpoint it calls, so
	// that one failing endpoint does not stop the calls to the others. nil: one breaker per
	// request type, keyed by behaviors.TypeKey and bound once at Build, because a request
	// type usually names one dependency. KeyOf applies it.
	Key behaviors.KeyFunc
	// FailureThreshold is the number of consecutive counted failures that opens a closed
	// breaker. Default 5: five failures in a row are rarely bad luck, and few enough that
	// callers soon stop waiting on a dependency that is down.
	FailureThreshold int
	// OpenDuration is how long an open breaker refuses calls before it lets a probe through.
	// Default 30 s: long enough for a restarting instance or a failover to complete, short
	// enough that a recovered dependency is soon used again.
	OpenDuration time.Duration
	// OpenJitter spreads each open duration uniformly by ±OpenJitter × OpenDuration, so that
	// a fleet tripped at once does not probe at once. A fraction in [0, 1). Default 0: none.
	OpenJitter float64
	// HalfOpenProbes is K, the number of probe calls a half-open breaker lets through in
	// total, and the number that must succeed to close it. Any counted failure of a probe opens
	// the breaker again at once, with a fresh open duration; the other probes' outcomes are
	// then ignored. A probe whose outcome is not counted (the Classifier says no, or it was released
	// or panicked) frees its slot for another probe; a successful one keeps its slot, so at
	// most K probes reach the dependency in one half-open period. Default 1: one call tells
	// whether the dependency is back and puts the least load on one that is not. A larger K
	// (resilience4j's permitted calls in half-open state) gives a surer verdict at the cost of
	// more calls to a dependency that may still be down.
	HalfOpenProbes int
	// ProbeTimeout is how long a probe may run before the breaker gives up on it: a probe
	// still running then counts as failed, and the breaker opens again for a fresh open
	// duration; the probe's own result, when it comes, is ignored. Default 30 s, the default
	// open duration: a probe slower than that is as good as failed for the callers waiting
	// behind the breaker. It does not follow a configured OpenDuration.
	//
	// Set it above the dependency's slowest normal latency. A ProbeTimeout shorter than that
	// keeps a breaker opening again after every probe, even once the dependency has
	// recovered: each probe succeeds, too late. Such re-opens have StateChange.Reason
	// ReasonProbeTimedOut, and OnLateProbe hears how long each late probe took.
	ProbeTimeout time.Duration
	// FailureRate opens a closed breaker when, within RateWindow, at least RateMinCalls calls
	// were made and at least this fraction of them failed; in (0, 1]. It works alongside
	// FailureThreshold. Default 0: off. When on, successful calls are counted too, which
	// costs a lock and a clock read per success.
	FailureRate float64
	// RateWindow is the sliding window of FailureRate. Default 60 s: long enough to smooth
	// out a burst, short enough to forget an outage that is over.
	RateWindow time.Duration
	// RateMinCalls is the minimum number of calls in the window before FailureRate applies.
	// Default 10: fewer calls say too little to judge a rate by.
	RateMinCalls int
	// Classifier decides which errors count as failures. Default CountsAsFailure: everything
	// but validation errors, missing handlers, refusals (circuit-open errors, bulkhead
	// rejections) and 4xx status codes other than 408 and 429, which say nothing about the
	// dependency's health. Whatever it says, the error of a call whose context is done is
	// never counted: the caller gave up, and clients report that in their own ways (a gRPC
	// Canceled status, a driver's connection error), not always as context.Canceled. Nor is a
	// refusal (behaviors.IsRefusal, a refusing behavior of your own included): the call did
	// not reach the dependency.
	Classifier behaviors.Classifier
	// MaxBreakers bounds the number of breakers held. Past it, a sweep evicts the breakers
	// unused since the previous sweep that have nothing left to decide: closed ones, open ones
	// whose open time has passed and half-open ones with no probe in flight. So the registry
	// holds at most 1.25 × MaxBreakers breakers plus those still inside their open duration or
	// with a probe in flight; once its open time has passed, an open breaker goes like an idle
	// closed one. Breakers bound to a request type are never evicted. A call after an eviction
	// finds a new, closed breaker. Evicted breakers, up to half of MaxBreakers and a few per
	// shard of the registry's map, are kept for the keys that come next, so that a registry
	// past its bound makes a new breaker without allocating. Default 10,000: enough for the endpoints of a large fleet, and a few MiB at
	// most. Negative means no bound.
	MaxBreakers int
	// IdleTTL evicts breakers unused for at least this long that have nothing left to decide,
	// as MaxBreakers does. It is checked when a new key arrives and by Sweep. Default 10
	// minutes: the failure streak of a breaker unused for that long says little about the
	// dependency now. Negative means never.
	IdleTTL time.Duration
	// OnStateChange are the observers called after every state change, in the order listed
	// and then the listeners AddListener added, in the order added; outside the breaker's
	// lock, so they may call the registry. The changes of one breaker are announced one at a
	// time, in the order they happened: usually by the goroutine that made the change, but a
	// change made while an earlier one is still being announced is announced after it, by the
	// goroutine announcing. Empty: nothing is called.
	OnStateChange []func(StateChange)
	// Store shares the breakers' state with the other registries that use it: the instances
	// of a fleet, and this one after a restart (durable.NewBreakerStore keeps it in the queue's
	// database). Every transition is decided once for all of them: a trip by one opens the
	// breaker everywhere, one instance holds a half-open breaker's probes while the others
	// keep refusing, and a reset anywhere closes it everywhere. The closed path makes no store
	// call, nor does a call an open breaker refuses: the store hears transitions only, and a
	// registry learns of the others' within the store's refresh interval. A store that cannot
	// be reached leaves the registry on its own state until it answers (see StoreTimeout).
	// NewRegistry loads the fleet's open breakers from it, waiting at most StoreTimeout. Give
	// each registry a store of its own: a store need not tell a registry the changes another
	// registry made through the same store. nil: the state stays in this process.
	Store Store
	// StoreTimeout bounds each call of Store, so a call that trips a breaker or claims its
	// probes never waits longer on a store that hangs; past it the registry goes on with its
	// local decision, takes the store to be away (the transitions until the next retry, every
	// four timeouts and at least every second, do not wait for it at all), and publishes what
	// the store missed once it answers again. A claim of the probes past it is refused instead,
	// as it may commit all the same: the registry looks the breaker up (Load, in the
	// background, bounded by StoreTimeout too) and follows what the store holds, its own claim
	// included; only when that gets no answer either does the next call probe on its own.
	// Default 250 ms: a local
	// database answers in about a millisecond, and a caller hardly notices a quarter second
	// once per transition.
	StoreTimeout time.Duration
	// Instance names this registry to the Store: the holder of a half-open breaker's probes,
	// and who made each transition. It is a name for people: a registry knows its claims of
	// the probes by a token of each claim, so two registries, or a process and its restart,
	// under one name never take each other's claims for their own. Default: the host name,
	// the process id and a random suffix, unique per registry.
	Instance string
	// OnStoreError are the observers of the errors of Store, called in the order listed, by
	// the goroutine whose call met the error or by the registry's own retry: calls may come
	// from several goroutines at once, so an observer must be safe for concurrent use. The
	// calls skipped while the store is taken to be away are not reported. Empty: the errors
	// are dropped.
	OnStoreError []func(error)
	// OnLateProbe is called when a probe reports its outcome after ProbeTimeout. By then the
	// breaker has given up on the probe and opened again (with ReasonProbeTimedOut, unless
	// another probe's failure, Trip, Reset or Apply changed its state first), so the outcome
	// is ignored. It is called outside the breaker's lock, by the goroutine reporting, so it
	// may call the registry.
	// Probes that keep arriving late mean ProbeTimeout is shorter than the dependency's
	// latency, for example:
	//
	//	OnLateProbe: []func(breaker.LateProbe){func(l breaker.LateProbe) {
	//		logger.Warn("breaker probe too slow", zap.String("key", l.Key), zap.Duration("took", l.Took), zap.Duration("ProbeTimeout", l.Timeout))
	//	}},
	//
	// A released probe (one that panicked, or was abandoned) is not reported. The observers
	// are called in the order listed. Empty: nothing is called.
	OnLateProbe []func(LateProbe)
	// OnRefusal are the observers called with the key of a breaker each time it refuses a call
	// (an *OpenError, through the Behavior or Gate), in the order listed, outside the breaker's
	// lock, by the goroutine refused, so they may call the registry; keep them cheap, as every
	// refused call makes one call of each (metrics.Recorder.OnRefusal counts them). Empty:
	// nothing is called.
	OnRefusal []func(key string)
	// Clock is the registry's time source. nil: behaviors.SystemClock.
	Clock behaviors.Clock
}

// StateChange describes one transition of one breaker.
type StateChange struct {
	// Key is the breaker's key.
	Key string
	// From and To are the states before and after.
	From, To State
	// At is when the change happened.
	At time.Time
	// Reason says why it happened: a breaker that keeps re-opening with ReasonProbeTimedOut,
	// for example, has a ProbeTimeout shorter than its dependency's latency.
	Reason ChangeReason
}

// LateProbe describes a probe whose outcome came after ProbeTimeout and was ignored; see
// Config.OnLateProbe.
type LateProbe struct {
	// Key is the breaker's key.
	Key string
	// Took is how long the probe ran, from the moment it was let through to the moment it
	// reported.
	Took time.Duration
	// Timeout is the registry's ProbeTimeout.
	Timeout time.Duration
	// Err is the error the probe reported to Permit.Done or returned through the
	// breaker Behavior; nil for a success, and for outcomes given with Success or
	// Failure.
	Err error
}

// Snapshot describes one breaker at one moment.
type Snapshot struct {
	// Key is the breaker's key.
	Key string
	// State is the breaker's state.
	State State
	// Failures is the number of consecutive counted failures: the streak that opened an open
	// breaker, the current streak of a closed one.
	Failures int
	// OpenedAt is when the breaker last opened; zero while closed.
	OpenedAt time.Time
	// Remaining is the time until an open breaker lets a probe through; zero otherwise.
	Remaining time.Duration
	// Probes is the number of probes in flight of a half-open breaker.
	Probes int
	// ProbeOwner is, for a half-open breaker whose registry shares its state through a Store,
	// the instance holding its probes (Config.Instance: this registry's own, or another's,
	// whose probes decide while this one refuses); empty otherwise.
	ProbeOwner string
}

// Registry holds one circuit breaker per key. Breakers are created on first use, or up front
// by Declare. It
// serves the breaker Behavior and, through Gate and OpenFor, code that calls a
// dependency through its own client. All methods are safe for concurrent use.
type Registry struct {
	clock behaviors.Clock
	epoch time.Time
	// systemClock: clock is behaviors.SystemClock, whose time since epoch time.Since reads
	// faster.
	systemClock bool
	// idleFired, with the system clock and an IdleTTL, is set by a timer, armed while idleArmed,
	// by the time the last sweep is IdleTTL old, so that a new key of a registry near its bound
	// reads no clock before then (see idleSweepDue).
	idleFired *atomic.Bool
	idleArmed atomic.Bool
	room      int // the room of a shard's map under pressure; see roomLocked

	seed   maphash.Seed
	shards [shardCount]shard
	cache  [cacheSlots]atomic.Pointer[cacheEntry] // breakers found in the shards, read without locks
	size   atomic.Int64

	sweepMu    sync.Mutex
	sweeps     atomic.Uint32 // the sweeps begun; see sweepLocked
	lastSweep  atomic.Int64
	sweepAt    atomic.Int64 // size past which a new key triggers a sweep under pressure
	sweepShard int          // the shard a pressure sweep starts at, under sweepMu
	goneBuf    []string     // the keys a sweep evicted, kept for the next one, under sweepMu

	freeMu     sync.Mutex
	spareBatch int        // see the constant
	free       []*breaker // evicted breakers a new key may reuse; see putFreeLocked

	listeners      listenerSet[StateChange]
	evictListeners listenerSet[string]

	syncMu       sync.Mutex          // with a Store: the keys below
	unsyncedKeys map[string]struct{} // local transitions the store did not take
	reconciling  bool                // a goroutine publishes them
	retryArmed   bool                // a timer will offer them again
	// storeAwayUntil is the registry time until which the store is taken to be away (see
	// transition).
	storeAwayUntil atomic.Int64

	// cfg is last, so that the fields the hot path reads keep their places whatever Config
	// holds (a field added to Config moved them across cache lines and cost the keyed closed
	// path 13 %).
	cfg Config
}

// NewRegistry returns a registry whose breakers follow cfg.
func NewRegistry(cfg Config) *Registry {
	if cfg.FailureThreshold == 0 {
		cfg.FailureThreshold = 5
	}
	if cfg.OpenDuration == 0 {
		cfg.OpenDuration = 30 * time.Second
	}
	if cfg.HalfOpenProbes == 0 {
		cfg.HalfOpenProbes = 1
	}
	if cfg.ProbeTimeout == 0 {
		cfg.ProbeTimeout = 30 * time.Second
	}
	if cfg.RateWindow == 0 {
		cfg.RateWindow = time.Minute
	}
	if cfg.RateMinCalls == 0 {
		cfg.RateMinCalls = 10
	}
	if cfg.Classifier == nil {
		cfg.Classifier = CountsAsFailure
	}
	if cfg.MaxBreakers == 0 {
		cfg.MaxBreakers = 10_000
	}
	if cfg.IdleTTL == 0 {
		cfg.IdleTTL = 10 * time.Minute
	}
	if cfg.StoreTimeout == 0 {
		cfg.StoreTimeout = 250 * time.Millisecond
	}
	if cfg.Store != nil && cfg.Instance == "" {
		cfg.Instance = defaultInstance()
	}
	cfg.OnStateChange, cfg.OnStoreError = slices.Clone(cfg.OnStateChange), slices.Clone(cfg.OnStoreError)
	cfg.OnLateProbe, cfg.OnRefusal = slices.Clone(cfg.OnLateProbe), slices.Clone(cfg.OnRefusal)
	r := &Registry{cfg: cfg, clock: cfg.Clock}
	if r.clock == nil {
		r.clock = behaviors.SystemClock
	}
	r.systemClock = r.clock == behaviors.SystemClock
	r.epoch = r.clock.Now()
	if r.systemClock && cfg.IdleTTL > 0 {
		r.idleFired = new(atomic.Bool)
	}
	r.sweepAt.Store(int64(cfg.MaxBreakers))
	r.seed = maphash.MakeSeed()
	r.spareBatch = spareBatch
	if cfg.MaxBreakers > 0 {
		r.room = 4 * (cfg.MaxBreakers*5/4/shardCount + 1)
		r.spareBatch = min(spareBatch, max(cfg.MaxBreakers/4/shardCount/4, 1)) // a quarter of a sweep's share
	}
	for i := range r.shards {
		r.shards[i].m = make(map[uint64]*breaker)
	}
	if cfg.Store != nil {
		r.share()
	}
	return r
}

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

// Validate reports what Config.Validate reports of the registry's configuration.
func (r *Registry) Validate() error { return r.cfg.Validate() }

// KeyOf returns the key of req's breaker: Config.Key applied to req, or behaviors.TypeKey of
// req's type when the registry has no key function. Code that gates or looks up the breaker
// of a request (a durable scheduler) uses it, so that the key function lives in one place.
func (r *Registry) KeyOf(req any) string {
	if r.cfg.Key != nil {
		return r.cfg.Key(req)
	}
	return behaviors.TypeKey(reflect.TypeOf(req))
}

// Validate reports fields set to invalid values, each naming its field; zero fields are valid.
func (c Config) Validate() error {
	var errs []error
	if c.FailureThreshold < 0 {
		errs = append(errs, fmt.Errorf("FailureThreshold %d is negative", c.FailureThreshold))
	}
	if c.OpenDuration < 0 || c.ProbeTimeout < 0 || c.RateWindow < 0 {
		errs = append(errs, errors.New("OpenDuration, ProbeTimeout and RateWindow must not be negative"))
	}
	if !(c.OpenJitter >= 0 && c.OpenJitter < 1) {
		errs = append(errs, fmt.Errorf("OpenJitter %v is not in [0, 1)", c.OpenJitter))
	}
	if c.HalfOpenProbes < 0 {
		errs = append(errs, fmt.Errorf("HalfOpenProbes %d is negative", c.HalfOpenProbes))
	}
	if !(c.FailureRate >= 0 && c.FailureRate <= 1) {
		errs = append(errs, fmt.Errorf("FailureRate %v is not in [0, 1]", c.FailureRate))
	}
	if c.RateMinCalls < 0 {
		errs = append(errs, fmt.Errorf("RateMinCalls %d is negative", c.RateMinCalls))
	}
	if c.StoreTimeout < 0 {
		errs = append(errs, fmt.Errorf("StoreTimeout %v is negative", c.StoreTimeout))
	}
	return errors.Join(errs...)
}

// now is the registry's time: nanoseconds since it was created (never negative, even with a
// Clock that goes backwards).
func (r *Registry) now() int64 {
	if r.systemClock {
		// One monotonic clock read where Now makes two (the wall clock too); a testing/synctest
		// bubble's fake time all the same.
		return max(int64(time.Since(r.epoch)), 0)
	}
	return max(int64(r.clock.Now().Sub(r.epoch)), 0)
}

func (r *Registry) timeAt(n int64) time.Time { return r.epoch.Add(time.Duration(n)) }

func (r *Registry) isFailure(ctx context.Context, err error) bool {
	return ctx.Err() == nil && !behaviors.IsRefusal(err) && r.cfg.Classifier(err)
}

func (r *Registry) openDuration() time.Duration {
	d := r.cfg.OpenDuration
	if j := r.cfg.OpenJitter; j > 0 {
		f := float64(d) * (1 + j*(2*rand.Float64()-1))
		if f >= math.MaxInt64 {
			return time.Duration(math.MaxInt64 / 2)
		}
		d = time.Duration(f)
	}
	return d
}

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

// Gate reports whether a call to key may start now, creating the key's breaker on first use.
// When it may, report the call's outcome on the returned Permit exactly once; when it may
// not, the error is a *OpenError. This is the pipeline's breaker for code that sends
// through its own client:
//
//	p, err := reg.Gate(endpoint)
//	if err != nil {
//		return err // open: do not send
//	}
//	err = send(ctx, endpoint, msg)
//	p.Done(ctx, err)
func (r *Registry) Gate(key string) (Permit, error) {
	b, w := r.find(key)
	if stateOf(w) == StateClosed {
		return Permit{b: b, word: w}, nil
	}
	return b.allowSlow(key, w)
}

// OpenFor reports whether calls to key would be refused now and, if so, the time until a
// probe may start. For a half-open breaker whose probe slots are all taken, remaining is 0, as
// in the *OpenError of a call refused then: a slot frees the moment a probe ends without
// a verdict, and the breaker opens or closes the moment the probes decide, usually long before
// the probe timeout, so a caller that waits should look again soon rather than wait out the
// timeout. An unknown key is closed.
func (r *Registry) OpenFor(key string) (remaining time.Duration, open bool) {
	a := r.Admission(key)
	return a.Remaining, a.Refuses()
}

// Admission is what a breaker would do with a call made now; see Registry.Admission.
type Admission struct {
	// State is the breaker's state, after the changes time alone makes (an open breaker whose
	// open duration has passed is half-open).
	State State
	// Remaining is, for an open breaker, the time until it lets a probe through; zero
	// otherwise.
	Remaining time.Duration
	// FreeProbes is, for a half-open breaker, the number of probes it would still let
	// through; zero otherwise.
	FreeProbes int
}

// Refuses reports whether a call made now would be refused: the breaker is open, or
// half-open with every probe slot taken.
func (a Admission) Refuses() bool {
	return a.State == StateOpen || a.State == StateHalfOpen && a.FreeProbes == 0
}

// Admission reports what the breaker of key would do with a call made now, without making one:
// a scheduler that holds work for key (the durable queue's) lets through no more of it than
// FreeProbes while the breaker is half-open, and parks the rest until the probes decide. An
// unknown key is closed. It makes the changes time alone makes (open to half-open once the open
// duration has passed, half-open to open when a probe has hung past ProbeTimeout), as a call
// would.
func (r *Registry) Admission(key string) Admission {
	sh, h := r.shard(key)
	sh.mu.Lock()
	b := sh.lookupLocked(h, key)
	if b == nil || stateOf(b.word.Load()) == StateClosed {
		sh.mu.Unlock()
		return Admission{State: StateClosed}
	}
	now := r.now()
	var ev events
	b.mu.Lock()
	sh.mu.Unlock()
	w := b.refreshLocked(now, &ev)
	a := Admission{State: stateOf(w)}
	switch {
	case b.claimableLocked(now):
		// With a Store, the first call claims the probes for this instance: say what it
		// would get.
		a.State, a.FreeProbes = StateHalfOpen, max(r.cfg.HalfOpenProbes, 1)
	case a.State == StateOpen:
		a.Remaining = time.Duration(max(b.openUntil.Load()-now, 0))
	case a.State == StateHalfOpen && b.foreignLocked():
		// Another instance holds the probes.
	case a.State == StateHalfOpen:
		for _, s := range b.slots {
			if s.ticket == 0 {
				a.FreeProbes++
			}
		}
	}
	b.mu.Unlock()
	b.announce(&ev)
	return a
}

// Trip opens the breaker of key now, for the open duration, whatever its failure count; the
// open duration of an open breaker starts over. It fails with ErrUnknown for a key the
// registry does not hold.
func (r *Registry) Trip(key string) error {
	return r.force(key, func(b *breaker, now int64, ev *events) {
		b.setLocked(StateOpen, ReasonManualTrip, now, ev)
	})
}

// Reset closes the breaker of key and clears its failure count. It fails with
// ErrUnknown for a key the registry does not hold.
func (r *Registry) Reset(key string) error {
	closed := false
	err := r.force(key, func(b *breaker, now int64, ev *events) {
		if w := b.word.Load(); stateOf(w) == StateClosed {
			closed = true
			// No state change, but a new generation: calls that began before the reset
			// are not counted after it.
			b.word.Store(w + 1<<stateBits)
			b.failures.Store(0)
			if b.window != nil {
				b.window.reset()
			}
			return
		}
		b.setLocked(StateClosed, ReasonManualReset, now, ev)
	})
	if err == nil && closed && r.cfg.Store != nil {
		// Closed here, maybe not elsewhere (the others' trip not heard yet): the operator's
		// reset closes it in the store too.
		if b := r.locked(key, false); b != nil {
			snap := b.snapshotLocked(r.now())
			b.mu.Unlock()
			r.publish(announcement{change: StateChange{Key: key, From: StateClosed, To: StateClosed, Reason: ReasonManualReset}, snap: snap, b: b}, false)
		}
	}
	return err
}

func (r *Registry) force(key string, fn func(*breaker, int64, *events)) error {
	b := r.locked(key, false)
	if b == nil {
		return fmt.Errorf("%w: %q", ErrUnknown, key)
	}
	var ev events
	fn(b, r.now(), &ev)
	b.mu.Unlock()
	b.announce(&ev)
	return nil
}

// locked returns the breaker of key with its lock held, or nil when the registry holds none
// and create is false. Holding the lock, it stays the key's breaker: a sweep evicts under it.
func (r *Registry) locked(key string, create bool) *breaker {
	sh, h := r.shard(key)
	for {
		sh.mu.Lock()
		if b := sh.lookupLocked(h, key); b != nil {
			b.mu.Lock()
			sh.mu.Unlock()
			return b
		}
		sh.mu.Unlock()
		if !create {
			return nil
		}
		r.create(key, false)
	}
}

// Apply adopts a state decided elsewhere (by another instance, through a Store): an
// open s opens the breaker of s.Key for s.Remaining, a closed s closes it; a half-open s is
// ignored (half-open is decided locally, by time). Listeners are told; the store is not (it
// already knows). The breaker is created if missing.
func (r *Registry) Apply(s Snapshot) {
	b := r.locked(s.Key, true)
	now := r.now()
	ev := events{applied: true}
	switch cur := stateOf(b.word.Load()); {
	case s.State == StateOpen:
		if cur != StateOpen {
			b.setLocked(StateOpen, ReasonApplied, now, &ev)
		}
		b.openUntil.Store(after(now, max(s.Remaining, 0)))
		b.failures.Store(int32(min(s.Failures, math.MaxInt32)))
	case s.State == StateClosed && cur != StateClosed:
		b.setLocked(StateClosed, ReasonApplied, now, &ev)
	}
	b.mu.Unlock()
	b.announce(&ev)
}

// Get returns the snapshot of key's breaker, or an error matching ErrUnknown.
func (r *Registry) Get(key string) (Snapshot, error) {
	b := r.locked(key, false)
	if b == nil {
		return Snapshot{}, fmt.Errorf("%w: %q", ErrUnknown, key)
	}
	return b.snapshotUnlock(r.now()), nil
}

// Snapshot lists every breaker the registry holds, sorted by key.
func (r *Registry) Snapshot() []Snapshot {
	type held struct {
		key string
		b   *breaker
	}
	var all []held
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		for _, b := range sh.m {
			all = append(all, held{b.key, b})
		}
		for k, b := range sh.more {
			all = append(all, held{k, b})
		}
		sh.mu.Unlock()
	}
	now := r.now()
	out := make([]Snapshot, 0, len(all))
	for _, h := range all {
		h.b.mu.Lock()
		if h.b.evictedNow() || h.b.key != h.key {
			h.b.mu.Unlock() // evicted since: no longer held
			continue
		}
		out = append(out, h.b.snapshotUnlock(now))
	}
	slices.SortFunc(out, func(a, b Snapshot) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// Len returns the number of breakers held.
func (r *Registry) Len() int { return int(r.size.Load()) }

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

// AddListener adds fn to the functions called after every state change (after
// Config.OnStateChange, in the order added), outside locks, and
// returns a function that removes it (a component that stops, such as a durable scheduler,
// removes its listener so the registry does not keep it alive).
func (r *Registry) AddListener(fn func(StateChange)) (remove func()) { return r.listeners.add(fn) }

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

// listenerSet is a set of functions that may change while it is read: readers load a slice
// that is never modified, writers replace it under mu.
type listenerSet[T any] struct {
	mu  sync.Mutex
	cur atomic.Pointer[[]*listener[T]]
}

// listener is one function added to a listenerSet; its pointer identifies it for removal.
type listener[T any] struct{ fn func(T) }

func (s *listenerSet[T]) load() []*listener[T] {
	if p := s.cur.Load(); p != nil {
		return *p
	}
	return nil
}

func (s *listenerSet[T]) add(fn func(T)) (remove func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := &listener[T]{fn: fn}
	next := append(slices.Clone(s.load()), l)
	s.cur.Store(&next)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		next := slices.DeleteFunc(slices.Clone(s.load()), func(x *listener[T]) bool { return x == l })
		s.cur.Store(&next)
	}
}

// events notes whether a section under a breaker's lock made state changes, which it queued on
// the breaker (see announcement) to be announced once the lock is released.
type events struct {
	n       int
	applied bool // the changes come from Apply: the store is not told
	// publish: the section learned that a claim of the probes the store holds is this
	// registry's own, whose probes decided meanwhile: the registry's state is to be published
	// over it (see ownClaimLocked).
	publish bool
}

// announcement is one state change waiting to be announced.
type announcement struct {
	change  StateChange
	snap    Snapshot
	applied bool // decided elsewhere: the store is not told
	quiet   bool // into the same state (a new generation): the listeners are not told
	b       *breaker
}

// queueLocked records a state change to announce. Called under b.mu, so the queue is in the
// order of the transitions.
func (b *breaker) queueLocked(ev *events, c StateChange, s Snapshot, quiet bool) {
	b.queue = append(b.queue, announcement{change: c, snap: s, applied: ev.applied, quiet: quiet, b: b})
	ev.n++
}

// announce tells the store and the listeners about the changes queued on b, outside b's lock
// and in the order they happened. One goroutine at a time announces a breaker's changes: a
// goroutine that finds another one announcing leaves its changes to it, so a change made while
// an earlier one is still being announced (or by a listener) is announced after it, never
// before.
func (b *breaker) announce(ev *events) {
	if ev.n == 0 {
		return
	}
	b.mu.Lock()
	if b.announcing {
		b.mu.Unlock()
		return
	}
	b.announcing = true
	finished := false
	defer func() {
		if !finished { // a listener panicked: let the next change be announced
			b.mu.Lock()
			b.announcing = false
			b.mu.Unlock()
		}
	}()
	for len(b.queue) > 0 {
		batch := b.queue
		b.queue = nil
		b.mu.Unlock()
		b.reg.deliver(batch)
		b.mu.Lock()
	}
	b.announcing = false
	finished = true
	b.mu.Unlock()
}

func (r *Registry) deliver(batch []announcement) {
	ls := r.listeners.load()
	for _, a := range batch {
		if r.cfg.Store != nil && !a.applied {
			r.publish(a, false)
		}
		if a.quiet {
			continue
		}
		for _, on := range r.cfg.OnStateChange {
			on(a.change)
		}
		for _, l := range ls {
			l.fn(a.change)
		}
	}
}
