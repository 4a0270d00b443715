package breaker

import (
	"context"
	"errors"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/mediator"
)

// Behavior is the circuit breaker behavior: it gates every call through the breaker of the
// request's key (Config.Key) in a Registry. While the breaker is open it fails fast with an
// *OpenError and does not call the rest of the pipeline. A call whose own counted failure opens
// the breaker returns a *TrippedError wrapping its error, so that an outer retry stops at
// once. It is in mediator.StageDefault at behaviors.BreakerOrder, inside retry, so each attempt
// is gated and counted.
//
// While the registry's FailureRate is off, a successful call through a closed breaker takes
// no lock, reads no clock and allocates nothing: it loads the state word before the call and
// the failure count after it. (A keyed breaker is found through a lock-free cache; a key the
// cache does not hold takes the lock of one of the registry's 64 shards. The first success
// after a counted failure takes the breaker's lock once, to end the failure streak.) With
// FailureRate on, the rate window counts every call, successes too, so each call takes the
// breaker's lock and reads the clock once, still allocating nothing. A counted failure takes the lock and reads the clock; a call that finds
// the breaker open or half-open reads the clock.
type Behavior struct {
	reg   *Registry
	fixed *breaker // the request type's breaker, bound at Build when the registry has no Key
}

// New returns a breaker behavior over reg. The registry's Config.Key maps a request to its
// breaker's key; without one, each request type has its own breaker, keyed by
// behaviors.TypeKey and resolved once at Build.
func New(reg *Registry) *Behavior { return &Behavior{reg: reg} }

// Placement implements mediator.PlacedBehavior: Explain shows it as "circuit-breaker", in
// mediator.StageDefault, at behaviors.BreakerOrder (see the table of orders in package behaviors).
func (c *Behavior) Placement() mediator.Placement {
	return mediator.Placement{Name: "circuit-breaker", Stage: mediator.StageDefault, Order: behaviors.BreakerOrder}
}

// Validate reports a missing or misconfigured registry.
func (c *Behavior) Validate() error {
	if c.reg == nil {
		return errors.New("circuit breaker has no registry")
	}
	return c.reg.Validate()
}

// Bind resolves the breaker of a request type once, when the registry has no key function.
// Such breakers are never evicted. It adds the mediator's observers (RequestInfo.Observers)
// to the registry (Registry.Observe).
func (c *Behavior) Bind(info mediator.RequestInfo) (mediator.Behavior, error) {
	if c.reg != nil {
		c.reg.Observe(info.Observers)
	}
	if c.reg == nil || c.reg.cfg.Key != nil {
		return c, nil
	}
	return &Behavior{reg: c.reg, fixed: c.reg.create(behaviors.TypeKey(info.Request), true)}, nil
}

// Handle gates the call.
func (c *Behavior) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	b := c.fixed
	if b == nil {
		return c.handleKeyed(ctx, req, next)
	}
	w := b.word.Load()
	if stateOf(w) != StateClosed {
		return gated(ctx, req, next, b, b.key, w) // bound to a request type: never evicted, never reused
	}
	// Closed path, written out so that it inlines: one atomic load before the call and, on
	// success, one after it; no write unless a failure streak must end. (A breaker bound to a
	// request type is never evicted: no use is marked.)
	resp, err := next(ctx, req)
	if err == nil && b.window == nil && b.failures.Load() == 0 {
		return resp, nil
	}
	return resp, Permit{b: b, word: w}.finish(ctx, err)
}

// handleKeyed is Handle with the registry's key function: find marks the breaker used.
func (c *Behavior) handleKeyed(ctx context.Context, req any, next mediator.Next) (any, error) {
	key := c.reg.KeyOf(req)
	b, w := c.reg.find(key)
	if stateOf(w) != StateClosed {
		return gated(ctx, req, next, b, key, w)
	}
	resp, err := next(ctx, req)
	if err == nil && b.window == nil && b.failures.Load() == 0 {
		return resp, nil
	}
	return resp, Permit{b: b, word: w}.finish(ctx, err)
}

// gated runs a call that found the breaker not closed: refused, or let through as a probe.
func gated(ctx context.Context, req any, next mediator.Next, b *breaker, key string, w uint64) (any, error) {
	p, err := b.allowSlow(key, w)
	if err != nil {
		if co, ok := err.(*OpenError); ok {
			co.req = req // a fresh error per refusal: it names the request refused
		}
		return nil, err
	}
	if p.probe == 0 { // closed meanwhile
		resp, err := next(ctx, req)
		return resp, p.finish(ctx, err)
	}
	return probe(ctx, req, next, p)
}

// probe runs a half-open probe; a probe that panics frees its slot before the panic goes on.
func probe(ctx context.Context, req any, next mediator.Next, p Permit) (resp any, err error) {
	finished := false
	defer func() {
		if !finished {
			p.Release()
		}
	}()
	resp, err = next(ctx, req)
	finished = true
	return resp, p.finish(ctx, err)
}
