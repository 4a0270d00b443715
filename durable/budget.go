package durable

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchboard-go/switchboard/behaviors/budget"
	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// OverBudget is what the scheduler does with a re-dispatch of an item that the item's retry
// budget refuses (see WithRetryBudget).
type OverBudget uint8

const (
	// ParkOverBudget parks the item: it is not attempted, no attempt is charged, and it is due
	// again when the budget's window has room (the refusal's RetryAfter), as an item an open
	// breaker refuses waits. The default: an outage ends, and the work is still worth doing.
	ParkOverBudget OverBudget = iota
	// FailOverBudget ends the item as a dead letter whose error names the budget: for work
	// that is worthless unless done soon.
	FailOverBudget
)

// String returns "park" or "fail".
func (o OverBudget) String() string {
	switch o {
	case ParkOverBudget:
		return "park"
	case FailOverBudget:
		return "fail"
	}
	return fmt.Sprintf("OverBudget(%d)", uint8(o))
}

// WithRetryBudget charges the re-dispatches of the registration's items to b, and says what
// to do with one b refuses. A re-dispatch is every attempt of an item after its first, and
// every attempt of an item the durable deferral stored after the in-process attempts failed:
// each is a retry of a call already made, so before it the scheduler asks b (budget.Budget.
// Retry) and, when b allows it, dispatches it marked counted (budget.Budget.MarkCounted), so
// the pipeline's retry behavior does not count it as a new call. A first attempt of an item
// enqueued directly is a call, and the pipeline's retry behavior counts it, even when a
// refusal (a rate limiter, an open breaker) put it off before it and left its last error: the
// item records that the deferral stored it, and only that makes its first attempt a retry. So
// in-process retries and durable retries draw on one allowance.
//
// b nil: the budget of the retry behavior of the request type's pipeline (retry.Config.Budget),
// which is what items have without this option too (with the default ParkOverBudget). Without
// either, re-dispatches are bounded by the retry policy alone.
//
// A re-dispatch the budget allowed that the pipeline then refuses (an open breaker) keeps the
// retry it was charged: the budget errs on the side of fewer retries.
func WithRetryBudget(b *budget.Budget, over OverBudget) RegisterOption {
	return func(r *registration) { r.budget, r.over = b, over }
}

// budgetFor returns the budget the re-dispatches of req (registered as name) are charged to,
// and what to do over it.
func (s *scheduler) budgetFor(name string, req any) (*budget.Budget, OverBudget) {
	reg := s.q.reg.lookupName(name)
	var over OverBudget
	if reg != nil {
		if reg.budget != nil {
			return reg.budget, reg.over
		}
		over = reg.over
	}
	if h, ok := s.policySource(req).(budget.Holder); ok {
		return h.RetryBudget(), over
	}
	return nil, over
}

// redispatch reports whether the attempt c's claim makes is a retry of a call already made:
// the item's second attempt or later, or any attempt of an item the deferral stored after its
// in-process attempts failed (c.Deferred). A last error alone says nothing: a refusal before
// any attempt (a rate limiter, an open breaker, a full bulkhead) sets it, and no call was made.
func redispatch(c *store.Claimed) bool {
	return c.Attempts >= 2 || c.Deferred
}

// chargeRetry asks the retry budget of c's request for the retry a re-dispatch of c is, and
// returns the context to dispatch it with (marked counted, so the pipeline counts no call),
// or the budget's refusal.
func (s *scheduler) chargeRetry(ctx context.Context, c *store.Claimed, req any) (context.Context, *budget.SpentError, OverBudget) {
	b, over := s.budgetFor(c.Name, req)
	if b == nil || !redispatch(c) {
		return ctx, nil, over
	}
	if err := b.Retry(ctx, req); err != nil {
		if se, ok := errors.AsType[*budget.SpentError](err); ok {
			return ctx, se, over
		}
	}
	return b.MarkCounted(ctx, req), nil, over
}

// overBudget is the completion of c when its retry budget refused its re-dispatch.
func (s *scheduler) overBudget(comp store.Completion, c *store.Claimed, se *budget.SpentError, over OverBudget) store.Completion {
	if over == FailOverBudget {
		comp.State, comp.ParkedKey = store.StateDead, ""
		comp.Error = fmt.Sprintf("retry budget %q exceeded (%d retries of %d calls in %s); last error: %s",
			se.Key, se.Retries, se.Calls, se.Window, c.LastError)
		return comp
	}
	return s.park(comp, c, "", se.RetryAfter())
}
