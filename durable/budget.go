package durable

import (
	"fmt"

	"github.com/switchboard-go/switchboard/behaviors/budget"
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
