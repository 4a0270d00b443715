package retry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/internal/classify"
	"github.com/switchboard-go/switchboard/behaviors/validation"
	"github.com/switchboard-go/switchboard/mediator"
)

// Strategy is how the delay between attempts grows. The zero Strategy is unset.
type Strategy uint8

const (
	// Fixed waits BaseDelay before every retry.
	Fixed Strategy = iota + 1
	// Exponential waits BaseDelay × Multiplier^(n-1) before retry n, capped at MaxDelay.
	Exponential
)

// String returns "fixed", "exponential" or "unset".
func (s Strategy) String() string {
	switch s {
	case 0:
		return "unset"
	case Fixed:
		return "fixed"
	case Exponential:
		return "exponential"
	}
	return fmt.Sprintf("Strategy(%d)", uint8(s))
}

// Policy says how often and how patiently a call is retried. Every zero field is unset:
// Merge takes it from the layer below, and DefaultPolicy fills in what no layer sets.
// Policies come in layers, later wins, field by field: DefaultPolicy → the Retry
// behavior's policy → the policy of the request's key (a source, an endpoint) → the per-request
// override of WithOverride. The same merged policy classifies failures for the durable
// queue (see Retries).
type Policy struct {
	// MaxAttempts is the number of attempts in total, the first included; 1 means no retry.
	// Default 1: retries are opt-in, because a retried command that took effect before it
	// failed takes effect twice; turn them on for the requests that are safe to repeat.
	MaxAttempts int
	// Strategy is fixed or exponential. Default Fixed: with few in-process attempts a
	// caller is waiting on, a steady delay is the predictable choice.
	Strategy Strategy
	// BaseDelay is the delay before the first retry. Default 500 ms: long enough for a gateway
	// or load balancer to route around a failed instance, short enough for a waiting caller.
	BaseDelay time.Duration
	// Multiplier is the growth factor of Exponential; at least 1. Default 2, the usual
	// doubling of exponential backoff.
	Multiplier float64
	// MaxDelay caps every computed delay, and the wait for a breaker. Default 30 s: a caller
	// rarely waits longer, and a dependency down for longer is the durable queue's business.
	MaxDelay time.Duration
	// Jitter adds ±10 % uniform jitter to each delay (still capped at MaxDelay), so callers
	// that failed together do not retry together. Default Off, so delays are exact and
	// predictable; turn it on for busy dependencies.
	Jitter behaviors.Switch
	// RetryOnTimeout retries timeouts (see behaviors.IsTimeout), never the caller's own deadline.
	// Default Off in process: a call that timed out may have taken effect, and a caller is
	// waiting. (The durable queue turns it on for its own work, which exists for the
	// dependency that is hung.)
	RetryOnTimeout behaviors.Switch
	// RetryOnTransport retries transport errors (see behaviors.IsTransport: connection refused or reset,
	// unexpected EOF, temporary DNS failures). Default Off in process: a dependency that
	// refuses connections is down, and retrying it within seconds rarely helps the waiting
	// caller. (The durable queue turns it on for its own work, which exists for the dependency
	// that is down.)
	RetryOnTransport behaviors.Switch
	// WaitForBreaker retries a call refused by an open circuit breaker after waiting out the
	// breaker's remaining open time, capped at MaxDelay (and a call whose failure tripped the
	// breaker after its open time, or the handler's Retry-After hint when longer); so too any refusal (behaviors.Refusal)
	// that carries a Retry-After hint (behaviors.RetryAfterHinter), such as a quota of your
	// own that says when it refills. A refusal without one (a full bulkhead) is never retried.
	// Default Off: an open breaker ends the retries at once, since attempts spent against an
	// open circuit fail without trying and only delay the caller.
	WaitForBreaker behaviors.Switch
	// RetryableStatusCodes are the status codes (see behaviors.StatusCoder) the default classifier
	// retries. nil is unset; an empty non-nil slice retries no status code. Default 429, 502,
	// 503, 504: the common gateway-retry set, the codes that say the request was most likely
	// not processed.
	RetryableStatusCodes []int
	// Classifier decides which errors are retried. nil is unset. Default: behaviors.Retryable with
	// RetryableStatusCodes. Whatever it says, the caller's cancellation, validation errors,
	// missing handlers and refusals (behaviors.IsRefusal: bulkhead rejections, and unless
	// WaitForBreaker circuit-open errors) are never retried, timeouts follow RetryOnTimeout and transport errors RetryOnTransport
	// (when it is On; Off leaves them to Classifier).
	Classifier behaviors.Classifier
	// MaxAge bounds how late a retry may start: no retry starts later than MaxAge after the
	// first failure, measured with the retry behavior's Clock. A retry whose delay would start
	// it later is not made; the call ends with the last error, in an *ExhaustedError that says
	// MaxAge ended the retries. It is measured from the first failure, not the first start, so
	// that a call that succeeds at once reads no clock. Default 0, no bound: MaxAttempts and
	// MaxDelay bound the retries already; set MaxAge when a result is worthless after some
	// time, such as a quote or a one-time code. The durable queue applies the same bound to a
	// stored item, from its enqueue (a deferred request is enqueued at its first failure): an
	// item still not done by then is dead, not tried again.
	MaxAge time.Duration
}

// Retries reports whether p, resolved over DefaultPolicy, classifies err as worth another
// attempt: the fixed rules first (never the caller's cancellation, validation errors, missing
// handlers; a refusal (behaviors.IsRefusal) only with WaitForBreaker, and only one that says
// when it may pass, as a circuit-open error does and a bulkhead rejection does not), then timeouts by
// RetryOnTimeout, transport errors by RetryOnTransport when it is On, and the rest by Classifier,
// or Retryable with RetryableStatusCodes. It says nothing about attempts left. The Retry
// behavior decides with it, and so do the durable queue's deferral and scheduler, each with the
// request's own merged policy, so one classification holds everywhere.
func (p Policy) Retries(err error) bool {
	if err == nil {
		return false
	}
	p = p.Resolved()
	if behaviors.IsRefusal(err) {
		return p.WaitForBreaker == behaviors.On && waitable(err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, validation.ErrInvalid) ||
		errors.Is(err, mediator.ErrNoHandler) {
		return false
	}
	if behaviors.IsTimeout(err) {
		return p.RetryOnTimeout == behaviors.On
	}
	if p.RetryOnTransport == behaviors.On && behaviors.IsTransport(err) {
		return true
	}
	if p.Classifier != nil {
		return p.Classifier(err)
	}
	return classify.RetryableWith(err, p.RetryableStatusCodes)
}

// waitable reports whether the refusal err says when it may pass: a Retry-After hint, as an
// open breaker's remaining time (0 for a half-open breaker whose probes are all out: look
// again soon).
func waitable(err error) bool {
	var h behaviors.RetryAfterHinter
	return errors.As(err, &h)
}

// DefaultPolicy is the built-in bottom layer of every policy; each field's comment on
// Policy gives the reason for its value.
var DefaultPolicy = Policy{
	MaxAttempts:          1,
	Strategy:             Fixed,
	BaseDelay:            500 * time.Millisecond,
	Multiplier:           2,
	MaxDelay:             30 * time.Second,
	Jitter:               behaviors.Off,
	RetryOnTimeout:       behaviors.Off,
	RetryOnTransport:     behaviors.Off,
	WaitForBreaker:       behaviors.Off,
	RetryableStatusCodes: slices.Clone(classify.RetryableStatusCodes),
	MaxAge:               0, // no bound
}

// Merge returns p with every field that over sets replaced by over's. Zero fields of over
// are unset and keep p's value.
func (p Policy) Merge(over Policy) Policy {
	setIfSet(&p.MaxAttempts, over.MaxAttempts)
	setIfSet(&p.Strategy, over.Strategy)
	setIfSet(&p.BaseDelay, over.BaseDelay)
	setIfSet(&p.Multiplier, over.Multiplier)
	setIfSet(&p.MaxDelay, over.MaxDelay)
	setIfSet(&p.Jitter, over.Jitter)
	setIfSet(&p.RetryOnTimeout, over.RetryOnTimeout)
	setIfSet(&p.RetryOnTransport, over.RetryOnTransport)
	setIfSet(&p.WaitForBreaker, over.WaitForBreaker)
	setIfSet(&p.MaxAge, over.MaxAge)
	if over.RetryableStatusCodes != nil {
		p.RetryableStatusCodes = over.RetryableStatusCodes
	}
	if over.Classifier != nil {
		p.Classifier = over.Classifier
	}
	return p
}

// setIfSet sets *dst to v unless v is the zero value, which means unset.
func setIfSet[T comparable](dst *T, v T) {
	var zero T
	if v != zero {
		*dst = v
	}
}

// Resolved returns p merged over DefaultPolicy: every field set, but Classifier and MaxAge,
// whose defaults are none (Retryable with RetryableStatusCodes; no bound).
func (p Policy) Resolved() Policy { return DefaultPolicy.Merge(p) }

// ErrInvalidPolicy reports a Policy field set to a value outside its range. Policy.Validate
// returns one *InvalidPolicyError per invalid field, joined.
var ErrInvalidPolicy = errors.New("retry: invalid retry policy")

// InvalidPolicyError names one invalid field of a Policy, its value and what is wrong with it.
// It matches ErrInvalidPolicy.
type InvalidPolicyError struct {
	// Field is the name of the Policy field, such as "Multiplier".
	Field string
	// Value is the field's value.
	Value any
	// Problem says what is wrong with the value, such as "is negative".
	Problem string
}

// Error names the field, its value and the problem.
func (e *InvalidPolicyError) Error() string {
	return fmt.Sprintf("retry: invalid retry policy: %s %v %s", e.Field, e.Value, e.Problem)
}

// Is reports whether target is ErrInvalidPolicy.
func (e *InvalidPolicyError) Is(target error) bool { return target == ErrInvalidPolicy }

// Validate reports every field set to an invalid value, each as an *InvalidPolicyError naming
// the field, joined with errors.Join; nil when p is valid. Zero fields are valid: they are
// unset. A MaxDelay shorter than BaseDelay is invalid when p sets both; the retry behavior and
// the durable queue validate their layer merged over the defaults below it, so a BaseDelay
// beyond the default MaxDelay is reported there.
func (p Policy) Validate() error {
	var errs []error
	bad := func(field string, value any, problem string) {
		errs = append(errs, &InvalidPolicyError{Field: field, Value: value, Problem: problem})
	}
	if p.MaxAttempts < 0 {
		bad("MaxAttempts", p.MaxAttempts, "is negative")
	}
	if p.Strategy > Exponential {
		bad("Strategy", p.Strategy, "is unknown")
	}
	if p.BaseDelay < 0 {
		bad("BaseDelay", p.BaseDelay, "is negative")
	}
	if p.MaxDelay < 0 {
		bad("MaxDelay", p.MaxDelay, "is negative")
	}
	if p.MaxAge < 0 {
		bad("MaxAge", p.MaxAge, "is negative")
	}
	if p.MaxDelay > 0 && p.BaseDelay > p.MaxDelay {
		bad("MaxDelay", p.MaxDelay, fmt.Sprintf("is shorter than BaseDelay %v: every delay would be cut to MaxDelay", p.BaseDelay))
	}
	if p.Multiplier != 0 && (p.Multiplier < 1 || math.IsNaN(p.Multiplier) || math.IsInf(p.Multiplier, 0)) {
		bad("Multiplier", p.Multiplier, "is not a finite number of at least 1")
	}
	for _, c := range p.RetryableStatusCodes {
		if c < 100 || c > 599 {
			bad("RetryableStatusCodes", c, "is not an HTTP-like status code (100 to 599)")
		}
	}
	for _, s := range []struct {
		name string
		v    behaviors.Switch
	}{{"Jitter", p.Jitter}, {"RetryOnTimeout", p.RetryOnTimeout}, {"RetryOnTransport", p.RetryOnTransport}, {"WaitForBreaker", p.WaitForBreaker}} {
		if s.v > behaviors.Off {
			bad(s.name, s.v, "is unknown")
		}
	}
	return errors.Join(errs...)
}

// jitterFraction is the ±fraction applied when Jitter is On: enough to spread callers apart,
// small enough to keep delays predictable.
const jitterFraction = 0.1

// Delay returns the delay before the retry that follows failed attempt n, computed from the
// resolved policy: BaseDelay, times Multiplier^(n-1) when the strategy is Exponential, spread
// by ±10 % when Jitter is On, and capped at MaxDelay (a delay at the cap is only ever spread
// downwards). r is the jitter draw, uniform in [0, 1); it is ignored when Jitter is Off, and an
// r outside [0, 1) or NaN means 0.5, no spread. An n below 1 counts as 1.
//
// It is the one delay formula of the module: the retry behavior draws r itself, the durable
// queue passes its own. It never overflows and is never negative or above MaxDelay, for any n
// and any field values: a huge n or an infinite product yields MaxDelay.
func (p Policy) Delay(n int, r float64) time.Duration {
	p = p.Resolved()
	n = max(n, 1)
	maxD := max(p.MaxDelay, 0)
	base := min(max(p.BaseDelay, 0), maxD)
	d := float64(base)
	if p.Strategy == Exponential && n > 1 {
		m := p.Multiplier
		if !(m >= 1) || math.IsInf(m, 0) { // NaN, below 1 or infinite: no growth beyond the cap
			m = 1
		}
		d *= math.Pow(m, float64(n-1))
	}
	if p.Jitter == behaviors.On {
		if !(r >= 0 && r < 1) { // also catches NaN
			r = 0.5
		}
		d *= 1 + jitterFraction*(2*r-1)
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
	p    Policy
	n    int
	rand func() float64
}

// NewBackOff returns a backoff.BackOff that yields p.Delay(1, r), p.Delay(2, r), ... with a
// fresh jitter draw r from math/rand/v2 each time, and then backoff.Stop once MaxAttempts
// attempts have been made.
func (p Policy) NewBackOff() backoff.BackOff { return p.newBackOff(rand.Float64) }

func (p Policy) newBackOff(rnd func() float64) backoff.BackOff {
	return &policyBackOff{p: p.Resolved(), rand: rnd}
}

// NextBackOff returns the delay before the next retry, or backoff.Stop.
func (b *policyBackOff) NextBackOff() time.Duration {
	if b.n+1 >= b.p.MaxAttempts {
		return backoff.Stop
	}
	b.n++
	r := 0.5
	if b.p.Jitter == behaviors.On {
		r = b.rand()
	}
	return b.p.Delay(b.n, r)
}

// Reset starts over from the first retry.
func (b *policyBackOff) Reset() { b.n = 0 }
