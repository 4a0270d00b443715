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
// When b is the registration's own and no behavior of the pipeline holds it (no retry
// behavior with b as its retry.Config.Budget), the scheduler counts the first attempt of each
// item as a call itself, so that b's ratio has calls to apply to.
//
// A re-dispatch the budget allowed that does not reach the dependency after all gets its
// retry back (budget.Budget.Refund): one a concurrency limit holds back, one the pipeline
// refuses (an open breaker, a rate limiter: a behaviors.Refusal), one a shutdown releases
// before it started.
func WithRetryBudget(b *budget.Budget, over OverBudget) RegisterOption {
	return func(r *registration) { r.budget, r.over = b, over }
}

// budgetFor returns the budget the re-dispatches of req (registered as name) are charged to,
// what to do over it, and whether the scheduler counts the first attempts of req's items as
// calls itself: when the budget is the registration's own (WithRetryBudget) and no behavior
// of req's pipeline holds it (budget.SharedBy), nothing else counts them, and the budget
// would allow its floor alone.
// It is decided once per request name: the registration and the pipeline do not change once
// the scheduler runs, and the pipeline's behaviors need not be looked through for every item.
func (s *scheduler) budgetFor(name string, req any) (b *budget.Budget, over OverBudget, countCalls bool) {
	if v, ok := s.budgets.Load(name); ok {
		c := v.(budgetChoice)
		return c.b, c.over, c.countCalls
	}
	b, over, countCalls = s.chooseBudget(name, req)
	s.budgets.Store(name, budgetChoice{b, over, countCalls})
	return b, over, countCalls
}

// budgetChoice is what budgetFor decided for a request name.
type budgetChoice struct {
	b          *budget.Budget
	over       OverBudget
	countCalls bool
}

func (s *scheduler) chooseBudget(name string, req any) (b *budget.Budget, over OverBudget, countCalls bool) {
	reg := s.q.reg.lookupName(name)
	if reg != nil {
		if reg.budget != nil {
			return reg.budget, reg.over, !budget.SharedBy(reg.budget, nil, s.pipelineOf(req))
		}
		over = reg.over
	}
	if h, ok := s.policySource(req).(budget.Holder); ok {
		return h.RetryBudget(), over, false
	}
	return nil, over, false
}

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
	call    bool // a first attempt the scheduler counts as a call (see budgetFor) when it starts
}

// started counts the call a first attempt is, if the scheduler counts it: when it is about
// to be dispatched, so that an attempt held back counts nothing.
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
// else counts it (see budgetFor).
func (s *scheduler) chargeRetry(ctx context.Context, c *store.Claimed, req any) (context.Context, charge, *budget.SpentError, OverBudget) {
	b, over, countCalls := s.budgetFor(c.Name, req)
	if b == nil {
		return ctx, charge{}, nil, over
	}
	if !redispatch(c) {
		return ctx, charge{b: b, req: req, call: countCalls}, nil, over
	}
	if err := b.Retry(ctx, req); err != nil {
		if se, ok := errors.AsType[*budget.SpentError](err); ok {
			return ctx, charge{}, se, over
		}
	}
	return b.MarkCounted(ctx, req), charge{b: b, req: req, retried: true}, nil, over
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
