package behaviors

import (
	"errors"
	"reflect"
	"time"
)

// RetryableError is implemented by errors that say whether a retry may succeed. Retryable
// honours it. The errors of the built-in behaviors that no retry can help (a validation
// error, an open circuit, a full bulkhead) implement it and say no.
type RetryableError interface {
	error
	Retryable() bool
}

// StatusCoder is implemented by errors that carry an HTTP-like status code. Retryable retries
// 429, 502, 503 and 504; a retry policy may name other codes.
type StatusCoder interface {
	StatusCode() int
}

// RetryAfterHinter is implemented by errors that carry a server's Retry-After hint. Retry waits
// at least that long before the next attempt; a hint longer than the policy's MaxDelay ends the
// retries with an error that says so. A durable queue schedules the next try no earlier than
// the hint.
type RetryAfterHinter interface {
	RetryAfter() time.Duration
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

// refusal is implemented by the errors of the behaviors that turn a call away before it
// reaches its handler (the circuit breaker's *breaker.OpenError, the bulkhead's
// *bulkhead.FullError): Request returns the request turned away, nil when no behavior set it.
type refusal interface {
	error
	Request() any
}

// handlerReacher is implemented by the errors of behaviors that call next more than once (the
// retry behavior's *retry.ExhaustedError): HandlerReached reports whether any of those calls
// reached the handler, though the last one was refused.
type handlerReacher interface {
	error
	HandlerReached() bool
}

// Refused reports whether err says that the call of req was turned away before it reached its
// handler: by the circuit breaker or the bulkhead of req's own pipeline. Such a call did not
// happen, so a scheduler that counts attempts does not count it. A refusal of another request
// (one that req's handler sent, whose error the handler returned) is not req's: req's handler
// did run. Nor is a retried call whose earlier attempts reached the handler and whose last
// attempt was refused: the dependency was called and failed, and that is what the call says.
func Refused(err error, req any) bool {
	if req == nil || !reflect.TypeOf(req).Comparable() {
		return false
	}
	if h, ok := errors.AsType[handlerReacher](err); ok && h.HandlerReached() {
		return false
	}
	r, ok := errors.AsType[refusal](err)
	if !ok {
		return false
	}
	got := r.Request()
	return got != nil && reflect.TypeOf(got) == reflect.TypeOf(req) && got == req
}
