package behaviors

import (
	"context"
	"errors"
	"time"

	"github.com/switchboard-go/switchboard/mediator"
)

// Timeout is a behavior that puts a deadline on the context of the rest of the pipeline. A
// call that fails after that deadline (and not because the caller's own context ended) fails
// with a *TimeoutError, which a breaker counts and which Retry retries only when the policy's
// RetryOnTimeout is On. Handlers must honour their context: Timeout does not abandon a
// handler that ignores it.
//
// At its default order (TimeoutOrder, inside Retry) it bounds each attempt; registered with
// an order below RetryOrder it bounds the whole call, retries and waits included.
type Timeout struct {
	d     time.Duration
	order int
}

// NewTimeout returns a Timeout behavior of duration d at TimeoutOrder.
func NewTimeout(d time.Duration) *Timeout { return &Timeout{d: d, order: TimeoutOrder} }

// NewTotalTimeout returns a Timeout behavior of duration d just outside Retry (at
// RetryOrder - 1): a budget for all attempts of a call together.
func NewTotalTimeout(d time.Duration) *Timeout { return &Timeout{d: d, order: RetryOrder - 1} }

// Name returns "timeout".
func (t *Timeout) Name() string { return "timeout" }

// Stage returns mediator.StageDefault.
func (t *Timeout) Stage() mediator.Stage { return mediator.StageDefault }

// Order returns the behavior's order.
func (t *Timeout) Order() int { return t.order }

// Validate reports a duration that is not positive.
func (t *Timeout) Validate() error {
	if t.d <= 0 {
		return errors.New("timeout must be positive")
	}
	return nil
}

// Handle calls next under the deadline.
func (t *Timeout) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	tctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	resp, err := next(tctx, req)
	if err != nil && ctx.Err() == nil && tctx.Err() == context.DeadlineExceeded {
		err = &TimeoutError{Duration: t.d, Err: err}
	}
	return resp, err
}
