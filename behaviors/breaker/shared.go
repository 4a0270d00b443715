package breaker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"
)

// sharedState is what a breaker of a registry with a Store knows of its shared state. Under
// the breaker's mu.
type sharedState struct {
	epoch        int64  // the stored epoch of the breaker's last known state
	foreign      bool   // half-open, the probes held by another instance until foreignUntil
	foreignUntil int64  // registry time
	owner        string // while foreign: the instance holding the probes
	claiming     bool   // a call is claiming the probes
	unsynced     bool   // a local transition the store did not take yet
}

// defaultInstance names a registry to its Store: host, process id and a random suffix.
func defaultInstance() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// sharedLocked returns b's shared state, made on first use.
func (b *breaker) sharedLocked() *sharedState {
	if b.shared == nil {
		b.shared = &sharedState{}
	}
	return b.shared
}

// foreignLocked reports whether another instance holds b's probes.
func (b *breaker) foreignLocked() bool { return b.shared != nil && b.shared.foreign }

// claimableLocked reports whether a call now would claim b's probes from the Store: its open
// time has passed, or the probes' holder elsewhere let its claim run out.
func (b *breaker) claimableLocked(now int64) bool {
	if b.reg.cfg.Store == nil || b.shared != nil && b.shared.claiming {
		return false
	}
	switch stateOf(b.word.Load()) {
	case StateOpen:
		return now >= b.openUntil.Load()
	case StateHalfOpen:
		return b.foreignLocked() && now >= b.shared.foreignUntil
	}
	return false
}

// claim asks the Store for b's probes on behalf of the call of key, b's lock held (it is
// released). One call claims at a time; the others are refused meanwhile, as by a half-open
// breaker whose probes are out. The winner's breaker goes half-open here and lets the call
// through as a probe; a loser adopts what the store says (another instance's probes, or a
// state decided since). A store that fails lets this instance probe on its own.
func (b *breaker) claim(key string, now int64, ev *events) (Permit, error) {
	st := b.sharedLocked()
	st.claiming = true
	from, takeover := st.epoch, st.foreign // takeover: the other holder's claim ran out
	b.mu.Unlock()
	b.announce(ev)
	r := b.reg
	s, applied, err := r.transition(Transition{Key: key, From: from, To: StateHalfOpen,
		ProbeFor: r.cfg.ProbeTimeout, Owner: r.cfg.Instance, Reason: ReasonOpenDurationElapsed})
	if err != nil && !errors.Is(err, errStoreAway) {
		r.storeFailed(fmt.Errorf("breaker: claim the probes of %q: %w", key, err))
	}
	var ev2 events
	b.mu.Lock()
	st.claiming = false
	if b.evictedNow() || b.key != key {
		b.mu.Unlock()
		return r.Gate(key)
	}
	now = r.now()
	switch {
	case err != nil, !applied && s.Epoch == 0:
		// The store is away, or holds nothing of the key (a trip it did not take while it
		// was away): this instance probes on its own, and the retry publishes what it finds
		// once the store answers (not offered again now).
		st.unsynced = true
		defer r.unsynced(key)
		ev2.applied = true
		if stateOf(b.word.Load()) == StateOpen {
			b.setLocked(StateHalfOpen, ReasonOpenDurationElapsed, now, &ev2)
		} else {
			st.foreign = false
		}
	case applied:
		defer r.storeAnswered()
		st.epoch, st.unsynced = s.Epoch, false
		ev2.applied = true // the store has it
		reason := ReasonOpenDurationElapsed
		if takeover {
			reason = ReasonProbeTimedOut // the other holder's probes ran out: this instance takes them over
		}
		b.setLocked(StateHalfOpen, reason, now, &ev2)
	case s.Epoch == st.epoch:
		// Nobody moved it, but the store's clock says its time has not come (the clocks
		// differ): take the store's times, so the next call does not ask again at once.
		b.resyncLocked(s, now)
	default:
		ev2.applied = true
		b.adoptLocked(s, now, &ev2)
	}
	p, perr := b.admitLocked(now, &ev2)
	b.mu.Unlock()
	b.announce(&ev2)
	if perr != nil {
		perr = r.refused(key, perr)
	}
	return p, perr
}

// adoptLocked makes s, the stored state of b's key, b's state, unless b already knows a later
// epoch. Its changes are queued on ev (applied: the store is not told).
func (b *breaker) adoptLocked(s Shared, now int64, ev *events) {
	st := b.sharedLocked()
	if s.Epoch <= st.epoch {
		return // known already, or older than what this registry made
	}
	if st.claiming && s.State == StateHalfOpen && s.ProbeOwner == b.reg.cfg.Instance {
		return // this registry's own claim, told back by its store before the claim returned
	}
	st.epoch, st.unsynced = s.Epoch, false
	cur := stateOf(b.word.Load())
	translate := func(t time.Time) int64 { return after(now, t.Sub(s.Now)) }
	switch s.State {
	case StateClosed:
		if cur != StateClosed {
			b.setLocked(StateClosed, ReasonApplied, now, ev)
		}
	case StateOpen:
		if cur != StateOpen {
			b.setLocked(StateOpen, ReasonApplied, now, ev)
		}
		b.openUntil.Store(translate(s.OpenUntil))
		b.failures.Store(int32(min(s.Failures, 1<<31-1)))
	case StateHalfOpen:
		if s.ProbeOwner == b.reg.cfg.Instance {
			if cur != StateHalfOpen || st.foreign {
				b.setLocked(StateHalfOpen, ReasonApplied, now, ev) // our own claim, learned late
			}
			return
		}
		if cur != StateHalfOpen || !st.foreign {
			b.setLocked(StateHalfOpen, ReasonApplied, now, ev)
		}
		st.foreign, st.foreignUntil, st.owner = true, translate(s.ProbeUntil), s.ProbeOwner
	}
}

// resyncLocked takes the times of s, the stored state of the epoch b already has.
func (b *breaker) resyncLocked(s Shared, now int64) {
	translate := func(t time.Time) int64 { return after(now, t.Sub(s.Now)) }
	switch {
	case s.State == StateOpen && stateOf(b.word.Load()) == StateOpen:
		b.openUntil.Store(translate(s.OpenUntil))
	case s.State == StateHalfOpen && b.foreignLocked():
		b.shared.foreignUntil = translate(s.ProbeUntil)
	}
}

// publish tells the Store about a local transition, announced in order by deliver: it applies
// from the epoch last known, or yields to what another instance decided first (adopted). A
// manual reset or trip is the operator's word and is made over a state decided since.
func (r *Registry) publish(a announcement) {
	b := a.b
	key := a.change.Key
	b.mu.Lock()
	if b.evictedNow() || b.key != key {
		b.mu.Unlock()
		return
	}
	st := b.sharedLocked()
	t := Transition{Key: key, From: st.epoch, To: a.change.To, Failures: a.snap.Failures, Owner: r.cfg.Instance, Reason: a.change.Reason}
	switch a.change.To {
	case StateOpen:
		t.OpenFor = a.snap.Remaining
	case StateHalfOpen:
		t.ProbeFor = r.cfg.ProbeTimeout
	}
	b.mu.Unlock()
	manual := a.change.Reason == ReasonManualReset || a.change.Reason == ReasonManualTrip
	for try := 0; ; try++ {
		s, applied, err := r.transition(t)
		var ev events
		ev.applied = true
		b.mu.Lock()
		if b.evictedNow() || b.key != key {
			b.mu.Unlock()
			return
		}
		switch {
		case err != nil:
			st.unsynced = true
			b.mu.Unlock()
			r.unsynced(key)
			if !errors.Is(err, errStoreAway) {
				r.storeFailed(fmt.Errorf("breaker: share the %s of %q: %w", a.change.To, key, err))
			}
			return
		case applied:
			st.epoch, st.unsynced = s.Epoch, false
			b.mu.Unlock()
			r.storeAnswered()
			return
		case try == 0 && a.change.Reason != ReasonUnknown && (manual || s.State == a.change.From):
			// The store holds the state this one started from under a later epoch (one this
			// registry had not seen, as after a restart), or the operator's word: again from
			// that epoch.
			st.epoch, t.From = s.Epoch, s.Epoch
			b.mu.Unlock()
			continue
		default:
			b.adoptLocked(s, r.now(), &ev) // another instance decided first
			b.mu.Unlock()
			b.announce(&ev)
			return
		}
	}
}

// applyShared adopts a state another instance stored (a Store's Subscribe, or Load).
func (r *Registry) applyShared(s Shared) {
	defer r.storeAnswered()
	b := r.locked(s.Key, s.State != StateClosed)
	if b == nil {
		return // a closed breaker this registry does not hold: nothing to adopt
	}
	ev := events{applied: true}
	b.adoptLocked(s, r.now(), &ev)
	b.mu.Unlock()
	b.announce(&ev)
}

// share starts a registry with a Store from the fleet's state (its open and half-open
// breakers) and subscribes to the changes the others make.
func (r *Registry) share() {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.StoreTimeout)
	states, err := r.cfg.Store.Load(ctx)
	cancel()
	if err != nil {
		r.storeFailed(fmt.Errorf("breaker: load the shared state: %w", err))
	}
	for _, s := range states {
		r.applyShared(s)
	}
	r.cfg.Store.Subscribe(r.applyShared)
}

// errStoreAway is the answer of transition while the store is taken to be away.
var errStoreAway = errors.New("breaker: the store did not answer lately; the transition waits for its return")

// transition calls the Store, bounded by StoreTimeout. After a call that failed, the store is
// taken to be away until the next retry (storeRetry): the calls that trip or probe in the
// meantime go on with their local decision at once, instead of each waiting out a timeout;
// the retry offers the store what it missed.
func (r *Registry) transition(t Transition) (Shared, bool, error) {
	if now := r.now(); now < r.storeAwayUntil.Load() {
		return Shared{}, false, errStoreAway
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.StoreTimeout)
	s, applied, err := r.cfg.Store.Transition(ctx, t)
	cancel()
	if err != nil {
		r.storeAwayUntil.Store(after(r.now(), r.storeRetry()))
	}
	return s, applied, err
}

// storeFailed tells Config.OnStoreError about err.
func (r *Registry) storeFailed(err error) {
	for _, on := range r.cfg.OnStoreError {
		on(err)
	}
}

// unsynced notes a key whose local transition the store did not take, and arms a retry: the
// store is tried again every storeRetry until it takes the transitions it missed.
func (r *Registry) unsynced(key string) {
	r.syncMu.Lock()
	if r.unsyncedKeys == nil {
		r.unsyncedKeys = map[string]struct{}{}
	}
	r.unsyncedKeys[key] = struct{}{}
	if !r.retryArmed {
		r.retryArmed = true
		time.AfterFunc(r.storeRetry(), func() {
			r.syncMu.Lock()
			r.retryArmed = false
			r.syncMu.Unlock()
			r.storeAwayUntil.Store(0) // ask it again
			r.storeAnswered()
		})
	}
	r.syncMu.Unlock()
}

// storeRetry is how often the transitions a store missed are offered again: four of its
// timeouts, and at least a second, so a store that is away is not asked more often than one
// that answers slowly would be.
func (r *Registry) storeRetry() time.Duration { return max(4*r.cfg.StoreTimeout, time.Second) }

// storeAnswered is called after a store call succeeded: the breakers whose local transitions
// it did not take while it was away are published now (or yield to what the others decided
// meanwhile), on a goroutine of their own, one reconciliation at a time.
func (r *Registry) storeAnswered() {
	r.syncMu.Lock()
	if len(r.unsyncedKeys) == 0 || r.reconciling {
		r.syncMu.Unlock()
		return
	}
	keys := r.unsyncedKeys
	r.unsyncedKeys, r.reconciling = nil, true
	r.syncMu.Unlock()
	go func() {
		for key := range keys {
			r.reconcile(key)
		}
		r.syncMu.Lock()
		r.reconciling = false
		r.syncMu.Unlock()
	}()
}

// reconcile publishes the local state of key's breaker, made while the store was away.
func (r *Registry) reconcile(key string) {
	b := r.locked(key, false)
	if b == nil {
		return
	}
	if b.shared == nil || !b.shared.unsynced {
		b.mu.Unlock()
		return
	}
	now := r.now()
	snap := b.snapshotLocked(now)
	b.mu.Unlock()
	// From and To alike, and ReasonUnknown: published over a store that still holds the epoch
	// this registry last saw, and the store's state adopted where the fleet moved on.
	r.publish(announcement{change: StateChange{Key: key, From: snap.State, To: snap.State, Reason: ReasonUnknown}, snap: snap, b: b})
}
