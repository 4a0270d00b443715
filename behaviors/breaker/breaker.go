package breaker

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// State is the state of one circuit breaker.
type State uint8

const (
	// StateClosed lets every call through and counts consecutive failures.
	StateClosed State = iota
	// StateOpen refuses every call with a *OpenError until the open duration ends.
	StateOpen
	// StateHalfOpen lets at most HalfOpenProbes probe calls through, in total, to find out
	// whether the dependency is back. It closes once that many probes have succeeded; a probe's
	// counted failure, or a probe still running after ProbeTimeout, opens it again at once for
	// a fresh open duration. A probe whose outcome is not counted (its error is not a failure,
	// or it was released or panicked) frees its slot for another probe; a successful probe
	// keeps its slot.
	StateHalfOpen
)

// String returns "closed", "open" or "half-open".
func (s State) String() string {
	switch s {
	case StateClosed:
		return "closed"
	case StateOpen:
		return "open"
	case StateHalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// MarshalText returns String, so that a state reads as its name ("closed", "open",
// "half-open") in JSON and logs, never as a number whose meaning depends on this package's
// constant order.
func (s State) MarshalText() ([]byte, error) {
	if s > StateHalfOpen {
		return nil, fmt.Errorf("breaker: invalid state %d", uint8(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText parses a name returned by String.
func (s *State) UnmarshalText(text []byte) error {
	for _, st := range [...]State{StateClosed, StateOpen, StateHalfOpen} {
		if string(text) == st.String() {
			*s = st
			return nil
		}
	}
	return fmt.Errorf("breaker: unknown breaker state %q", text)
}

// ChangeReason says why a breaker changed state.
type ChangeReason uint8

// The reasons of StateChange.
const (
	// ReasonUnknown is the zero ChangeReason; the registry never reports it.
	ReasonUnknown ChangeReason = iota
	// ReasonFailureThreshold: FailureThreshold consecutive counted failures opened a closed
	// breaker.
	ReasonFailureThreshold
	// ReasonFailureRate: the failure rate within RateWindow reached FailureRate and opened a
	// closed breaker.
	ReasonFailureRate
	// ReasonProbeFailed: a probe's counted failure opened a half-open breaker again.
	ReasonProbeFailed
	// ReasonProbeTimedOut: a probe still running after ProbeTimeout opened a half-open breaker
	// again; with a Store, also the claim of another instance holding the probes ran out
	// (its probe is taken to have hung), and this registry may claim them at once.
	ReasonProbeTimedOut
	// ReasonProbesSucceeded: HalfOpenProbes probes succeeded and closed a half-open breaker.
	ReasonProbesSucceeded
	// ReasonOpenDurationElapsed: the open duration ended and the breaker became half-open.
	ReasonOpenDurationElapsed
	// ReasonManualTrip: Registry.Trip opened the breaker.
	ReasonManualTrip
	// ReasonManualReset: Registry.Reset closed the breaker.
	ReasonManualReset
	// ReasonApplied: Registry.Apply adopted a state decided elsewhere (another instance,
	// through a Store).
	ReasonApplied
)

// String returns the reason's name: "failure-threshold", "failure-rate", "probe-failed",
// "probe-timed-out", "probes-succeeded", "open-duration-elapsed", "manual-trip",
// "manual-reset", "applied" or "unknown".
func (r ChangeReason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("ChangeReason(%d)", uint8(r))
}

var reasonNames = [...]string{
	ReasonUnknown:             "unknown",
	ReasonFailureThreshold:    "failure-threshold",
	ReasonFailureRate:         "failure-rate",
	ReasonProbeFailed:         "probe-failed",
	ReasonProbeTimedOut:       "probe-timed-out",
	ReasonProbesSucceeded:     "probes-succeeded",
	ReasonOpenDurationElapsed: "open-duration-elapsed",
	ReasonManualTrip:          "manual-trip",
	ReasonManualReset:         "manual-reset",
	ReasonApplied:             "applied",
}

// MarshalText returns String, so that the reason reads as its name in JSON and logs.
func (r ChangeReason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText parses a name returned by String.
func (r *ChangeReason) UnmarshalText(text []byte) error {
	for i, n := range reasonNames {
		if string(text) == n {
			*r = ChangeReason(i)
			return nil
		}
	}
	return fmt.Errorf("breaker: unknown breaker change reason %q", text)
}

// The state word packs a generation counter above the state. Every transition increments the
// generation, so a call that began under one word and ends under another is recognised as
// stale and its outcome is ignored.
const (
	stateBits = 2
	stateMask = 1<<stateBits - 1
)

func stateOf(w uint64) State { return State(w & stateMask) }

type outcome uint8

const (
	outcomeSuccess outcome = iota
	outcomeFailure
	outcomeIgnored  // the classifier does not count the call's error
	outcomeReleased // the call says nothing: abandoned, panicked
)

// trip says whether recording an outcome opened the breaker, and for how long.
type trip struct {
	opened    bool
	remaining time.Duration
	key       string // the key of the breaker opened
}

// breaker is the state of one key. The closed path reads word, failures, inc, touched and
// window and writes nothing while they hold their usual values; everything else runs under mu.
// The fields are laid out for a sweep and a reuse (see sweepLocked, reuseLocked): what they
// read and write lies in the first two cache lines, and the breaker fills three, so that it
// shares none with another object.
type breaker struct {
	word     atomic.Uint64
	failures atomic.Int32
	// inc counts the breaker's evictions and reuses: odd while it is evicted, when outcomes go
	// to the key's live breaker. Both happen under mu and the shard's lock. See cacheEntry.
	inc        atomic.Uint32
	touched    atomic.Bool
	pinned     atomic.Bool
	gone       bool         // evicted once, under mu: goneKey and goneWord are its key and word then
	announcing bool         // a goroutine is announcing the queue
	born       uint32       // the sweeps begun when it became its key's breaker, under the shard's lock
	openUntil  atomic.Int64 // registry time when a probe may start; meaningful while open
	window     *rateWindow
	mu         sync.Mutex
	goneWord   uint64
	hash       uint64 // key's, under the shard's lock: its place in the shard's map

	key      string         // written under mu and the shard's lock, when a new key reuses the breaker
	goneKey  string         // for the calls let through before the last eviction; see recordSlow
	queue    []announcement // state changes not yet announced, oldest first
	openedAt int64

	slots  []probeSlot // the half-open period's probes; see probeSlot
	ticket uint32
	reg    *Registry
	shared *sharedState // with a Store: the breaker's place in the fleet's state; under mu
	_      [cacheLine - 56]byte
}

// evictedNow reports whether a sweep removed b from the registry (and no new key reused it).
func (b *breaker) evictedNow() bool { return b.inc.Load()&1 != 0 }

// probeSlot is one of a half-open period's HalfOpenProbes probes: free (ticket 0), in flight
// until deadline, or passed (the probe succeeded; the slot stays taken for the period).
type probeSlot struct {
	deadline int64
	ticket   uint32
	passed   bool
}

// Permit is a breaker's permission for one call to start. Report the call's outcome exactly
// once, with Done, Success, Failure or Release. The zero Permit records nothing.
type Permit struct {
	b    *breaker
	word uint64
	// probe is (probe slot + 1) << 32 | the probe's ticket; 0 for a call let through by a
	// closed breaker. (One word, not two: a Permit of four words is returned and passed in
	// registers, and Gate + Done stay as fast as a closed breaker allows.)
	probe uint64
	start int64 // registry time a probe started; 0 for other calls
}

// Probe reports whether the permit is a half-open probe.
func (p Permit) Probe() bool { return p.probe != 0 }

// slot returns the index of a probe's slot.
func (p Permit) slot() int { return int(p.probe>>32) - 1 }

// ticket returns a probe's ticket.
func (p Permit) ticket() uint32 { return uint32(p.probe) }

// Done records the outcome of the call: success when err is nil, a failure when the
// registry's classifier counts err, and nothing otherwise (the caller's cancellation, a
// validation error, ...), except that a probe's slot is freed.
func (p Permit) Done(ctx context.Context, err error) {
	if err == nil && p.probe == 0 && p.b != nil && p.b.window == nil && p.b.failures.Load() == 0 {
		return // closed-path success: nothing to record
	}
	p.done(ctx, err)
}

// done records the outcome of a call that ended with err and reports whether it opened the
// breaker.
func (p Permit) done(ctx context.Context, err error) trip {
	switch {
	case err == nil:
		return p.record(outcomeSuccess, nil)
	case p.b != nil && p.b.reg.isFailure(ctx, err):
		return p.record(outcomeFailure, err)
	default:
		return p.record(outcomeIgnored, err)
	}
}

// finish records the outcome of a call of the breaker Behavior and returns the error
// the call returns: a *TrippedError when its failure opened the breaker, else err.
func (p Permit) finish(ctx context.Context, err error) error {
	if t := p.done(ctx, err); t.opened {
		return &TrippedError{Key: t.key, Remaining: t.remaining, Err: err}
	}
	return err
}

// Success records a successful call.
func (p Permit) Success() { p.record(outcomeSuccess, nil) }

// Failure records a failed call, bypassing the classifier.
func (p Permit) Failure() { p.record(outcomeFailure, nil) }

// Release records that the call says nothing about the dependency (it was abandoned, it
// panicked): a probe's slot is freed and nothing is counted.
func (p Permit) Release() { p.record(outcomeReleased, nil) }

func (p Permit) record(o outcome, err error) trip {
	b := p.b
	if b == nil {
		return trip{}
	}
	if p.probe == 0 {
		switch o {
		case outcomeIgnored, outcomeReleased:
			return trip{}
		case outcomeSuccess:
			// Closed-path success: no write, no lock, no clock unless a failure streak
			// must be ended or a failure-rate window counts calls.
			if b.window == nil && b.failures.Load() == 0 {
				return trip{}
			}
		}
	}
	return b.recordSlow(p, o, err)
}

// allowSlow gates a call of key whose breaker b was found not closed, with word w. b may have
// been evicted, or reused for another key, since: it is checked under the lock.
func (b *breaker) allowSlow(key string, w uint64) (Permit, error) {
	if !b.touched.Load() {
		b.touched.Store(true) // a refusal is a use too: see sweep
	}
	now := b.reg.now()
	if stateOf(w) == StateOpen {
		// The word unchanged after reading openUntil: the open time read is this
		// generation's, of key's breaker.
		if until := b.openUntil.Load(); now < until && b.word.Load() == w {
			return Permit{}, b.reg.refused(key, openError(key, until-now))
		}
	}
	var ev events
	b.mu.Lock()
	if b.evictedNow() || b.key != key {
		// A sweep removed it (open past its open time, or half-open without probes) after
		// the caller found it: ask the key's live breaker.
		b.mu.Unlock()
		return b.reg.Gate(key)
	}
	if b.reg.cfg.Store != nil {
		b.refreshLocked(now, &ev)
		if b.claimableLocked(now) {
			return b.claim(key, now, &ev)
		}
	}
	p, err := b.admitLocked(now, &ev)
	b.mu.Unlock()
	b.announce(&ev)
	if err != nil {
		err = b.reg.refused(key, err)
	}
	return p, err
}

// refused tells Config.OnRefusal and the RefusalObservers about a refusal of key, outside the
// lock, and returns its error.
func (r *Registry) refused(key string, err error) error {
	for _, on := range r.cfg.OnRefusal {
		on(key)
	}
	for _, o := range r.refusals.Load() {
		o.OnRefusal(key)
	}
	return err
}

// after returns registry time now + d, saturating instead of overflowing, so that a very long
// open duration or probe timeout (math.MaxInt64 for "until reset") is not read as the past.
func after(now int64, d time.Duration) int64 {
	if d > 0 && now > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	return now + int64(d)
}

func openError(key string, remaining int64) error {
	return &OpenError{Key: key, Remaining: time.Duration(max(remaining, 0))}
}

func (b *breaker) admitLocked(now int64, ev *events) (Permit, error) {
	w := b.refreshLocked(now, ev)
	switch stateOf(w) {
	case StateClosed:
		b.touched.Store(true)
		return Permit{b: b, word: w}, nil
	case StateOpen:
		return Permit{}, openError(b.key, b.openUntil.Load()-now)
	}
	if b.foreignLocked() {
		return Permit{}, openError(b.key, 0) // another instance's probes decide
	}
	for i := range b.slots {
		s := &b.slots[i]
		if s.ticket == 0 {
			b.ticket++
			if b.ticket == 0 {
				b.ticket = 1
			}
			*s = probeSlot{deadline: after(now, b.reg.cfg.ProbeTimeout), ticket: b.ticket}
			return Permit{b: b, word: w, probe: uint64(i+1)<<32 | uint64(b.ticket), start: now}, nil
		}
	}
	// Every slot is taken. A slot frees the moment a probe ends without a verdict, and the
	// breaker decides the moment a probe fails: there is no time worth waiting for.
	return Permit{}, openError(b.key, 0)
}

// refreshLocked makes the transitions that time alone causes: open → half-open once the open
// duration has passed, half-open → open when a probe has hung past the probe timeout.
func (b *breaker) refreshLocked(now int64, ev *events) uint64 {
	w := b.word.Load()
	switch stateOf(w) {
	case StateOpen:
		if now >= b.openUntil.Load() && b.reg.cfg.Store == nil {
			w = b.setLocked(StateHalfOpen, ReasonOpenDurationElapsed, now, ev)
		}
	case StateHalfOpen:
		if b.foreignLocked() {
			if now < b.shared.foreignUntil {
				return w // another instance holds the probes; see claimableLocked
			}
			// The holder's claim ran out: its probe is taken to have hung, as a probe of
			// this registry's own would be, and this registry may claim the probes at once.
			// The store is not told: the claim that follows takes the probes over there.
			applied := ev.applied
			ev.applied = true
			w = b.setLocked(StateOpen, ReasonProbeTimedOut, now, ev)
			ev.applied = applied
			b.openUntil.Store(now)
			return w
		}
		for _, s := range b.slots {
			if s.ticket != 0 && !s.passed && now >= s.deadline {
				b.failures.Add(1) // a hung probe counts as failed
				return b.setLocked(StateOpen, ReasonProbeTimedOut, now, ev)
			}
		}
	}
	return w
}

// probesInFlightLocked reports whether a half-open breaker has a probe running.
func (b *breaker) probesInFlightLocked() bool {
	for _, s := range b.slots {
		if s.ticket != 0 && !s.passed {
			return true
		}
	}
	return false
}

// recordSlow records outcome o (of a call that ended with err, for OnLateProbe) and reports
// whether it opened the breaker and for how long.
func (b *breaker) recordSlow(p Permit, o outcome, err error) (t trip) {
	now := b.reg.now()
	var ev events
	b.mu.Lock()
	if b.evictedNow() || b.gone && p.word>>stateBits <= b.goneWord>>stateBits {
		// A call let through before the last eviction (the breaker may since have been
		// reused for another key, in a later generation). Only one of the generation it was
		// evicted in, while closed, still says something the key's live breaker has not
		// decided without it.
		fwd, key := p.probe == 0 && p.word == b.goneWord, b.goneKey
		b.mu.Unlock()
		if fwd {
			return b.reg.forward(key, o, err)
		}
		return trip{}
	}
	// Make the transitions time has caused first: a probe reporting after its timeout finds
	// the breaker re-opened (a new generation) even when no call consulted it meanwhile.
	if b.refreshLocked(now, &ev) != p.word { // began before a state change, or a reuse: stale
		key := b.key
		b.mu.Unlock()
		b.announce(&ev)
		if p.probe != 0 && o != outcomeReleased && len(b.reg.cfg.OnLateProbe) > 0 {
			if took := now - p.start; took >= int64(b.reg.cfg.ProbeTimeout) {
				for _, on := range b.reg.cfg.OnLateProbe {
					on(LateProbe{Key: key, Took: time.Duration(took), Timeout: b.reg.cfg.ProbeTimeout, Err: err})
				}
			}
		}
		return trip{}
	}
	if p.probe == 0 {
		switch o {
		case outcomeSuccess:
			b.failures.Store(0)
			if b.window != nil {
				b.window.add(now, false)
			}
		case outcomeFailure:
			n := b.failures.Add(1)
			reason := ReasonUnknown
			if int(n) >= b.reg.cfg.FailureThreshold {
				reason = ReasonFailureThreshold
			}
			if b.window != nil {
				b.window.add(now, true)
				if reason == ReasonUnknown && b.window.trips(now) {
					reason = ReasonFailureRate
				}
			}
			if reason != ReasonUnknown {
				t = b.openLocked(reason, now, &ev)
			}
		}
	} else if s := &b.slots[p.slot()]; s.ticket == p.ticket() && !s.passed {
		switch o {
		case outcomeSuccess:
			s.passed = true
			if b.allPassedLocked() {
				b.setLocked(StateClosed, ReasonProbesSucceeded, now, &ev)
			}
		case outcomeFailure:
			b.failures.Add(1)
			t = b.openLocked(ReasonProbeFailed, now, &ev)
		default:
			*s = probeSlot{}
		}
	}
	b.mu.Unlock()
	b.announce(&ev)
	return t
}

// allPassedLocked reports whether every probe of the half-open period succeeded.
func (b *breaker) allPassedLocked() bool {
	for _, s := range b.slots {
		if !s.passed {
			return false
		}
	}
	return true
}

// openLocked opens the breaker because of a call's counted failure and returns the trip.
func (b *breaker) openLocked(reason ChangeReason, now int64, ev *events) trip {
	b.setLocked(StateOpen, reason, now, ev)
	return trip{opened: true, remaining: time.Duration(max(b.openUntil.Load()-now, 0)), key: b.key}
}

// setLocked moves the breaker to state to, starting a new generation, and queues the event.
// A breaker already in state to only starts a new generation (the calls let through before
// count no more, its probe slots are free, an open time starts over): its listeners are not
// told of a change into the same state, and the store is told only of what it did not decide
// (a trip by hand of an open breaker restarts its open time everywhere).
func (b *breaker) setLocked(to State, reason ChangeReason, now int64, ev *events) uint64 {
	old := b.word.Load()
	w := (old&^stateMask + 1<<stateBits) | uint64(to)
	clear(b.slots)
	if b.shared != nil {
		b.shared.foreign = false
	}
	switch to {
	case StateOpen:
		b.openedAt = now
		b.openUntil.Store(after(now, b.reg.openDuration()))
	case StateHalfOpen:
		if k := max(b.reg.cfg.HalfOpenProbes, 1); len(b.slots) != k {
			b.slots = make([]probeSlot, k)
		}
	case StateClosed:
		b.failures.Store(0)
		b.openedAt = 0
		if b.window != nil {
			b.window.reset()
		}
	}
	b.word.Store(w)
	from := stateOf(old)
	if from == to && ev.applied {
		return w // decided elsewhere, and no change of state: nothing to tell anyone
	}
	b.queueLocked(ev, StateChange{Key: b.key, From: from, To: to, At: b.reg.timeAt(now), Reason: reason}, b.snapshotLocked(now), from == to)
	return w
}

func (b *breaker) snapshotLocked(now int64) Snapshot {
	w := b.word.Load()
	s := Snapshot{Key: b.key, State: stateOf(w), Failures: int(b.failures.Load())}
	if s.State != StateClosed {
		s.OpenedAt = b.reg.timeAt(b.openedAt)
	}
	switch s.State {
	case StateOpen:
		s.Remaining = time.Duration(max(b.openUntil.Load()-now, 0))
	case StateHalfOpen:
		for _, p := range b.slots {
			if p.ticket != 0 && !p.passed {
				s.Probes++
			}
		}
		if b.shared != nil {
			s.ProbeOwner = b.reg.cfg.Instance
			if b.shared.foreign {
				s.ProbeOwner = b.shared.owner
			}
		}
	}
	return s
}

// snapshotUnlock returns b's snapshot and releases its lock, which the caller holds.
func (b *breaker) snapshotUnlock(now int64) Snapshot {
	var ev events
	b.refreshLocked(now, &ev)
	s := b.snapshotLocked(now)
	b.mu.Unlock()
	b.announce(&ev)
	return s
}

// rateWindow counts calls and failures in a sliding window of buckets.
type rateWindow struct {
	width    int64
	buckets  []rateBucket
	rate     float64
	minCalls int
}

type rateBucket struct {
	start      int64
	calls, bad int
}

func newRateWindow(window time.Duration, rate float64, minCalls int) *rateWindow {
	const n = 10
	return &rateWindow{width: max(int64(window)/n, 1), buckets: make([]rateBucket, n), rate: rate, minCalls: minCalls}
}

func (w *rateWindow) add(now int64, failed bool) {
	start := now - now%w.width
	b := &w.buckets[(now/w.width)%int64(len(w.buckets))]
	if b.start != start {
		*b = rateBucket{start: start}
	}
	b.calls++
	if failed {
		b.bad++
	}
}

func (w *rateWindow) totals(now int64) (calls, bad int) {
	oldest := now - now%w.width - w.width*int64(len(w.buckets)-1)
	for _, b := range w.buckets {
		if b.start >= oldest && b.calls > 0 {
			calls += b.calls
			bad += b.bad
		}
	}
	return calls, bad
}

// trips reports whether the window holds at least minCalls calls of which at least the
// failure-rate fraction failed.
func (w *rateWindow) trips(now int64) bool {
	calls, bad := w.totals(now)
	return calls >= w.minCalls && float64(bad) >= w.rate*float64(calls)
}

func (w *rateWindow) reset() { clear(w.buckets) }
