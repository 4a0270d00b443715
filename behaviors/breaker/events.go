package breaker

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

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

// AddListener adds fn to the functions called after every state change (after
// Config.OnStateChange, in the order added), outside locks, and
// returns a function that removes it (a component that stops, such as a durable scheduler,
// removes its listener so the registry does not keep it alive).
func (r *Registry) AddListener(fn func(StateChange)) (remove func()) { return r.listeners.add(fn) }

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
	ls, obs := r.listeners.load(), r.observers.Load()
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
		for _, o := range obs {
			o.OnStateChange(a.change)
		}
	}
}
