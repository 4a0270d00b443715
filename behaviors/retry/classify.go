package retry

import (
	"errors"
	"slices"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/bulkhead"
)

// defaultRetryableStatusCodes are the status codes the default classifier retries: too many
// requests, bad gateway, service unavailable, gateway timeout, the common gateway-retry set
// (the codes behaviors.Retryable retries).
var defaultRetryableStatusCodes = []int{429, 502, 503, 504}

type statusError interface {
	error
	behaviors.StatusCoder
}

// retryableWith is behaviors.Retryable with the status codes of a policy, for the errors that
// Policy.Retries has not decided by its fixed rules.
func retryableWith(err error, codes []int) bool {
	if r, ok := errors.AsType[behaviors.RetryableError](err); ok {
		return r.Retryable()
	}
	if s, ok := errors.AsType[statusError](err); ok {
		return slices.Contains(codes, s.StatusCode())
	}
	return false
}

// refused reports whether err says an attempt was turned away before it reached the handler.
func refused(err error) bool {
	return errors.Is(err, breaker.ErrOpen) || errors.Is(err, bulkhead.ErrFull)
}
