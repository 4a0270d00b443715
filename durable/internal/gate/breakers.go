package gate

import (
	"cmp"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// refusal is why admit turned an item away: the breaker key and the time until it may probe (0:
// its probes are out, and it waits for their verdict, for recheck at most; recheck 0: probes of
// this gate's own are out, whose end notes the key), as the breaker answered at the time at
// (read after its answer: the clock may have moved since the claim, and a probe time taken from
// the claim's time would come before the breaker's).
type refusal struct {
	key       string
	remaining time.Duration
	recheck   time.Duration
	at        time.Time
}

// admit asks the breakers that guard c (the key of its registration's or the default registry,
// and the key it is parked on) whether it may run now. It returns the half-open keys it took a
// probe of (Ticket.Release gives them back when the attempt has ended), or the refusal.
func (g *Gate) admit(c *store.Claimed, req any) (held []string, r refusal, refused bool) {
	reg, key := g.guardOf(c, req)
	if reg != nil && key != "" {
		if r, refused = g.ask([]*breaker.Registry{reg}, key, &held); refused {
			g.unhold(held)
			return nil, r, true
		}
	}
	if c.ParkedKey != "" && c.ParkedKey != key {
		// Parked on a refusal: ask every registry the scheduler knows for that key.
		if r, refused = g.ask(g.cfg.Breakers, c.ParkedKey, &held); refused {
			g.unhold(held)
			return nil, r, true
		}
	}
	return held, refusal{}, false
}

// ask asks regs about key; while a breaker is half-open it lets through no more items than it
// has free probe slots, counting those it let through that still run (held).
func (g *Gate) ask(regs []*breaker.Registry, key string, held *[]string) (refusal, bool) {
	for _, reg := range regs {
		a := g.admission(reg, key)
		switch a.State {
		case breaker.StateOpen:
			return refusal{key, a.Remaining, a.Recheck, g.cfg.Clock.Now()}, true
		case breaker.StateHalfOpen:
			g.mu.Lock()
			ok := g.probing[key] < a.FreeProbes
			if ok {
				g.probing[key]++
			}
			g.mu.Unlock()
			if !ok {
				return refusal{key, 0, a.Recheck, g.cfg.Clock.Now()}, true
			}
			*held = append(*held, key)
		}
	}
	return refusal{}, false
}

// unhold gives back the probes admit took.
func (g *Gate) unhold(keys []string) {
	if len(keys) == 0 {
		return
	}
	g.mu.Lock()
	for _, k := range keys {
		if g.probing[k]--; g.probing[k] <= 0 {
			delete(g.probing, k)
		}
	}
	g.mu.Unlock()
}

// admission asks reg about key, recovering from a panic of an observer the state change it
// makes calls.
func (g *Gate) admission(reg *breaker.Registry, key string) (a breaker.Admission) {
	defer func() {
		if p := recover(); p != nil {
			g.cfg.Logger.Error("durable: breaker check panicked; dispatching without it", zap.String("instance", g.cfg.Instance),
				zap.String("key", key), zap.String("panic", fmt.Sprint(p)))
			a = breaker.Admission{State: breaker.StateClosed}
		}
	}()
	return reg.Admission(key)
}

// strictest asks every registry the gate knows about key and returns the one that holds it
// back most (an open breaker before a half-open one without free probe slots, before one with
// some, before a closed one) with its answer; a registry that does not know key says closed.
// nil without registries.
func (g *Gate) strictest(key string) (*breaker.Registry, breaker.Admission) {
	rank := func(a breaker.Admission) int {
		switch {
		case a.State == breaker.StateOpen:
			return 3
		case a.State == breaker.StateHalfOpen && a.FreeProbes == 0:
			return 2
		case a.State == breaker.StateHalfOpen:
			return 1
		}
		return 0
	}
	var (
		best *breaker.Registry
		ba   breaker.Admission
	)
	for _, reg := range g.cfg.Breakers {
		if a := g.admission(reg, key); best == nil || rank(a) > rank(ba) {
			best, ba = reg, a
		}
	}
	return best, ba
}

// breakerChanged notes a state change of a breaker of reg: the items parked on a breaker that
// closed are to be freed, those on one that opened again to wait for its next probe.
func (g *Gate) breakerChanged(reg *breaker.Registry, c breaker.StateChange) {
	if c.To == breaker.StateHalfOpen {
		return // the items parked on it come due by their times, and admit lets its probes through
	}
	g.note(c.Key, reg)
}

// Turn frees the items parked on breakers that closed and on keys whose slots freed, and moves
// those parked on breakers that opened again to their next probe. The claim loop calls it
// before each claim.
func (g *Gate) Turn() {
	g.unparkMoved()
	g.wakeLimited()
}

// unparkMoved frees the items parked on breakers that closed, and moves those parked on
// breakers that opened again to their next probe.
func (g *Gate) unparkMoved() {
	g.mu.Lock()
	if len(g.moved) == 0 {
		g.mu.Unlock()
		return
	}
	moved := g.moved
	g.moved = make(map[string]*breaker.Registry, len(moved))
	g.mu.Unlock()
	now := g.cfg.Clock.Now()
	var (
		failed   []string
		firstErr error
	)
	for key, reg := range moved {
		if _, paused := g.pauses.Paused(key, now); paused {
			continue // its items wait for the pause to end: Resume, or its end, frees them
		}
		a := breaker.Admission{State: breaker.StateClosed} // no registry knows the key: an item got through it
		if reg != nil {
			a = g.admission(reg, key)
		}
		ctx, cancel := g.cfg.StoreContext()
		var err error
		switch {
		case a.Refuses():
			// Open: its items wait for its next probe. Waiting on its probes (Remaining 0): for
			// their verdict, which moves them again, or Recheck, when the breaker gives up on
			// them (their holder may have died: no verdict comes).
			wait := a.Remaining + a.Recheck
			_, err = g.cfg.Store.Repark(ctx, key, now.Add(wait), wait/10)
		default:
			// Closed, or half-open with a probe slot free (a probe ended without a verdict):
			// due now, and admit lets no more through than the breaker has slots for.
			_, err = g.cfg.Store.Unpark(ctx, []string{key}, now)
		}
		cancel()
		if err != nil {
			failed = append(failed, key)
			firstErr = cmp.Or(firstErr, err)
		}
	}
	g.cfg.Health.Note("free or move the items parked on a breaker", firstErr)
	if len(failed) > 0 {
		g.mu.Lock()
		for _, k := range failed {
			if _, ok := g.moved[k]; !ok {
				g.moved[k] = moved[k]
			}
		}
		g.mu.Unlock()
	}
}

// Settled follows the completions of batch the store took (results[i] nil): the keys whose
// verdicts the items parked for them missed, the keys an item got through after it was parked
// on them, and the concurrency slots the completions freed.
func (g *Gate) Settled(batch []store.Completion, results []error) {
	for i, c := range batch {
		if results[i] != nil {
			continue
		}
		if c.Verdict {
			g.recheckVerdict(c.ParkedKey)
		}
		if c.Freed != "" {
			g.freeAfterSuccess(c.Freed)
		}
		if c.Held != "" {
			g.limits.Free(c.Held)
		}
	}
}

// recheckVerdict makes sure that the items parked on key to wait for its breaker's verdict are
// not left waiting out Recheck when the breaker decided before their park was written (its
// state change freed or moved the items parked on it then, not these), or its probes ended
// without a verdict: it notes the key when its breakers have decided by now, as a state change
// does, or a probe slot is free.
func (g *Gate) recheckVerdict(key string) {
	reg, a := g.strictest(key)
	if reg == nil || g.deciding(key, a) {
		return // still deciding: its state change, or the end of this gate's probe, will free or move them
	}
	g.note(key, reg)
}

// deciding reports whether the breaker that answered a about key waits on its probes: it
// refuses with no open time left (its probes are out, or being claimed), or every probe slot it
// has free is taken by an item this gate let through, which notes the key when it ends.
func (g *Gate) deciding(key string, a breaker.Admission) bool {
	switch {
	case a.Refuses():
		return a.Remaining == 0
	case a.State == breaker.StateHalfOpen:
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.probing[key] >= a.FreeProbes
	}
	return false
}

// probesEnded notes the keys of probes this gate let through that have ended: one that ended
// with a verdict changed its breaker's state (noted already), but one that ended without (its
// call refused by a rate limit, an error the breaker does not count) freed its slot with no
// state change, and the items parked behind it would otherwise wait out Recheck.
func (g *Gate) probesEnded(keys []string) {
	for _, k := range keys {
		reg, _ := g.strictest(k) // outside the lock: asking a registry may call its listeners
		g.note(k, reg)
	}
}

// freeAfterSuccess notes a key that an item parked on it got through (an item's success after
// it was parked on the key): the items still parked there are freed unless a breaker holds the
// key back. That is how the items parked to wait for a verdict that no longer comes (the
// instance whose probe it was died, and this one's breaker never opened) go as soon as one of
// them has shown the endpoint is back, not a Recheck later.
func (g *Gate) freeAfterSuccess(key string) {
	reg, a := g.strictest(key)
	if reg != nil && a.Refuses() {
		return
	}
	g.note(key, reg)
}

// unparkEnded frees the items parked on keys whose pauses ended, as those of a breaker that
// closed are: due now, unless a breaker holds the key back.
func (g *Gate) unparkEnded(ended []string) {
	if len(ended) == 0 {
		return
	}
	regs := make([]*breaker.Registry, len(ended))
	for i, k := range ended {
		regs[i], _ = g.strictest(k) // outside the lock: asking a registry may call its listeners
	}
	g.mu.Lock()
	if g.running {
		for i, k := range ended {
			g.moved[k] = regs[i]
		}
	}
	g.mu.Unlock()
	signal(g.unpark)
}

// HasBreakers reports whether any registry guards items: without one there is nothing to ask.
func (g *Gate) HasBreakers() bool { return len(g.cfg.Breakers) > 0 }

// GuardOf returns the registry and key of the breaker that guards c's request req, as Admit
// asks it (nil when none does).
func (g *Gate) GuardOf(c *store.Claimed, req any) (*breaker.Registry, string) {
	return g.guardOf(c, req)
}

// Probe asks reg whether a call of key may go through now, as Admit asks an item's breaker: a
// half-open breaker lets through no more calls than it has free probe slots, counting the items
// and calls Probe and Admit let through that still run. ok: it may, and release gives its probe
// slot back once the call has ended; otherwise remaining is the time until the breaker may let
// a probe through (0: its probes are out).
func (g *Gate) Probe(reg *breaker.Registry, key string) (release func(), remaining time.Duration, ok bool) {
	var held []string
	r, refused := g.ask([]*breaker.Registry{reg}, key, &held)
	if refused {
		return nil, r.remaining, false
	}
	return func() {
		g.unhold(held)
		g.probesEnded(held)
	}, 0, true
}

// RefusalOf returns the key of the breaker that refused in err (empty for another refusing
// behavior, whose key means nothing to the breakers) and the time the refusal says to wait.
func RefusalOf(err error) (key string, remaining time.Duration) { return refusalOf(err) }
