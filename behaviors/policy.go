package behaviors

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/switchboard-go/switchboard/mediator"
)

// Strategy is how the delay between attempts grows. The zero Strategy is unset.
type Strategy uint8

const (
	// StrategyFixed waits BaseDelay before every retry.
	StrategyFixed Strategy = iota + 1
	// StrategyExponential waits BaseDelay × Multiplier^(n-1) before retry n, capped at MaxDelay.
	StrategyExponential
)

// String returns "fixed", "exponential" or "unset".
func (s Strategy) String() string {
	switch s {
	case 0:
		return "unset"
	case StrategyFixed:
		return "fixed"
	case StrategyExponential:
		return "exponential"
	}
	return fmt.Sprintf("Strategy(%d)", uint8(s))
}

// Switch is a policy flag that a later layer can turn off as well as on. The zero Switch is
// unset.
type Switch uint8

const (
	// On turns a flag on.
	On Switch = iota + 1
	// Off turns a flag off.
	Off
)

// String returns "on", "off" or "unset".
func (s Switch) String() string {
	switch s {
	case 0:
		return "unset"
	case On:
		return "on"
	case Off:
		return "off"
	}
	return fmt.Sprintf("Switch(%d)", uint8(s))
}

// RetryPolicy says how often and how patiently a call is retried. Every zero field is unset:
// Merge takes it from the layer below, and DefaultRetryPolicy fills in what no layer sets.
// Policies come in layers, later wins, field by field: DefaultRetryPolicy → the Retry
// behavior's policy → the policy of the request's key (a source, an endpoint) → the per-request
// override of WithRetryOverride. The same merged policy classifies failures for the durable
// queue (see Retries).
type RetryPolicy struct {
	// MaxAttempts is the number of attempts in total, the first included; 1 means no retry.
	// Default 1: retries are opt-in, because a retried command that took effect before it
	// failed takes effect twice; turn them on for the requests that are safe to repeat.
	MaxAttempts int
	// Strategy is fixed or exponential. Default StrategyFixed: with few in-process attempts a
	// caller is waiting on, a steady delay is the predictable choice.
	Strategy Strategy
	// BaseDelay is the delay before the first retry. Default 500 ms: long enough for a gateway
	// or load balancer to route around a failed instance, short enough for a waiting caller.
	BaseDelay time.Duration
	// Multiplier is the growth factor of StrategyExponential; at least 1. Default 2, the usual
	// doubling of exponential backoff.
	Multiplier float64
	// MaxDelay caps every computed delay, and the wait for a breaker. Default 30 s: a caller
	// rarely waits longer, and a dependency down for longer is the durable queue's business.
	MaxDelay time.Duration
	// Jitter adds ±10 % uniform jitter to each delay (still capped at MaxDelay), so callers
	// that failed together do not retry together. Default Off, so delays are exact and
	// predictable; turn it on for busy dependencies.
	Jitter Switch
	// RetryOnTimeout retries timeouts (see IsTimeout), never the caller's own deadline.
	// Default Off in process: a call that timed out may have taken effect, and a caller is
	// waiting. (The durable queue turns it on for its own work, which exists for the
	// dependency that is hung.)
	RetryOnTimeout Switch
	// RetryOnTransport retries transport errors (see IsTransport: connection refused or reset,
	// unexpected EOF, temporary DNS failures). Default Off in process: a dependency that
	// refuses connections is down, and retrying it within seconds rarely helps the waiting
	// caller. (The durable queue turns it on for its own work, which exists for the dependency
	// that is down.)
	RetryOnTransport Switch
	// WaitForBreaker retries a call refused by an open circuit breaker after waiting out the
	// breaker's remaining open time, capped at MaxDelay. Default Off: an open breaker ends
	// the retries at once, since attempts spent against an open circuit fail without trying
	// and only delay the caller.
	WaitForBreaker Switch
	// RetryableStatusCodes are the status codes (see StatusCoder) the default classifier
	// retries. nil is unset; an empty non-nil slice retries no status code. Default 429, 502,
	// 503, 504: the common gateway-retry set, the codes that say the request was most likely
	// not processed.
	RetryableStatusCodes []int
	// Classify decides which errors are retried. nil is unset. Default: Retryable with
	// RetryableStatusCodes. Whatever it says, the caller's cancellation, validation errors,
	// missing handlers, bulkhead rejections and (unless WaitForBreaker) circuit-open errors are
	// never retried, timeouts follow RetryOnTimeout and transport errors RetryOnTransport
	// (when it is On; Off leaves them to Classify).
	Classify func(err error) bool
}

// Retries reports whether p, resolved over DefaultRetryPolicy, classifies err as worth another
// attempt: the fixed rules first (never the caller's cancellation, validation errors, missing
// handlers, bulkhead rejections; circuit-open errors only with WaitForBreaker), then timeouts by
// RetryOnTimeout, transport errors by RetryOnTransport when it is On, and the rest by Classify,
// or Retryable with RetryableStatusCodes. It says nothing about attempts left. The Retry
// behavior decides with it, and so do the durable queue's deferral and scheduler, each with the
// request's own merged policy, so one classification holds everywhere.
func (p RetryPolicy) Retries(err error) bool {
	if err == nil {
		return false
	}
	p = p.Resolved()
	if errors.Is(err, ErrCircuitOpen) {
		return p.WaitForBreaker == On
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, ErrValidation) ||
		errors.Is(err, mediator.ErrNoHandler) || errors.Is(err, ErrBulkheadFull) {
		return false
	}
	if IsTimeout(err) {
		return p.RetryOnTimeout == On
	}
	if p.RetryOnTransport == On && IsTransport(err) {
		return true
	}
	if p.Classify != nil {
		return p.Classify(err)
	}
	return retryableWith(err, p.RetryableStatusCodes)
}

// DefaultRetryPolicy is the built-in bottom layer of every policy; each field's comment on
// RetryPolicy gives the reason for its value.
var DefaultRetryPolicy = RetryPolicy{
	MaxAttempts:          1,
	Strategy:             StrategyFixed,
	BaseDelay:            500 * time.Millisecond,
	Multiplier:           2,
	MaxDelay:             30 * time.Second,
	Jitter:               Off,
	RetryOnTimeout:       Off,
	RetryOnTransport:     Off,
	WaitForBreaker:       Off,
	RetryableStatusCodes: defaultRetryableStatusCodes,
}

// Merge returns p with every field that over sets replaced by over's. Zero fields of over
// are unset and keep p's value.
func (p RetryPolicy) Merge(over RetryPolicy) RetryPolicy {
	if over.MaxAttempts != 0 {
		p.MaxAttempts = over.MaxAttempts
	}
	if over.Strategy != 0 {
		p.Strategy = over.Strategy
	}
	if over.BaseDelay != 0 {
		p.BaseDelay = over.BaseDelay
	}
	if over.Multiplier != 0 {
		p.Multiplier = over.Multiplier
	}
	if over.MaxDelay != 0 {
		p.MaxDelay = over.MaxDelay
	}
	if over.Jitter != 0 {
		p.Jitter = over.Jitter
	}
	if over.RetryOnTimeout != 0 {
		p.RetryOnTimeout = over.RetryOnTimeout
	}
	if over.RetryOnTransport != 0 {
		p.RetryOnTransport = over.RetryOnTransport
	}
	if over.WaitForBreaker != 0 {
		p.WaitForBreaker = over.WaitForBreaker
	}
	if over.RetryableStatusCodes != nil {
		p.RetryableStatusCodes = over.RetryableStatusCodes
	}
	if over.Classify != nil {
		p.Classify = over.Classify
	}
	return p
}

// Resolved returns p merged over DefaultRetryPolicy: every field set.
func (p RetryPolicy) Resolved() RetryPolicy { return DefaultRetryPolicy.Merge(p) }

// Validate reports fields that are set to invalid values.
func (p RetryPolicy) Validate() error {
	var errs []error
	if p.MaxAttempts < 0 {
		errs = append(errs, fmt.Errorf("MaxAttempts %d is negative", p.MaxAttempts))
	}
	if p.Strategy > StrategyExponential {
		errs = append(errs, fmt.Errorf("unknown %s", p.Strategy))
	}
	if p.BaseDelay < 0 {
		errs = append(errs, fmt.Errorf("BaseDelay %s is negative", p.BaseDelay))
	}
	if p.MaxDelay < 0 {
		errs = append(errs, fmt.Errorf("MaxDelay %s is negative", p.MaxDelay))
	}
	if p.Multiplier != 0 && (p.Multiplier < 1 || math.IsNaN(p.Multiplier) || math.IsInf(p.Multiplier, 0)) {
		errs = append(errs, fmt.Errorf("Multiplier %v is not a finite number of at least 1", p.Multiplier))
	}
	for _, c := range p.RetryableStatusCodes {
		if c < 100 || c > 599 {
			errs = append(errs, fmt.Errorf("RetryableStatusCodes: %d is not an HTTP-like status code (100 to 599)", c))
		}
	}
	for _, s := range []struct {
		name string
		v    Switch
	}{{"Jitter", p.Jitter}, {"RetryOnTimeout", p.RetryOnTimeout}, {"RetryOnTransport", p.RetryOnTransport}, {"WaitForBreaker", p.WaitForBreaker}} {
		if s.v > Off {
			errs = append(errs, fmt.Errorf("%s: unknown %s", s.name, s.v))
		}
	}
	return errors.Join(errs...)
}

// jitterFraction is the ±fraction applied when Jitter is On: enough to spread callers apart,
// small enough to keep delays predictable.
const jitterFraction = 0.1

// Delay returns the delay before the retry that follows failed attempt n (n ≥ 1), computed
// from the resolved policy. It is never negative and never above MaxDelay, for any n and any
// field values; with Jitter On it varies by up to ±10 %.
func (p RetryPolicy) Delay(n int) time.Duration {
	p = p.Resolved()
	maxD := max(p.MaxDelay, 0)
	base := min(max(p.BaseDelay, 0), maxD)
	d := float64(base)
	if p.Strategy == StrategyExponential && n > 1 {
		m := p.Multiplier
		if !(m >= 1) || math.IsInf(m, 0) { // NaN, below 1 or infinite: no growth beyond the cap
			m = 1
		}
		d *= math.Pow(m, float64(n-1))
	}
	if p.Jitter == On {
		d *= 1 + jitterFraction*(2*rand.Float64()-1)
	}
	if !(d < float64(maxD)) { // also catches +Inf and NaN
		return maxD
	}
	if d <= 0 {
		return 0
	}
	return time.Duration(d)
}

// policyBackOff is a backoff.BackOff that walks a policy's delays.
type policyBackOff struct {
	p RetryPolicy
	n int
}

// NewBackOff returns a backoff.BackOff that yields p.Delay(1), p.Delay(2), ... and then
// backoff.Stop once MaxAttempts attempts have been made.
func (p RetryPolicy) NewBackOff() backoff.BackOff {
	return &policyBackOff{p: p.Resolved()}
}

// NextBackOff returns the delay before the next retry, or backoff.Stop.
func (b *policyBackOff) NextBackOff() time.Duration {
	if b.n+1 >= b.p.MaxAttempts {
		return backoff.Stop
	}
	b.n++
	return b.p.Delay(b.n)
}

// Reset starts over from the first retry.
func (b *policyBackOff) Reset() { b.n = 0 }
