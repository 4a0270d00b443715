package gate

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchboard-go/switchboard/behaviors/budget"
	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// redispatch reports whether the attempt c's claim makes is a retry of a call already made:
// the item's second attempt or later, or any attempt of an item the deferral stored after its
// in-process attempts failed (c.Deferred). A last error alone says nothing: a refusal before
// any attempt (a rate limiter, an open breaker, a full bulkhead) sets it, and no call was made.
func redispatch(c *store.Claimed) bool {
	return c.Attempts >= 2 || c.Deferred
}

// charge is what chargeRetry did to the retry budget of an item's request: retried, it
// charged b a retry, which refund gives back when the re-dispatch did not reach the
// dependency after all.
type charge struct {
	b       *budget.Budget
	req     any
	retried bool
	call    bool // a first attempt the gate counts as a call (see Config.Budget) when it starts
}

// started counts the call a first attempt is, if the gate counts it: when it is about to be
// dispatched, so that an attempt held back counts nothing.
func (c charge) started(ctx context.Context) {
	if c.call {
		c.b.Count(ctx, c.req)
	}
}

func (c charge) refund(ctx context.Context) {
	if c.retried {
		c.b.Refund(ctx, c.req)
	}
}

// chargeRetry asks the retry budget of c's request for the retry a re-dispatch of c is, and
// returns the context to dispatch it with (marked counted, so the pipeline counts no call),
// or the budget's refusal. A first attempt is a call, counted by charge.started when nothing
// else counts it (see Config.Budget).
func (g *Gate) chargeRetry(ctx context.Context, c *store.Claimed, req any) (context.Context, charge, *budget.SpentError, bool) {
	if g.cfg.Budget == nil {
		return ctx, charge{}, nil, false
	}
	b, failOver, countCalls := g.cfg.Budget(c.Name, req)
	if b == nil {
		return ctx, charge{}, nil, failOver
	}
	if !redispatch(c) {
		return ctx, charge{b: b, req: req, call: countCalls}, nil, failOver
	}
	if err := b.Retry(ctx, req); err != nil {
		if se, ok := errors.AsType[*budget.SpentError](err); ok {
			return ctx, charge{}, se, failOver
		}
	}
	return b.MarkCounted(ctx, req), charge{b: b, req: req, retried: true}, nil, failOver
}

// overBudget is the completion of c when its retry budget refused its re-dispatch: parked until
// the budget's window has room, or dead when the registration says so.
func (g *Gate) overBudget(comp store.Completion, c *store.Claimed, se *budget.SpentError, failOver bool) store.Completion {
	if failOver {
		comp.State, comp.ParkedKey, comp.Cause = store.StateDead, "", store.DeadOverBudget
		comp.Error = fmt.Sprintf("retry budget %q exceeded (%d retries of %d calls in %s); last error: %s",
			se.Key, se.Retries, se.Calls, se.Window, c.LastError)
		return comp
	}
	return g.park(comp, c, "", se.RetryAfter(), 0, comp.EndedAt)
}
