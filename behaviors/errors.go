package behaviors

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// Sentinel errors. Each typed error below matches its sentinel with errors.Is.
var (
	// ErrCircuitOpen reports a call refused by an open (or fully probed half-open) circuit
	// breaker. The handler was not called.
	ErrCircuitOpen = errors.New("behaviors: circuit open")
	// ErrUnknownBreaker reports a breaker key the registry does not hold.
	ErrUnknownBreaker = errors.New("behaviors: unknown breaker")
	// ErrTimeout reports a call that did not finish within the Timeout behavior's duration.
	ErrTimeout = errors.New("behaviors: timeout")
	// ErrBulkheadFull reports a call rejected because its bulkhead had no free slot.
	ErrBulkheadFull = errors.New("behaviors: bulkhead full")
	// ErrValidation reports a request that failed validation. It is never retried and never
	// counted by a breaker.
	ErrValidation = errors.New("behaviors: validation failed")
	// ErrRetriesExhausted reports a call that failed after more than one attempt.
	ErrRetriesExhausted = errors.New("behaviors: retries exhausted")
)

// CircuitOpenError is returned instead of calling the handler while the breaker for Key is
// open. It matches ErrCircuitOpen. Refused tells whether it refused a given request.
type CircuitOpenError struct {
	// Key is the breaker's key.
	Key string
	// Remaining is the time until the breaker may let a probe through: the rest of the open
	// duration. For a half-open breaker whose probe slots are all taken it is 0, as OpenFor
	// reports: the probes may decide at any moment, usually long before the probe timeout, so
	// a caller that waits should look again soon rather than wait out the timeout.
	Remaining time.Duration

	req any // the request refused, when a behavior refused it; see Refused
}

// Error names the key and the remaining open time.
func (e *CircuitOpenError) Error() string {
	return fmt.Sprintf("behaviors: circuit open for %q (probe in %s)", e.Key, e.Remaining)
}

// Is reports whether target is ErrCircuitOpen.
func (e *CircuitOpenError) Is(target error) bool { return target == ErrCircuitOpen }

// RetryAfter returns Remaining: a caller that waits is best served waiting that long.
func (e *CircuitOpenError) RetryAfter() time.Duration { return e.Remaining }

// TimeoutError reports a call that ran past the Timeout behavior's duration. It matches
// ErrTimeout, unwraps to the error the handler returned (usually context.DeadlineExceeded)
// and, like net.Error, reports Timeout() == true.
type TimeoutError struct {
	// Duration is the timeout that ran out.
	Duration time.Duration
	// Err is the error the call returned after its deadline.
	Err error
}

// Error names the timeout and the call's error.
func (e *TimeoutError) Error() string {
	return fmt.Sprintf("behaviors: timeout after %s: %v", e.Duration, e.Err)
}

// Is reports whether target is ErrTimeout.
func (e *TimeoutError) Is(target error) bool { return target == ErrTimeout }

// Unwrap returns the call's own error.
func (e *TimeoutError) Unwrap() error { return e.Err }

// Timeout reports true.
func (e *TimeoutError) Timeout() bool { return true }

// BulkheadFullError reports a call rejected by a bulkhead. It matches ErrBulkheadFull. A
// breaker does not count it: it says nothing about the dependency's health.
type BulkheadFullError struct {
	// Key is the bulkhead's key.
	Key string
	// Limit is the bulkhead's concurrency limit.
	Limit int

	req any // the request refused; see Refused
}

// Error names the key and the limit.
func (e *BulkheadFullError) Error() string {
	return fmt.Sprintf("behaviors: bulkhead %q full (%d concurrent calls)", e.Key, e.Limit)
}

// Is reports whether target is ErrBulkheadFull.
func (e *BulkheadFullError) Is(target error) bool { return target == ErrBulkheadFull }

// ValidationError reports a request that failed validation. It matches ErrValidation and
// unwraps to the validator's error. Handlers may return one too, so that retry and the
// breaker treat their own input checks the same way.
type ValidationError struct {
	// Request is the request type; nil when unknown.
	Request reflect.Type
	// Err is the validator's error.
	Err error
}

// Error names the request type and the validator's error.
func (e *ValidationError) Error() string {
	if e.Request != nil {
		return fmt.Sprintf("behaviors: invalid %s: %v", e.Request, e.Err)
	}
	return fmt.Sprintf("behaviors: invalid request: %v", e.Err)
}

// Is reports whether target is ErrValidation.
func (e *ValidationError) Is(target error) bool { return target == ErrValidation }

// Unwrap returns the validator's error.
func (e *ValidationError) Unwrap() error { return e.Err }

// RetryError is the final error of a call that was attempted more than once, or whose retries
// a server's Retry-After hint cut short (Hint). It matches ErrRetriesExhausted and unwraps to
// the last attempt's error, so errors.Is and errors.As reach the handler's error through it.
// When the last attempt was refused before reaching the handler (an open circuit breaker, a
// full bulkhead), the error of the last attempt that did reach it stays reachable through
// errors.Is and errors.As too.
type RetryError struct {
	// Attempts is how many attempts were made, the first included.
	Attempts int
	// Err is the last attempt's error.
	Err error
	// Hint is the server's Retry-After hint that ended the retries although the policy allowed
	// more attempts: it asked for a longer wait than MaxDelay allows. Zero otherwise.
	Hint time.Duration
	// MaxDelay is the policy's MaxDelay when Hint ended the retries.
	MaxDelay time.Duration

	handlerErr error // the last error from an attempt that was not refused; nil when Err is one
}

// Error says how many attempts were made and what the last one returned, and why the retries
// stopped early when a Retry-After hint stopped them.
func (e *RetryError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "behaviors: failed after %d attempt", e.Attempts)
	if e.Attempts != 1 {
		b.WriteByte('s')
	}
	if e.Hint > 0 {
		fmt.Fprintf(&b, " (retries stopped: the server asked to wait %s, more than MaxDelay %s)", e.Hint, e.MaxDelay)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	if e.handlerErr != nil {
		fmt.Fprintf(&b, " (last handler error: %v)", e.handlerErr)
	}
	return b.String()
}

// RetryAfter returns how long a caller that tries again later (a durable queue) should wait at
// least: Hint when a server's hint ended the retries, else the hint the last attempt's error
// carries (a server's Retry-After, the open time of a breaker it tripped or met), else 0.
func (e *RetryError) RetryAfter() time.Duration {
	return max(e.Hint, RetryAfter(e.Err), RetryAfter(e.handlerErr))
}

// RetryAfter returns the Retry-After hint err carries (a RetryAfterHinter anywhere in its
// chain: a server's hint, the open time of a breaker the call tripped or met), or 0. Retry,
// the durable deferral and the durable scheduler all read hints through it.
func RetryAfter(err error) time.Duration {
	if err == nil {
		return 0
	}
	var h RetryAfterHinter
	if errors.As(err, &h) {
		return max(h.RetryAfter(), 0)
	}
	return 0
}

// Is reports whether target is ErrRetriesExhausted, or matches the last handler error of a
// call whose last attempt was refused.
func (e *RetryError) Is(target error) bool {
	return target == ErrRetriesExhausted || (e.handlerErr != nil && errors.Is(e.handlerErr, target))
}

// As finds target in the last handler error of a call whose last attempt was refused.
func (e *RetryError) As(target any) bool {
	return e.handlerErr != nil && errors.As(e.handlerErr, target)
}

// Unwrap returns the last attempt's error.
func (e *RetryError) Unwrap() error { return e.Err }

// refused reports whether err says an attempt was turned away before it reached the handler.
func refused(err error) bool {
	return errors.Is(err, ErrCircuitOpen) || errors.Is(err, ErrBulkheadFull)
}

// Refused reports whether err says that the call of req was turned away before it reached its
// handler: by the circuit breaker or the bulkhead of req's own pipeline. Such a call did not
// happen, so a scheduler that counts attempts does not count it. A refusal of another request
// (one that req's handler sent, whose error the handler returned) is not req's: req's handler
// did run.
func Refused(err error, req any) bool {
	if req == nil || !reflect.TypeOf(req).Comparable() {
		return false
	}
	if co, ok := errors.AsType[*CircuitOpenError](err); ok && co.req != nil && reflect.TypeOf(co.req) == reflect.TypeOf(req) && co.req == req {
		return true
	}
	if bf, ok := errors.AsType[*BulkheadFullError](err); ok && bf.req != nil && reflect.TypeOf(bf.req) == reflect.TypeOf(req) && bf.req == req {
		return true
	}
	return false
}

// RetryableError is implemented by errors that say whether a retry may succeed. Retryable
// honours it.
type RetryableError interface {
	error
	Retryable() bool
}

// StatusCoder is implemented by errors that carry an HTTP-like status code. Retryable retries
// the codes of the policy (429, 502, 503, 504 by default).
type StatusCoder interface {
	StatusCode() int
}

// RetryAfterHinter is implemented by errors that carry a server's Retry-After hint. Retry waits
// at least that long before the next attempt; a hint longer than the policy's MaxDelay ends the
// retries with a *RetryError that says so. A durable queue schedules the next try no earlier
// than the hint.
type RetryAfterHinter interface {
	RetryAfter() time.Duration
}
