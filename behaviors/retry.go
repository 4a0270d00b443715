package behaviors

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/switchboard-go/switchboard/mediator"
)

// Default orders of the resilience behaviors within mediator.StageDefault; lower is outer.
// Registering them in any order gives fallback → retry → breaker → timeout → bulkhead →
// handler.
const (
	// FallbackOrder is the default order of Fallback: outermost, it sees the final failure.
	FallbackOrder = 30
	// RetryOrder is the default order of Retry.
	RetryOrder = 50
	// BreakerOrder is the default order of CircuitBreaker: inside retry, so every attempt is
	// gated and counted.
	BreakerOrder = 60
	// TimeoutOrder is the default order of Timeout: inside retry, so it bounds each attempt.
	TimeoutOrder = 70
	// BulkheadOrder is the default order of Bulkhead: innermost, a slot is held only while the
	// handler runs.
	BulkheadOrder = 80
)

var (
	attemptKey  = mediator.NewKey[int]("retry.attempt")
	overrideKey = mediator.NewKey[RetryPolicy]("retry.override")
)

// Attempt returns the number of the current attempt of the innermost retrying call on ctx:
// 1 for the first attempt, and when no Retry behavior is involved. The first attempt sets
// nothing on the context, so a request sent from inside a handler on its first attempt sees
// the attempt of the enclosing call.
func Attempt(ctx context.Context) int { return attemptKey.GetOr(ctx, 1) }

// WithRetryOverride returns a copy of ctx on which the dispatch of req is retried under p
// merged over every other layer: the per-request override. Unset fields of p keep the lower
// layers' values. The override binds to req (see mediator.Key.WithFor): the requests req's
// handler sends with the same context run under their own policies. A later override for the
// same request is merged over an earlier one. (To make a dispatch exactly one attempt, mark it
// mediator.SingleAttempt.)
func WithRetryOverride(ctx context.Context, req any, p RetryPolicy) context.Context {
	if prev, ok := overrideKey.GetFor(ctx, req); ok {
		p = prev.Merge(p)
	}
	return overrideKey.WithFor(ctx, req, p)
}

// RetryOverride returns the per-request override set on ctx for req by WithRetryOverride.
func RetryOverride(ctx context.Context, req any) (RetryPolicy, bool) {
	return overrideKey.GetFor(ctx, req)
}

// RetryEvent describes one retry about to happen.
type RetryEvent struct {
	// Request is the request being retried.
	Request any
	// Attempt is the number of the attempt that failed (1 for the first).
	Attempt int
	// Delay is how long the behavior waits before the next attempt.
	Delay time.Duration
	// Err is the failed attempt's error.
	Err error
}

// RetryConfig configures NewRetry. The zero RetryConfig retries nothing until a layer sets
// MaxAttempts above 1.
type RetryConfig struct {
	// Policy is the behavior's layer, merged over DefaultRetryPolicy. Zero: the defaults.
	Policy RetryPolicy
	// Key maps a request to the key of its per-key layer (a source, an endpoint). nil: no
	// per-key layer.
	Key KeyFunc
	// KeyPolicy returns the per-key layer of key; ok false means none. nil: no per-key layer.
	KeyPolicy func(key string) (p RetryPolicy, ok bool)
	// OnRetry is called before each wait, with the failed attempt, the delay and the error.
	// nil: nothing is called.
	OnRetry func(ctx context.Context, e RetryEvent)
	// BackOff builds the delays of one call from its merged policy. It is called once per
	// call, on the first failure that is retried; never on success. nil: the policy's own
	// NewBackOff. Return backoff.Stop from NextBackOff to end the retries early.
	BackOff func(p RetryPolicy) backoff.BackOff
	// Clock is the time source of the waits. nil: SystemClock.
	Clock Clock
}

// KeyFunc maps a request (the pointer that was sent) to a key such as the remote endpoint it
// calls. It runs on every dispatch: keep it cheap and allocation-free.
type KeyFunc func(req any) string

// Retry is a behavior that calls the rest of the pipeline again when it fails with an error
// its merged policy retries, waiting between attempts as the policy says. On success it
// allocates nothing: no policy merge, no backoff, no timer. It is in StageDefault at
// RetryOrder.
//
// Retries require idempotent handlers: a retried command that failed after its effect took
// place repeats the effect.
type Retry struct {
	cfg   RetryConfig
	base  RetryPolicy
	clock Clock
}

// NewRetry returns a Retry behavior configured by cfg.
func NewRetry(cfg RetryConfig) *Retry {
	return &Retry{cfg: cfg, base: DefaultRetryPolicy.Merge(cfg.Policy), clock: clockOr(cfg.Clock)}
}

// Name returns "retry".
func (r *Retry) Name() string { return "retry" }

// Stage returns mediator.StageDefault.
func (r *Retry) Stage() mediator.Stage { return mediator.StageDefault }

// Order returns RetryOrder.
func (r *Retry) Order() int { return RetryOrder }

// Validate reports an invalid policy, and a per-key layer that could never apply (KeyPolicy
// without Key).
func (r *Retry) Validate() error {
	err := r.cfg.Policy.Validate()
	if r.cfg.KeyPolicy != nil && r.cfg.Key == nil {
		err = errors.Join(err, errors.New("KeyPolicy is set but Key is nil: the per-key layer would never apply"))
	}
	return err
}

// Policy returns the merged policy a call of req on ctx runs under: DefaultRetryPolicy, the
// behavior's policy, the per-key layer and the per-request override, later winning field by
// field. Every field of the result is set.
func (r *Retry) Policy(ctx context.Context, req any) RetryPolicy {
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
// attempts run out. The final error of a call attempted more than once is a *RetryError. A
// failure that opened the circuit breaker (*CircuitTrippedError) ends the retries at once,
// without a wait, unless the policy waits for the breaker. A dispatch marked
// mediator.SingleAttempt is attempted once.
func (r *Retry) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	resp, err := next(ctx, req)
	if err == nil {
		return resp, nil
	}
	return r.retry(ctx, req, next, resp, err)
}

func (r *Retry) retry(ctx context.Context, req any, next mediator.Next, resp any, err error) (any, error) {
	if mediator.IsCallerCancellation(ctx, err) || mediator.MarksOf(ctx, req).Has(mediator.SingleAttempt) {
		return resp, err
	}
	p := r.Policy(ctx, req)
	if p.MaxAttempts <= 1 {
		return resp, err
	}
	var bo backoff.BackOff
	var handlerErr error // the last error of an attempt that reached the handler
	if !refused(err) {
		handlerErr = err
	}
	attempt := 1
	for attempt < p.MaxAttempts && shouldRetry(p, err) {
		if bo == nil {
			if r.cfg.BackOff != nil {
				bo = r.cfg.BackOff(p)
			} else {
				bo = p.NewBackOff()
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
			re := &RetryError{Attempts: attempt, Err: err, Hint: hint, MaxDelay: p.MaxDelay}
			if refused(err) {
				re.handlerErr = handlerErr
			}
			return resp, re
		}
		if !fitsDeadline(ctx, r.clock, delay) {
			break
		}
		if r.cfg.OnRetry != nil {
			r.cfg.OnRetry(ctx, RetryEvent{Request: req, Attempt: attempt, Delay: delay, Err: err})
		}
		if werr := sleep(ctx, r.clock, delay); werr != nil {
			return nil, werr
		}
		attempt++
		resp, err = next(attemptKey.With(ctx, attempt), req)
		if err == nil {
			return resp, nil
		}
		if mediator.IsCallerCancellation(ctx, err) {
			return resp, err
		}
		if !refused(err) {
			handlerErr = err
		}
	}
	if attempt == 1 {
		return resp, err
	}
	re := &RetryError{Attempts: attempt, Err: err}
	if refused(err) {
		re.handlerErr = handlerErr
	}
	return resp, re
}

// shouldRetry is the policy's classification, except that a failure which opened the circuit
// breaker ends the retries at once (the next attempt would be refused) unless the policy waits
// for the breaker.
func shouldRetry(p RetryPolicy, err error) bool {
	if errors.Is(err, ErrCircuitTripped) {
		return p.WaitForBreaker == On
	}
	return p.Retries(err)
}

// adjustDelay applies a circuit breaker's remaining open time (capped at MaxDelay) and a
// Retry-After hint, which wins when larger. A hint above MaxDelay is returned as hint: the
// policy does not allow waiting that long, and retrying sooner is pointless.
func adjustDelay(p RetryPolicy, err error, delay time.Duration) (d, hint time.Duration) {
	if co, ok := errors.AsType[*CircuitOpenError](err); ok {
		return min(max(co.Remaining, delay), p.MaxDelay), 0
	}
	if ct, ok := errors.AsType[*CircuitTrippedError](err); ok {
		return min(max(ct.Remaining, delay), p.MaxDelay), 0
	}
	if hint := RetryAfter(err); hint > delay {
		if hint > p.MaxDelay {
			return 0, hint
		}
		delay = hint
	}
	return delay, 0
}

// fitsDeadline reports whether an attempt after delay can still start before ctx's deadline.
func fitsDeadline(ctx context.Context, c Clock, delay time.Duration) bool {
	dl, ok := ctx.Deadline()
	return !ok || c.Now().Add(delay).Before(dl)
}
