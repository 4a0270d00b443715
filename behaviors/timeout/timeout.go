package timeout

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/mediator"
)

// ErrExceeded reports a call that did not finish within the timeout behavior's duration. Like
// os.ErrDeadlineExceeded it reports Timeout() == true, so behaviors.IsTimeout recognises it
// even where no *ExceededError wraps it.
var ErrExceeded error = exceeded{}

type exceeded struct{}

func (exceeded) Error() string { return "timeout: exceeded" }
func (exceeded) Timeout() bool { return true }

// ExceededError reports a call that ran past the timeout behavior's duration. It matches
// ErrExceeded, unwraps to the error the handler returned (usually context.DeadlineExceeded)
// and, like net.Error, reports Timeout() == true, which behaviors.IsTimeout reads.
type ExceededError struct {
	// Duration is the timeout that ran out.
	Duration time.Duration
	// Err is the error the call returned after its deadline.
	Err error
}

// Error names the timeout and the call's error.
func (e *ExceededError) Error() string {
	return fmt.Sprintf("timeout: exceeded after %s: %v", e.Duration, e.Err)
}

// Is reports whether target is ErrExceeded.
func (e *ExceededError) Is(target error) bool { return target == ErrExceeded }

// Unwrap returns the call's own error.
func (e *ExceededError) Unwrap() error { return e.Err }

// Timeout reports true.
func (e *ExceededError) Timeout() bool { return true }

// Config configures New.
type Config struct {
	// Duration is the deadline the behavior puts on the rest of the pipeline. Required: no
	// duration suits every dependency, so the zero Duration is an error from Validate.
	Duration time.Duration
	// Total makes the timeout a budget for all attempts of a call together, retries and waits
	// included: the behavior sits just outside retry (at behaviors.RetryOrder - 1). Default
	// false: it sits inside retry (at behaviors.TimeoutOrder) and bounds each attempt, so that
	// one hung attempt does not use up the time of the others.
	Total bool
}

// Validate reports a Duration that is not positive.
func (c Config) Validate() error {
	if c.Duration <= 0 {
		return fmt.Errorf("timeout Duration %s is not positive", c.Duration)
	}
	return nil
}

// Behavior is the timeout behavior: it puts a deadline on the context of the rest of the
// pipeline. A call that fails after that deadline (and not because the caller's own context
// ended) fails with an *ExceededError, which a breaker counts and which retry retries only
// when the policy's RetryOnTimeout is On. Handlers must honour their context: the behavior
// does not abandon a handler that ignores it.
//
// By default (at behaviors.TimeoutOrder, inside retry) it bounds each attempt; with
// Config.Total (at behaviors.RetryOrder - 1) it bounds the whole call, retries and waits
// included.
type Behavior struct {
	cfg   Config
	order int
}

// New returns a timeout behavior configured by cfg. It does not validate cfg: Validate does,
// and mediator's Build calls it, so that Build reports every invalid behavior at once.
func New(cfg Config) *Behavior {
	order := behaviors.TimeoutOrder
	if cfg.Total {
		order = behaviors.RetryOrder - 1
	}
	return &Behavior{cfg: cfg, order: order}
}

// Placement implements mediator.PlacedBehavior: Explain shows it as "timeout", in
// mediator.StageDefault, at behaviors.TimeoutOrder (inside retry: each attempt has the
// duration), or just outside retry when Config.Total is set (the whole call has it); see the
// table of orders in package behaviors.
func (t *Behavior) Placement() mediator.Placement {
	return mediator.Placement{Name: "timeout", Stage: mediator.StageDefault, Order: t.order}
}

// Validate reports what Config.Validate reports.
func (t *Behavior) Validate() error { return t.cfg.Validate() }

// Handle calls next under the deadline.
func (t *Behavior) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	tctx, cancel := context.WithTimeout(ctx, t.cfg.Duration)
	defer cancel()
	resp, err := next(tctx, req)
	if err != nil && ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded) {
		err = &ExceededError{Duration: t.cfg.Duration, Err: err}
	}
	return resp, err
}
