package breaker

import (
	"cmp"
	"context"
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
	observers      behaviors.ObserverSet[Observer]        // the mediators' (Observe)
	refusals       behaviors.ObserverSet[RefusalObserver] // the mediators' (Observe)

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
	// Recheck is, for a breaker that refuses with no time to wait (Remaining and FreeProbes
	// both zero: it waits on its probes), the longest that wait lasts unless their verdict
	// ends it first: until the earliest probe out has run ProbeTimeout (the breaker then takes
	// it for hung and opens again), until another instance's claim of the probes runs out (its
	// ProbeUntil: this registry may then claim them), or, while a claim of the probes waits for
	// the Store's answer, StoreTimeout. Zero otherwise. A scheduler that parks work behind the
	// probes and frees it on their verdict (a StateChange) looks again by then at the latest:
	// a probe whose holder died sends no StateChange, and the changes that time alone causes
	// are made only when something asks.
	Recheck time.Duration
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
		if a.Remaining == 0 {
			// Its open time has passed and a claim of the probes (or the look-up or the
			// verdict that goes before one) waits for the store.
			a.Recheck = r.cfg.StoreTimeout
		}
	case a.State == StateHalfOpen && b.foreignLocked():
		// Another instance holds the probes, until its claim runs out.
		a.Recheck = time.Duration(max(b.shared.foreignUntil-now, 0))
	case a.State == StateHalfOpen:
		until := int64(math.MaxInt64)
		for _, s := range b.slots {
			switch {
			case s.ticket == 0:
				a.FreeProbes++
			case !s.passed:
				until = min(until, s.deadline)
			}
		}
		if a.FreeProbes == 0 && until != math.MaxInt64 {
			a.Recheck = time.Duration(max(until-now, 0))
		}
	}
	b.mu.Unlock()
	b.announce(&ev)
	return a
}

// Shared reports whether the registry shares its breakers' state through a Config.Store (with a
// fleet's other instances): a Trip or Reset of a registry that does not changes this
// instance's breaker alone.
func (r *Registry) Shared() bool { return r.cfg.Store != nil }

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
