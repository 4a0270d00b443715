package behaviors

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
	// StateOpen refuses every call with a *CircuitOpenError until the open duration ends.
	StateOpen
	// StateHalfOpen lets a limited number of probe calls through: a probe's success closes
	// the breaker, its failure opens it again.
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
	outcomeIgnored
)

// breaker is the state of one key. The closed path reads word, failures and touched and writes
// nothing while they hold their usual values; everything else runs under mu.
type breaker struct {
	word      atomic.Uint64
	failures  atomic.Int32
	touched   atomic.Bool
	pinned    atomic.Bool
	evicted   atomic.Bool  // set under mu when a sweep removed it; outcomes then go to the key's live breaker
	openUntil atomic.Int64 // registry time when a probe may start; meaningful while open

	key string
	reg *BreakerRegistry

	mu         sync.Mutex
	openedAt   int64
	slots      []probeSlot
	ticket     uint32
	window     *rateWindow
	queue      []announcement // state changes not yet announced, oldest first
	announcing bool           // a goroutine is announcing the queue
}

// probeSlot is one half-open probe in flight; ticket 0 marks a free slot.
type probeSlot struct {
	deadline int64
	ticket   uint32
}

// Permit is a breaker's permission for one call to start. Report the call's outcome exactly
// once, with Done, Success, Failure or Release. The zero Permit records nothing.
type Permit struct {
	b      *breaker
	word   uint64
	slot   int32 // probe slot + 1; 0 for a call let through by a closed breaker
	ticket uint32
}

// Probe reports whether the permit is a half-open probe.
func (p Permit) Probe() bool { return p.slot != 0 }

// Done records the outcome of the call: success when err is nil, a failure when the
// registry's classifier counts err, and nothing otherwise (the caller's cancellation, a
// validation error, ...), except that a probe's slot is freed.
func (p Permit) Done(ctx context.Context, err error) {
	if err == nil && p.slot == 0 && p.b != nil && p.b.window == nil && p.b.failures.Load() == 0 {
		return // closed-path success: nothing to record
	}
	p.done(ctx, err)
}

func (p Permit) done(ctx context.Context, err error) {
	switch {
	case err == nil:
		p.record(outcomeSuccess)
	case p.b != nil && p.b.reg.isFailure(ctx, err):
		p.record(outcomeFailure)
	default:
		p.record(outcomeIgnored)
	}
}

// Success records a successful call.
func (p Permit) Success() { p.record(outcomeSuccess) }

// Failure records a failed call, bypassing the classifier.
func (p Permit) Failure() { p.record(outcomeFailure) }

// Release records that the call says nothing about the dependency (it was abandoned, it
// panicked): a probe's slot is freed and nothing is counted.
func (p Permit) Release() { p.record(outcomeIgnored) }

func (p Permit) record(o outcome) {
	b := p.b
	if b == nil {
		return
	}
	if p.slot == 0 {
		switch o {
		case outcomeIgnored:
			return
		case outcomeSuccess:
			// Closed-path success: no write, no lock, no clock unless a failure streak
			// must be ended or a failure-rate window counts calls.
			if b.window == nil && b.failures.Load() == 0 {
				return
			}
		}
	}
	b.recordSlow(p, o)
}

func (b *breaker) allow() (Permit, error) {
	w := b.word.Load()
	if stateOf(w) == StateClosed {
		if !b.touched.Load() {
			b.touched.Store(true)
		}
		return Permit{b: b, word: w}, nil
	}
	return b.allowSlow(w)
}

func (b *breaker) allowSlow(w uint64) (Permit, error) {
	now := b.reg.now()
	if stateOf(w) == StateOpen {
		if until := b.openUntil.Load(); now < until {
			return Permit{}, b.openError(until - now)
		}
	}
	var ev events
	b.mu.Lock()
	p, err := b.admitLocked(now, &ev)
	b.mu.Unlock()
	b.announce(&ev)
	return p, err
}

// after returns registry time now + d, saturating instead of overflowing, so that a very long
// open duration or probe timeout (math.MaxInt64 for "until reset") is not read as the past.
func after(now int64, d time.Duration) int64 {
	if d > 0 && now > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	return now + int64(d)
}

func (b *breaker) openError(remaining int64) error {
	return &CircuitOpenError{Key: b.key, Remaining: time.Duration(max(remaining, 0))}
}

func (b *breaker) admitLocked(now int64, ev *events) (Permit, error) {
	w := b.refreshLocked(now, ev)
	switch stateOf(w) {
	case StateClosed:
		b.touched.Store(true)
		return Permit{b: b, word: w}, nil
	case StateOpen:
		return Permit{}, b.openError(b.openUntil.Load() - now)
	}
	earliest := int64(0)
	for i := range b.slots {
		s := &b.slots[i]
		if s.ticket == 0 {
			b.ticket++
			if b.ticket == 0 {
				b.ticket = 1
			}
			*s = probeSlot{deadline: after(now, b.reg.cfg.ProbeTimeout), ticket: b.ticket}
			return Permit{b: b, word: w, slot: int32(i + 1), ticket: b.ticket}, nil
		}
		if earliest == 0 || s.deadline < earliest {
			earliest = s.deadline
		}
	}
	return Permit{}, b.openError(earliest - now)
}

// refreshLocked makes the transitions that time alone causes: open → half-open once the open
// duration has passed, half-open → open when a probe has hung past the probe timeout.
func (b *breaker) refreshLocked(now int64, ev *events) uint64 {
	w := b.word.Load()
	switch stateOf(w) {
	case StateOpen:
		if now >= b.openUntil.Load() {
			w = b.setLocked(StateHalfOpen, now, ev)
		}
	case StateHalfOpen:
		for _, s := range b.slots {
			if s.ticket != 0 && now >= s.deadline {
				return b.setLocked(StateOpen, now, ev)
			}
		}
	}
	return w
}

func (b *breaker) recordSlow(p Permit, o outcome) {
	now := b.reg.now()
	var ev events
	b.mu.Lock()
	if b.evicted.Load() {
		b.mu.Unlock()
		b.reg.forward(b.key, o)
		return
	}
	// Make the transitions time has caused first: a probe reporting after its timeout finds
	// the breaker re-opened (a new generation) even when no call consulted it meanwhile.
	if b.refreshLocked(now, &ev) != p.word { // began before a state change: stale
		b.mu.Unlock()
		b.announce(&ev)
		return
	}
	if p.slot == 0 {
		switch o {
		case outcomeSuccess:
			b.failures.Store(0)
			if b.window != nil {
				b.window.add(now, false)
			}
		case outcomeFailure:
			n := b.failures.Add(1)
			trip := int(n) >= b.reg.cfg.FailureThreshold
			if b.window != nil {
				b.window.add(now, true)
				trip = trip || b.window.trips(now)
			}
			if trip {
				b.setLocked(StateOpen, now, &ev)
			}
		}
	} else if s := &b.slots[p.slot-1]; s.ticket == p.ticket {
		switch o {
		case outcomeSuccess:
			b.setLocked(StateClosed, now, &ev)
		case outcomeFailure:
			b.failures.Add(1)
			b.setLocked(StateOpen, now, &ev)
		case outcomeIgnored:
			*s = probeSlot{}
		}
	}
	b.mu.Unlock()
	b.announce(&ev)
}

// setLocked moves the breaker to state to, starting a new generation, and queues the event.
func (b *breaker) setLocked(to State, now int64, ev *events) uint64 {
	old := b.word.Load()
	w := (old&^stateMask + 1<<stateBits) | uint64(to)
	clear(b.slots)
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
	b.queueLocked(ev, StateChange{Key: b.key, From: stateOf(old), To: to, At: b.reg.timeAt(now)}, b.snapshotLocked(now))
	return w
}

func (b *breaker) snapshotLocked(now int64) BreakerSnapshot {
	w := b.word.Load()
	s := BreakerSnapshot{Key: b.key, State: stateOf(w), Failures: int(b.failures.Load())}
	if s.State != StateClosed {
		s.OpenedAt = b.reg.timeAt(b.openedAt)
	}
	switch s.State {
	case StateOpen:
		s.Remaining = time.Duration(max(b.openUntil.Load()-now, 0))
	case StateHalfOpen:
		for _, p := range b.slots {
			if p.ticket != 0 {
				s.Probes++
			}
		}
	}
	return s
}

func (b *breaker) snapshot(now int64) BreakerSnapshot {
	var ev events
	b.mu.Lock()
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
