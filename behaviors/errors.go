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

// Refusal is implemented by the errors of behaviors that turn a call away before it reaches
// its handler: the circuit breaker's *breaker.OpenError, the bulkhead's *bulkhead.FullError,
// and any behavior of a user's own that does the same (a pause, a quota). Every part of the
// module recognises a refusal by this interface alone (IsRefusal, Refused): retry does not
// retry it (unless it carries a Retry-After hint and the policy waits for the breaker, see
// retry.Policy.WaitForBreaker), a breaker does not count it, the durable queue charges no
// attempt for it, and the metrics, logging and tracing behaviors record the outcome
// "refused". A refusal says nothing about the dependency's health: the call did not happen.
type Refusal interface {
	error
	// Refusal describes the refusal: what refused, under which key, and which request.
	Refusal() RefusalInfo
}

// RefusalInfo describes one refusal (see Refusal).
type RefusalInfo struct {
	// By names what refused, for records: "breaker", "bulkhead", or a behavior's own name.
	By string
	// Key is the key of the breaker, bulkhead or limit that refused; "" when it has none.
	// Logging rate-limits its refusal entries by it.
	Key string
	// Request is the request turned away; nil when unknown (an error made by hand, a refusal
	// of breaker.Registry.Gate). Refused compares it with the request whose error it is, so a
	// behavior that refuses should set it: a refusal that names no request is recognised by
	// IsRefusal (not retried, not counted, OutcomeOf says refused) but is not the refusal of
	// any request (a durable queue charges the attempt).
	Request any
}

// IsRefusal reports whether err says a call was turned away before it reached its handler: a
// Refusal in err's chain. A retried call whose earlier attempts reached the handler is not a
// refusal, though its last attempt was refused (see Refused).
func IsRefusal(err error) bool {
	_, ok := refusalOf(err)
	return ok
}

// refusalOf returns the refusal err says, if it says one.
func refusalOf(err error) (RefusalInfo, bool) {
	if err == nil {
		return RefusalInfo{}, false
	}
	if r, ok := err.(Refusal); ok && !wraps(err) {
		return r.Refusal(), true // the refusal itself, as retry meets it: nothing else to look at
	}
	r, ok := errors.AsType[Refusal](err)
	if !ok {
		return RefusalInfo{}, false
	}
	if h, ok := errors.AsType[handlerReacher](err); ok && h.HandlerReached() {
		return RefusalInfo{}, false
	}
	return r.Refusal(), true
}

// handlerReacher is implemented by the errors of behaviors that call next more than once (the
// retry behavior's *retry.ExhaustedError): HandlerReached reports whether any of those calls
// reached the handler, though the last one was refused.
type handlerReacher interface {
	error
	HandlerReached() bool
}

// wraps reports whether err wraps other errors.
func wraps(err error) bool {
	switch err.(type) {
	case interface{ Unwrap() error }, interface{ Unwrap() []error }:
		return true
	}
	return false
}

// Refused reports whether err says that the call of req was turned away before it reached its
// handler (a Refusal naming req): by the circuit breaker, the bulkhead or another refusing
// behavior of req's own pipeline. Such a call did not happen, so a scheduler that counts
// attempts does not count it. A refusal of another request (one that req's handler sent, whose
// error the handler returned) is not req's: req's handler did run (its caller got a refusal,
// which OutcomeOf reports as OutcomeRefused, but the attempt is charged). Nor is a retried call whose
// earlier attempts reached the handler and whose last attempt was refused: the dependency was
// called and failed, and that is what the call says.
func Refused(err error, req any) bool {
	if req == nil || !reflect.TypeOf(req).Comparable() {
		return false
	}
	r, ok := refusalOf(err)
	if !ok {
		return false
	}
	got := r.Request
	return got != nil && reflect.TypeOf(got) == reflect.TypeOf(req) && got == req
}
