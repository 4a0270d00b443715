package classify

import (
	"errors"
	"slices"
)

// ErrTripped is breaker.ErrTripped, declared here so that retry recognises a call that
// opened its breaker without importing the breaker package.
var ErrTripped = errors.New("breaker: circuit tripped")

// ErrInvalid is validation.ErrInvalid, declared here so that package behaviors recognises a
// validation error (behaviors.IsClientError) without importing the validation package, which
// imports it.
var ErrInvalid = errors.New("validation: invalid request")

// RetryableStatusCodes are the status codes retried by default: too many requests, bad
// gateway, service unavailable, gateway timeout, the common gateway-retry set. Read it, never
// change it.
var RetryableStatusCodes = []int{429, 502, 503, 504}

// StatusError is an error carrying an HTTP-like status code (behaviors.StatusCoder).
type StatusError interface {
	error
	StatusCode() int
}

// retryableError is behaviors.RetryableError.
type retryableError interface {
	error
	Retryable() bool
}

// RetryableWith reports what an error that no fixed rule decided says of itself: its
// Retryable method when it has one, else whether its status code is among codes, else false.
func RetryableWith(err error, codes []int) bool {
	if r, ok := errors.AsType[retryableError](err); ok {
		return r.Retryable()
	}
	if s, ok := errors.AsType[StatusError](err); ok {
		return slices.Contains(codes, s.StatusCode())
	}
	return false
}
