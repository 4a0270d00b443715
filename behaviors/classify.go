package behaviors

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"slices"
	"syscall"

	"github.com/switchboard-go/switchboard/mediator"
)

// defaultRetryableStatusCodes are the status codes Retryable retries: too many requests, bad
// gateway, service unavailable, gateway timeout, the common gateway-retry set.
var defaultRetryableStatusCodes = []int{429, 502, 503, 504}

// Retryable is the default retry classifier. It reports true for errors that declare
// themselves retryable (a Retryable() bool method returning true) and for errors carrying
// status code 429, 502, 503 or 504 (a StatusCode() int method). It reports false for nil,
// context.Canceled, context.DeadlineExceeded and other timeouts (the policy's RetryOnTimeout
// decides those), validation errors, mediator.ErrNoHandler, circuit-open errors, bulkhead
// rejections and everything else.
func Retryable(err error) bool { return retryableWith(err, defaultRetryableStatusCodes) }

func retryableWith(err error, codes []int) bool {
	if err == nil || neverRetried(err) || IsTimeout(err) {
		return false
	}
	if r, ok := errors.AsType[RetryableError](err); ok {
		return r.Retryable()
	}
	if s, ok := errors.AsType[statusError](err); ok {
		return slices.Contains(codes, s.StatusCode())
	}
	return false
}

type statusError interface {
	error
	StatusCode() int
}

type timeoutError interface {
	error
	Timeout() bool
}

// neverRetried reports the errors no policy retries.
func neverRetried(err error) bool {
	return errors.Is(err, context.Canceled) ||
		errors.Is(err, ErrValidation) ||
		errors.Is(err, mediator.ErrNoHandler) ||
		errors.Is(err, ErrCircuitOpen) ||
		errors.Is(err, ErrBulkheadFull)
}

// IsTransport reports whether err is a transport failure: the request most likely never
// reached a working server. That is a refused, reset or aborted connection, a broken pipe, an
// unreachable network or host, an unexpected EOF (a connection closed mid-response, or an HTTP
// client's EOF on a reused connection), or a DNS lookup that failed temporarily (a name that
// does not exist is not transient). Timeouts are IsTimeout's.
func IsTransport(err error) bool {
	if err == nil {
		return false
	}
	for _, errno := range transportErrnos {
		if errors.Is(err, errno) {
			return true
		}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	if errors.Is(err, io.EOF) {
		if _, ok := errors.AsType[*url.Error](err); ok {
			return true
		}
		if _, ok := errors.AsType[*net.OpError](err); ok {
			return true
		}
	}
	if d, ok := errors.AsType[*net.DNSError](err); ok {
		return d.IsTemporary || d.IsTimeout
	}
	return false
}

var transportErrnos = []error{
	syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
	syscall.ENETUNREACH, syscall.EHOSTUNREACH, syscall.ENETDOWN,
}

// IsTimeout reports whether err is a timeout: a *TimeoutError, context.DeadlineExceeded, or an
// error with a Timeout() bool method returning true (as net.Error has).
func IsTimeout(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	t, ok := errors.AsType[timeoutError](err)
	return ok && t.Timeout()
}

// CountsAsFailure is the default breaker classifier: it reports whether err says the
// dependency behind a breaker is unhealthy. It reports false for nil, any error of a call whose
// caller gave up (ctx is done: clients report that in their own ways, such as a gRPC Canceled
// status or a driver's connection error, not always as context.Canceled), validation errors,
// mediator.ErrNoHandler, circuit-open errors, bulkhead rejections and errors carrying a 4xx
// status code other than 408 and 429 (the caller's fault, not the dependency's). Every other
// error counts, timeouts included: a deadline set inside the breaker by the Timeout behavior is
// not the caller's.
func CountsAsFailure(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	if errors.Is(err, ErrValidation) || errors.Is(err, mediator.ErrNoHandler) ||
		errors.Is(err, ErrCircuitOpen) || errors.Is(err, ErrBulkheadFull) {
		return false
	}
	if s, ok := errors.AsType[statusError](err); ok {
		c := s.StatusCode()
		if c >= 400 && c < 500 && c != 408 && c != 429 {
			return false
		}
	}
	return true
}
