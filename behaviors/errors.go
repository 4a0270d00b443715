package behaviors

import (
	"errors"
	"fmt"
	"reflect"
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
// open. It matches ErrCircuitOpen.
type CircuitOpenError struct {
	// Key is the breaker's key.
	Key string
	// Remaining is the time until the breaker may let a probe through: the rest of the open
	// duration or, for a half-open breaker whose probe slots are all taken, the time until the
	// earliest probe in flight times out (a probe that finishes sooner frees its slot sooner).
	Remaining time.Duration
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

// RetryError is the final error of a call that was attempted more than once. It matches
// ErrRetriesExhausted and unwraps to the last attempt's error, so errors.Is and errors.As
// reach the handler's error through it. When the last attempt was refused before reaching
// the handler (an open circuit breaker, a full bulkhead), the error of the last attempt that
// did reach it stays reachable through errors.Is and errors.As too.
type RetryError struct {
	// Attempts is how many attempts were made, the first included.
	Attempts int
	// Err is the last attempt's error.
	Err error

	handlerErr error // the last error from an attempt that was not refused; nil when Err is one
}

// Error says how many attempts were made and what the last one returned.
func (e *RetryError) Error() string {
	if e.handlerErr != nil {
		return fmt.Sprintf("behaviors: failed after %d attempts: %v (last handler error: %v)", e.Attempts, e.Err, e.handlerErr)
	}
	return fmt.Sprintf("behaviors: failed after %d attempts: %v", e.Attempts, e.Err)
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
// at least that long before the next attempt.
type RetryAfterHinter interface {
	RetryAfter() time.Duration
}
