package retry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/budget"
	"github.com/switchboard-go/switchboard/behaviors/internal/classify"
	"github.com/switchboard-go/switchboard/mediator"
)

var (
	attemptKey  = mediator.NewContextKey[int]("retry.attempt")
	overrideKey = mediator.NewContextKey[Policy]("retry.override")
)

// AttemptNumber returns the number of the current attempt of the innermost retrying call on ctx:
// 1 for the first attempt, and when no retry behavior is involved. The first attempt sets
// nothing on the context, so a request sent from inside a handler on its first attempt sees
// the attempt of the enclosing call.
//
// It counts in-process attempts only: under the durable queue's scheduler each dispatch is
// one attempt (AttemptNumber is 1), and the durable attempt number is durable.FromContext's
// Dispatch.Attempt.
func AttemptNumber(ctx context.Context) int { return attemptKey.GetOr(ctx, 1) }

// WithOverride returns a copy of ctx on which the dispatch of req is retried under p
// merged over every other layer: the per-request override. Unset fields of p keep the lower
// layers' values. The override binds to req (see mediator.ContextKey.WithFor): the requests req's
// handler sends with the same context run under their own policies. A later override for the
// same request is merged over an earlier one. (To make a dispatch exactly one attempt, mark it
// mediator.SingleAttempt.)
func WithOverride(ctx context.Context, req any, p Policy) context.Context {
	if prev, ok := overrideKey.GetFor(ctx, req); ok {
		p = prev.Merge(p)
	}
	return overrideKey.WithFor(ctx, req, p)
}

// Override returns the per-request override set on ctx for req by WithOverride.
func Override(ctx context.Context, req any) (Policy, bool) {
	return overrideKey.GetFor(ctx, req)
}

// Event describes one retry about to happen.
type Event struct {
	// Request is the request being retried.
	Request any
	// Attempt is the number of the attempt that failed (1 for the first).
	Attempt int
	// Delay is how long the behavior waits before the next attempt.
	Delay time.Duration
	// Err is the failed attempt's error.
	Err error
}

// Config configures New. The zero Config retries nothing until a layer sets
// MaxAttempts above 1.
type Config struct {
	// Policy is the behavior's layer, merged over DefaultPolicy. Zero: the defaults.
	Policy Policy
	// Key maps a request to the key of its per-key layer (a source, an endpoint). nil: no
	// per-key layer.
	Key behaviors.KeyFunc
	// KeyPolicy returns the per-key layer of key; ok false means none. nil: no per-key layer.
	KeyPolicy func(key string) (p Policy, ok bool)
	// OnRetry are the observers of this behavior alone, called before each wait, with the
	// failed attempt, the delay and the error. They run in the order listed, on the caller's
	// goroutine (see Hooks in package behaviors), before the mediator's observers (Observer).
	// Observers of every behavior (logging, metrics, tracing) attach once, to the mediator,
	// with mediator.Mediator.Observe. Empty: nothing is called unless the mediator has
	// observers, and no Event is made.
	OnRetry []func(ctx context.Context, e Event)
	// BackOff builds the delays of one call from its merged policy. It is called once per
	// call, on the first failure that is retried; never on success. nil: the policy's own
	// NewBackOff. Return backoff.Stop from NextBackOff to end the retries early.
	BackOff func(p Policy) backoff.BackOff
	// Clock is the time source of the waits. nil: behaviors.SystemClock.
	Clock behaviors.Clock
	// Budget is the retry budget the behavior's retries draw on: it counts one call per Send
	// once its first attempt returns, unless that attempt was refused (behaviors.Refused: an
	// open breaker, a rate limit, a full bulkhead let no call reach the dependency); when
	// hedging inside shares the budget, as the call starts, since its hedges draw on it while
	// it runs. It asks
	// the budget before each retry, before waiting for it. A retry the caller cancels during
	// the wait, or whose attempt is refused, is given back (budget.Budget.Refund): the
	// budget counts the retries that reached the dependency. A retry the budget refuses is
	// not made: the call ends with an *ExhaustedError whose Budget
	// is the budget's *budget.SpentError, unwrapping to the last failure as ever. The durable
	// queue's scheduler finds the budget here and charges its re-dispatches to it too (see
	// durable.WithRetryBudget). nil: retries are bounded by the policy alone.
	Budget *budget.Budget
	// Rand returns the jitter draws of the policy's delays: uniform numbers in [0, 1), see
	// Policy.Delay. It is called only when Jitter is On, and only when BackOff is nil. nil:
	// math/rand/v2's Float64; set it to make jittered delays predictable in tests.
	Rand func() float64
}

// Behavior is the retry behavior: it calls the rest of the pipeline again when it fails with an
// error its merged policy retries, waiting between attempts as the policy says. On success it
// allocates nothing and reads no clock: no policy merge, no backoff, no timer. It is in
// mediator.StageDefault at
// behaviors.RetryOrder.
//
// Retries require idempotent handlers: a retried command that failed after its effect took
// place repeats the effect.
type Behavior struct {
	cfg   Config
	base  Policy
	clock behaviors.Clock
	rand  func() float64
	mark  bool // another behavior of the pipeline shares the budget: mark calls counted (budget.Budget.MarkCounted)
}

// New returns a retry behavior configured by cfg. It does not validate cfg: Validate does, and
// mediator's Build calls it, so that Build reports every invalid behavior at once.
func New(cfg Config) *Behavior {
	cfg.OnRetry = slices.Clone(cfg.OnRetry)
	b := &Behavior{cfg: cfg, base: DefaultPolicy.Merge(cfg.Policy), clock: cfg.Clock, rand: cfg.Rand}
	if b.clock == nil {
		b.clock = behaviors.SystemClock
	}
	if b.rand == nil {
		b.rand = rand.Float64
	}
	return b
}

// Placement implements mediator.PlacedBehavior: Explain shows it as "retry", in
// mediator.StageDefault, at behaviors.RetryOrder (see the table of orders in package behaviors).
func (r *Behavior) Placement() mediator.Placement {
	return mediator.Placement{Name: "retry", Stage: mediator.StageDefault, Order: behaviors.RetryOrder}
}

// Validate reports what Config.Validate reports.
func (r *Behavior) Validate() error { return r.cfg.Validate() }

// Validate reports an invalid policy, a per-key layer that could never apply (KeyPolicy
// without Key), and an invalid budget configuration.
func (c Config) Validate() error {
	// The layer over the defaults: a BaseDelay beyond the default MaxDelay is a mistake too.
	err := DefaultPolicy.Merge(c.Policy).Validate()
	if c.KeyPolicy != nil && c.Key == nil {
		err = errors.Join(err, errors.New("KeyPolicy is set but Key is nil: the per-key layer would never apply"))
	}
	if c.Budget != nil {
		if berr := c.Budget.Validate(); berr != nil {
			err = errors.Join(err, fmt.Errorf("Budget: %w", berr))
		}
	}
	return err
}

// RetryBudget returns Config.Budget (see budget.Holder).
func (r *Behavior) RetryBudget() *budget.Budget { return r.cfg.Budget }

// Bind implements mediator.BindingBehavior: when another behavior of the pipeline shares the
// budget (hedging), each call's context is marked counted (budget.Budget.MarkCounted), so that
// it counts nothing of its own, at the cost of a context per Send, and the call is counted as
// it starts; otherwise the behavior is used as it is.
//
// It also attaches the mediator's observers (RequestInfo.Observers): the Observers among them
// hear the retries of the request type, and the budget's observers (budget.Observer) its
// spending.
func (r *Behavior) Bind(info mediator.RequestInfo) (mediator.Behavior, error) {
	if r.cfg.Budget != nil {
		r.cfg.Budget.Observe(info.Observers)
	}
	shared := budget.SharedBy(r.cfg.Budget, r, info.Behaviors)
	obs := mediator.ObserversOf[Observer](info.Observers)
	if !shared && len(obs) == 0 {
		return r, nil
	}
	c := *r
	c.mark = shared
	c.cfg.OnRetry = slices.Clip(c.cfg.OnRetry)
	for _, o := range obs {
		c.cfg.OnRetry = append(c.cfg.OnRetry, o.OnRetry)
	}
	return &c, nil
}

// Policy returns the merged policy a call of req on ctx runs under: DefaultPolicy, the
// behavior's policy, the per-key layer and the per-request override, later winning field by
// field. Every field of the result is set.
func (r *Behavior) Policy(ctx context.Context, req any) Policy {
	p := r.base
	if r.cfg.Key != nil && r.cfg.KeyPolicy != nil {
		if kp, ok := r.cfg.KeyPolicy(r.cfg.Key(req)); ok {
			p = p.Merge(kp)
		}
	}
	if o, ok := overrideKey.GetFor(ctx, req); ok {
		p = p.Merge(o)
	}
	return p
}

// Handle calls next until it succeeds, fails with an error that is not retried, or the
// attempts run out. The final error of a call attempted more than once is a *ExhaustedError. A
// failure that opened the circuit breaker (*breaker.TrippedError) ends the retries at once,
// without a wait, unless the policy waits for the breaker. A retry that would start more than
// the policy's MaxAge after the first attempt failed is not made. A dispatch marked
// mediator.SingleAttempt is attempted once. With a Budget, the call is counted, and a retry the
// budget refuses ends the call with an *ExhaustedError whose Budget says so.
func (r *Behavior) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	b := r.cfg.Budget
	if b != nil && r.mark {
		// Counted before the first attempt, and the context marked so, because the hedges
		// of the behavior inside that shares the budget draw on the call while it runs.
		ctx = b.Call(ctx, req)
	}
	resp, err := next(ctx, req)
	if b != nil && !r.mark && (err == nil || !behaviors.Refused(err, req)) {
		// Counted once the first attempt is known to have got past the refusing behaviors:
		// a refused call (an open breaker, a rate limit) grows no allowance.
		b.Count(ctx, req)
	}
	if err == nil {
		return resp, nil
	}
	return r.retry(ctx, req, next, resp, err)
}

// retry goes on after a failed first attempt.
func (r *Behavior) retry(ctx context.Context, req any, next mediator.Next, resp any, err error) (any, error) {
	if mediator.IsCallerCancellation(ctx, err) || mediator.MarksOf(ctx, req).Has(mediator.SingleAttempt) {
		return resp, err
	}
	p := r.Policy(ctx, req)
	if p.MaxAttempts <= 1 {
		return resp, err
	}
	var first time.Time // the first failure, which MaxAge is measured from
	if p.MaxAge > 0 {
		first = r.clock.Now()
	}
	var bo backoff.BackOff
	var handlerErr error // the last error of an attempt that reached the handler
	if !behaviors.IsRefusal(err) {
		handlerErr = err
	}
	attempt := 1
	for attempt < p.MaxAttempts && shouldRetry(p, err) {
		if bo == nil {
			if r.cfg.BackOff != nil {
				bo = r.cfg.BackOff(p)
			} else {
				bo = p.newBackOff(r.rand)
			}
		}
		delay := bo.NextBackOff()
		if delay == backoff.Stop {
			break
		}
		delay, hint := adjustDelay(p, err, delay)
		if hint > 0 {
			// The server asked for a longer wait than the policy allows: retrying sooner is
			// pointless, and the caller must learn why the retries stopped.
			re := exhausted(attempt, err, handlerErr)
			re.Hint, re.MaxDelay = hint, p.MaxDelay
			return resp, re
		}
		if p.MaxAge > 0 && r.clock.Now().Add(delay).Sub(first) > p.MaxAge {
			// The retry would start too late for its result to be worth having: the caller
			// must learn that MaxAge, not the attempts, ended the call.
			re := exhausted(attempt, err, handlerErr)
			re.MaxAge = p.MaxAge
			return resp, re
		}
		if !fitsDeadline(ctx, r.clock, delay) {
			break
		}
		charged := false
		if b := r.cfg.Budget; b != nil {
			// Asked before the wait: a caller does not wait for a retry that is not made. The
			// charge is given back should the retry reach no dependency (see below).
			if berr := b.Retry(ctx, req); berr != nil {
				re := exhausted(attempt, err, handlerErr)
				if se, ok := berr.(*budget.SpentError); ok {
					se.Err = err
					re.Budget = se
				}
				return resp, re
			}
			charged = true
		}
		for _, on := range r.cfg.OnRetry {
			on(ctx, Event{Request: req, Attempt: attempt, Delay: delay, Err: err})
		}
		if werr := sleep(ctx, r.clock, delay); werr != nil {
			if charged {
				r.cfg.Budget.Refund(ctx, req) // the caller's cancellation is never charged
			}
			return nil, werr
		}
		attempt++
		resp, err = next(attemptKey.With(ctx, attempt), req)
		if err == nil {
			return resp, nil
		}
		if charged && behaviors.Refused(err, req) {
			r.cfg.Budget.Refund(ctx, req) // refused: the retry reached no dependency
		}
		if mediator.IsCallerCancellation(ctx, err) {
			return resp, err
		}
		if !behaviors.IsRefusal(err) {
			handlerErr = err
		}
	}
	if attempt == 1 {
		return resp, err
	}
	return resp, exhausted(attempt, err, handlerErr)
}

// exhausted is the final error of a call after attempts attempts, the last failing with err;
// handlerErr, the last error of an attempt that reached the handler, stays reachable when err
// is a refusal.
func exhausted(attempts int, err, handlerErr error) *ExhaustedError {
	re := &ExhaustedError{Attempts: attempts, Err: err}
	if behaviors.IsRefusal(err) {
		re.handlerErr = handlerErr
	}
	return re
}

// shouldRetry is the policy's classification, except that a failure which opened the circuit
// breaker ends the retries at once (the next attempt would be refused) unless the policy waits
// for the breaker.
func shouldRetry(p Policy, err error) bool {
	if errors.Is(err, classify.ErrTripped) {
		return p.WaitForBreaker == behaviors.On
	}
	return p.Retries(err)
}

// adjustDelay applies a refusal's wait (a circuit breaker's remaining open time, capped at
// MaxDelay), a tripped breaker's remaining open time (capped likewise) and a
// Retry-After hint, which wins when larger. A hint above MaxDelay is returned as hint: the
// policy does not allow waiting that long, and retrying sooner is pointless.
func adjustDelay(p Policy, err error, delay time.Duration) (d, hint time.Duration) {
	if behaviors.IsRefusal(err) || errors.Is(err, classify.ErrTripped) {
		// A refusal is retried only when it says when it may pass (see Policy.WaitForBreaker:
		// an open breaker's remaining time, a quota's refill), and a trip only when the policy
		// waits for the breaker (its open time, or the handler's own hint when longer): no
		// call gets through sooner.
		return min(max(behaviors.RetryAfter(err), delay), p.MaxDelay), 0
	}
	if hint := behaviors.RetryAfter(err); hint > delay {
		if hint > p.MaxDelay {
			return 0, hint
		}
		delay = hint
	}
	return delay, 0
}

// fitsDeadline reports whether an attempt after delay can still start before ctx's deadline.
func fitsDeadline(ctx context.Context, c behaviors.Clock, delay time.Duration) bool {
	dl, ok := ctx.Deadline()
	return !ok || c.Now().Add(delay).Before(dl)
}

// sleep waits for d on c, or until ctx is done; it returns ctx.Err() in that case.
func sleep(ctx context.Context, c behaviors.Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	ch, stop := c.After(d)
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		stop()
		return ctx.Err()
	}
}
