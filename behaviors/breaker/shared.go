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

	// The claim of the probes from epoch (see claim). Each field is cleared when the epoch
	// moves on (moveTo).
	//
	// claim is the token of this registry's claim: made for the first claim from epoch, and
	// sent again by the claims that follow from the same epoch, so that whichever of them
	// committed (at most one can) is known for this registry's.
	claim string
	// sent: a claim with the token reached the store, and the store did not say what became
	// of it (it timed out): it may have committed, then or later. The registry looks the
	// breaker up in the store (lookUp) before it probes on its own.
	sent bool
	// probed is the state word of the half-open period this registry began on its own while
	// a claim of its may have committed: the claim, if it did, is used by that period's
	// probes. 0: none.
	probed uint64
	// alone: the store did not answer the registry's look-up after a claim, or its verdict
	// over a claim of its own (see settle): the registry goes on on its own until the store
	// answers.
	alone bool
	// mine: the stored state at epoch is this registry's claim (its probes decided here
	// unless the breaker is still in the half-open period of the claim).
	mine bool
	// told is this registry's claim, told back by the store's Subscribe while the call
	// making it waited for the store's answer; nil otherwise.
	told *Shared
	// looking: a look-up of the breaker in the store is under way (see lookUp); settling: a
	// call publishes its verdict over a claim of its own (see settle). No call claims
	// meanwhile. Not cleared by moveTo.
	looking, settling bool
}

// moveTo makes epoch the breaker's known stored epoch. A new epoch ends what this registry
// knew of its claim of the previous one's probes: a claim from an epoch the store left can no
// longer commit.
func (st *sharedState) moveTo(epoch int64) {
	if epoch == st.epoch {
		return
	}
	st.epoch = epoch
	st.claim, st.sent, st.probed, st.alone, st.mine = "", false, 0, false, false
}

// defaultInstance names a registry to its Store: host, process id and a random suffix.
func defaultInstance() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// newClaimToken returns the token of a claim of the probes: random, so that no other claim,
// of this registry, of another one or of a process started under the same instance name, has
// it.
func newClaimToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
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
// time has passed (after refreshLocked, an open breaker's is also when the probes' holder
// elsewhere let its claim run out).
func (b *breaker) claimableLocked(now int64) bool {
	if b.reg.cfg.Store == nil || b.shared != nil && (b.shared.claiming || b.shared.looking || b.shared.settling) {
		return false
	}
	return stateOf(b.word.Load()) == StateOpen && now >= b.openUntil.Load()
}

// settleNeededLocked reports whether a claim of the probes of this registry's may hold them in
// the store while its probes have decided here and the verdict is not yet published: the
// verdict goes first, or the registry's next claim would find its own claim in the way, and
// the probes it sent on its own meanwhile would come twice in the store's half-open period.
func (b *breaker) settleNeededLocked() bool {
	st := b.shared
	return st != nil && st.unsynced && (st.mine || st.sent) && !st.alone
}

// claim asks the Store for b's probes on behalf of the call of key, b's lock held (it is
// released). One call claims at a time; the others are refused meanwhile, as by a half-open
// breaker whose probes are out. The winner's breaker goes half-open here and lets the call
// through as a probe; a loser adopts what the store says (another instance's probes, or a
// state decided since).
//
// A claim is sent with a token (see Transition.Claim): when the store does not answer in
// time, the claim may have committed all the same, or may yet. The call is then refused, and
// the registry looks the breaker up in the store (lookUp): another instance's claim is
// followed, its own is used once (the next call probes under it), and a store that does not
// answer that either is taken to be away: the next call probes on its own, and a claim of its
// own the registry learns of later is the one that probe used, never another half-open
// period. A claim that never reached the store (it is taken to be away) probes on its own at
// once.
func (b *breaker) claim(key string, now int64, ev *events) (Permit, error) {
	st := b.sharedLocked()
	r := b.reg
	if b.settleNeededLocked() {
		if p, err, done := b.settle(key, now, ev); done {
			return p, err
		}
		st = b.sharedLocked()
	}
	st.claiming, st.told = true, nil
	if st.claim == "" {
		st.claim = newClaimToken()
	}
	from, token := st.epoch, st.claim
	b.mu.Unlock()
	b.announce(ev)
	s, applied, err := r.transition(Transition{Key: key, From: from, To: StateHalfOpen,
		ProbeFor: r.cfg.ProbeTimeout, Owner: r.cfg.Instance, Claim: token, Reason: ReasonOpenDurationElapsed}, false)
	away := errors.Is(err, errStoreAway)
	if err != nil && !away {
		r.storeFailed(fmt.Errorf("breaker: claim the probes of %q: %w", key, err))
	}
	var ev2 events
	lookUp := false
	b.mu.Lock()
	st.claiming = false
	if b.evictedNow() || b.key != key {
		b.mu.Unlock()
		return r.Gate(key)
	}
	st = b.sharedLocked() // a new one if the breaker was evicted and made key's again meanwhile
	told := st.told
	st.told = nil
	if err != nil && told != nil {
		// The store told this registry of its claim (Subscribe) before it answered the call:
		// the claim was made.
		s, applied, err = *told, true, nil
	}
	if err != nil && !away && st.claim == token {
		st.sent = true // it may have committed, or may yet
	}
	now = r.now()
	w := b.word.Load()
	switch {
	case err != nil:
		if st.epoch != from || stateOf(w) != StateOpen || now < b.openUntil.Load() {
			break // learned meanwhile of a later state, or moved here (a trip by hand): as it is now
		}
		if st.sent && (!away || !st.alone) {
			// A claim of this registry's may hold the probes, or another's: the store is asked
			// what it holds before this registry probes on its own.
			st.looking, lookUp = true, true
			break
		}
		// The store is away: this instance probes on its own, and the retry publishes what it
		// finds once the store answers (not offered again now).
		st.unsynced = true
		defer r.unsynced(key)
		ev2.applied = true
		b.setLocked(StateHalfOpen, ReasonOpenDurationElapsed, now, &ev2)
		st.probed = b.word.Load()
	case applied:
		defer r.storeAnswered()
		if s.Epoch <= st.epoch {
			break // the breaker learned of a later state meanwhile
		}
		st.moveTo(s.Epoch)
		st.mine = true
		if stateOf(w) != StateOpen {
			// Moved here meanwhile (a trip or reset by hand): published over the claim.
			st.unsynced, ev2.publish = true, true
			break
		}
		st.unsynced = false
		ev2.applied = true // the store has it
		b.setLocked(StateHalfOpen, ReasonOpenDurationElapsed, now, &ev2)
	case s.Epoch == 0:
		// The store holds nothing of the key (a trip it did not take while it was away): this
		// instance probes on its own, and the retry publishes what it finds.
		st.unsynced = true
		defer r.unsynced(key)
		ev2.applied = true
		if stateOf(w) == StateOpen {
			b.setLocked(StateHalfOpen, ReasonOpenDurationElapsed, now, &ev2)
		}
	case s.Epoch == st.epoch:
		// Nobody moved it, but the store's clock says its time has not come (the clocks
		// differ): take the store's times, so the next call does not ask again at once.
		b.resyncLocked(s, now)
	default:
		ev2.applied = true
		b.adoptLocked(s, now, &ev2) // another's claim, a later state, or this registry's claim made before
	}
	p, perr := b.admitLocked(now, &ev2)
	b.mu.Unlock()
	b.announce(&ev2)
	if ev2.publish {
		r.republish(key)
	}
	if lookUp {
		go r.lookUp(b, key)
	}
	if perr != nil {
		perr = r.refused(key, perr)
	}
	return p, perr
}

// lookUp reads the stored state of key's breaker b after a claim of the probes the store did
// not answer (see claim), bounded by StoreTimeout, and adopts it: another instance's claim,
// this registry's own (used once), or a later state. A store that answers but holds nothing
// newer took no claim yet: it is taken to be back, and the next call claims again. A store
// that does not answer leaves the registry on its own: the next call probes locally.
func (r *Registry) lookUp(b *breaker, key string) {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.StoreTimeout)
	states, err := r.cfg.Store.Load(ctx)
	cancel()
	ev := events{applied: true}
	b.mu.Lock()
	if b.evictedNow() || b.key != key {
		b.mu.Unlock() // its key's state went with it
		return
	}
	st := b.sharedLocked()
	st.looking = false
	if err != nil {
		st.alone = true
		b.mu.Unlock()
		r.storeAwayUntil.Store(after(r.now(), r.storeRetry()))
		r.storeFailed(fmt.Errorf("breaker: look up the probes of %q after a claim without an answer: %w", key, err))
		return
	}
	st.alone = false
	for _, s := range states {
		if s.Key == key {
			b.adoptLocked(s, r.now(), &ev)
		}
	}
	b.mu.Unlock()
	b.announce(&ev)
	r.storeAwayUntil.Store(0) // it answers
	if ev.publish {
		r.republish(key)
	}
	r.storeAnswered()
}

// settle publishes b's state over a claim of this registry's that may hold the probes in the
// store (see settleNeededLocked), before the call of key claims them again; b's lock is held,
// and held again when it returns. It reports done, with the call's answer, when the call is
// not to claim after all (the store moved on to a state that refuses it, or b is no longer
// key's breaker). A store that does not answer is not asked again for it: the registry goes on
// on its own.
func (b *breaker) settle(key string, now int64, ev *events) (p Permit, err error, done bool) {
	r := b.reg
	snap := b.snapshotLocked(now)
	b.shared.settling = true
	b.mu.Unlock()
	b.announce(ev)
	// From and To alike, and ReasonUnknown, as a reconciliation: the store's state wins where
	// the fleet moved on. Asked even while the store is taken to be away: the claim in the way
	// is this registry's, and the store is asked once per verdict.
	r.publish(announcement{change: StateChange{Key: key, From: snap.State, To: snap.State, Reason: ReasonUnknown}, snap: snap, b: b}, true)
	b.mu.Lock()
	b.sharedLocked().settling = false
	if b.evictedNow() || b.key != key {
		b.mu.Unlock()
		p, err = r.Gate(key)
		return p, err, true
	}
	if b.settleNeededLocked() {
		b.shared.alone = true // not answered: the registry goes on on its own
	}
	now = r.now()
	var ev2 events
	if b.refreshLocked(now, &ev2); b.claimableLocked(now) {
		*ev = ev2
		return Permit{}, nil, false
	}
	p, err = b.admitLocked(now, &ev2)
	b.mu.Unlock()
	b.announce(&ev2)
	if err != nil {
		err = r.refused(key, err)
	}
	return p, err, true
}

// ownClaimLocked takes s, the stored state of b's key, which is this registry's own claim of
// the probes learned after the call that made it stopped waiting for it: the claim is used by
// the probes this registry let through on its own meanwhile, or by the next call when none
// went, and is never taken for another half-open period. When the probes decided here
// meanwhile, their verdict is to be published over the claim (ev.publish).
func (b *breaker) ownClaimLocked(s Shared, now int64, ev *events) {
	st := b.shared
	probed := st.probed
	st.moveTo(s.Epoch)
	st.mine = true
	w := b.word.Load()
	switch {
	case probed != 0 && w == probed:
		st.unsynced = false // its probes are under way here: the store holds what this registry does
	case probed == 0 && stateOf(w) == StateOpen && now >= b.openUntil.Load():
		// Not used: the next call probes under it.
		st.unsynced = false
		applied := ev.applied
		ev.applied = true
		b.setLocked(StateHalfOpen, ReasonOpenDurationElapsed, now, ev)
		ev.applied = applied
	default:
		// Its probes decided here (or the operator did): the store is to take this state.
		st.unsynced, ev.publish = true, true
	}
}

// ownClaimOfLocked reports whether s, a stored state newer than b's, is this registry's claim.
func (b *breaker) ownClaimOfLocked(s Shared) bool {
	st := b.shared
	return st != nil && s.State == StateHalfOpen && st.claim != "" && s.ProbeClaim == st.claim && s.Epoch > st.epoch
}

// adoptLocked makes s, the stored state of b's key, b's state, unless b already knows a later
// epoch. Its changes are queued on ev (applied: the store is not told).
func (b *breaker) adoptLocked(s Shared, now int64, ev *events) {
	st := b.sharedLocked()
	if s.Epoch <= st.epoch {
		return // known already, or older than what this registry made
	}
	if b.ownClaimOfLocked(s) {
		if st.claiming {
			st.told = &s // the call claiming takes it
			return
		}
		b.ownClaimLocked(s, now, ev)
		return
	}
	st.moveTo(s.Epoch)
	st.unsynced = false
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
		// Another claim than this registry's (one of another instance, or one of a process
		// before this one under the same name): its holder's probes decide. A half-open period
		// of this registry's own ends without a change of state: the outcomes of its probes
		// count no more.
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
	case s.State == StateHalfOpen && stateOf(b.word.Load()) == StateOpen && !b.shared.mine:
		// A claim of another instance's that the store's clock says has not run out: open
		// until it does.
		b.openUntil.Store(translate(s.ProbeUntil))
	}
}

// publish tells the Store about a local transition, announced in order by deliver: it applies
// from the epoch last known, or yields to what another instance decided first (adopted). A
// manual reset or trip is the operator's word and is made over a state decided since. Where
// the store holds a claim of this registry's own, the transition is made over it. force asks
// the store even while it is taken to be away.
func (r *Registry) publish(a announcement, force bool) {
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
		s, applied, err := r.transition(t, force)
		var ev events
		ev.applied = true
		b.mu.Lock()
		if b.evictedNow() || b.key != key {
			b.mu.Unlock()
			return
		}
		st = b.sharedLocked()
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
			st.moveTo(s.Epoch)
			st.unsynced = false
			b.mu.Unlock()
			r.storeAnswered()
			return
		case b.ownClaimOfLocked(s) && !st.claiming:
			// A claim of this registry's that committed after its call gave up: this state
			// is made over it.
			b.ownClaimLocked(s, r.now(), &ev)
			t.From = st.epoch
			b.mu.Unlock()
			b.announce(&ev)
			if ev.publish && try < 2 {
				continue
			}
			return
		case try == 0 && a.change.Reason != ReasonUnknown && (manual || s.State == a.change.From):
			// The store holds the state this one started from under a later epoch (one this
			// registry had not seen, as after a restart), or the operator's word: again from
			// that epoch.
			st.moveTo(s.Epoch)
			t.From = s.Epoch
			b.mu.Unlock()
			continue
		default:
			b.adoptLocked(s, r.now(), &ev) // another instance decided first
			b.mu.Unlock()
			b.announce(&ev)
			if ev.publish {
				r.republish(key)
			}
			return
		}
	}
}

// republish offers the store the state of key's breaker again, soon, on the registry's
// reconciliation (after this registry learned that a claim of its own holds the probes there,
// while its probes have decided here).
func (r *Registry) republish(key string) {
	r.unsynced(key)
	r.storeAnswered()
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
// the retry offers the store what it missed. force calls it even then (see settle).
func (r *Registry) transition(t Transition, force bool) (Shared, bool, error) {
	if now := r.now(); !force && now < r.storeAwayUntil.Load() {
		return Shared{}, false, errStoreAway
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.StoreTimeout)
	s, applied, err := r.cfg.Store.Transition(ctx, t)
	cancel()
	if err != nil && t.Claim == "" {
		// (A claim without an answer is followed by a look-up, which decides: a store slow to
		// take a claim, held up on the breaker's row, may answer all else at once.)
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
	r.publish(announcement{change: StateChange{Key: key, From: snap.State, To: snap.State, Reason: ReasonUnknown}, snap: snap, b: b}, false)
}
