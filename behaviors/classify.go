package behaviors

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"syscall"

	"github.com/switchboard-go/switchboard/behaviors/internal/classify"
	"github.com/switchboard-go/switchboard/mediator"
)

// Classifier decides about an error: whether retry tries again, whether a breaker counts it as
// a failure, whether a fallback answers it. Every field of the behaviors that decides about an
// error is a Classifier named Classifier. Retryable is one.
type Classifier func(err error) bool

// Retryable is the default retry classifier. It reports true for errors that declare
// themselves retryable (a Retryable() bool method returning true) and for errors carrying
// status code 429, 502, 503 or 504 (a StatusCode() int method). It reports false for nil,
// context.Canceled, context.DeadlineExceeded and other timeouts (the retry policy's
// RetryOnTimeout decides those), mediator.ErrNoHandler, errors that declare themselves not
// retryable (validation errors, circuit-open errors and bulkhead rejections all do) and
// everything else.
func Retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, mediator.ErrNoHandler) || IsTimeout(err) {
		return false
	}
	return classify.RetryableWith(err, classify.RetryableStatusCodes)
}

// IsClientError reports whether err says that the request itself is wrong, the caller's to
// fix and no failure of the dependency: a validation error (validation.ErrInvalid, which a
// handler may return for its own input checks too) or an error carrying a 4xx status code
// (StatusCoder) other than 408 Request Timeout and 429 Too Many Requests, which say the server
// ran out of time or asks for it. A callee's 404, 409 or 422 is one; give an error type of your
// own a StatusCode method to say the same (a domain "not found" returning 404). No retry
// changes such an answer, a breaker does not count it (breaker.CountsAsFailure), and the
// observers report it with the outcome OutcomeClientError.
func IsClientError(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, classify.ErrInvalid) {
		return true
	}
	if s, ok := errors.AsType[classify.StatusError](err); ok {
		c := s.StatusCode()
		return c >= 400 && c < 500 && c != 408 && c != 429
	}
	return false
}

type timeoutError interface {
	error
	Timeout() bool
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

// IsTimeout reports whether err is a timeout: context.DeadlineExceeded, or an error with a
// Timeout() bool method returning true, as net.Error has and as the timeout behavior's
// *timeout.ExceededError and timeout.ErrExceeded have.
func IsTimeout(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	t, ok := errors.AsType[timeoutError](err)
	return ok && t.Timeout()
}

// Deferring is implemented by errors that mean the work was accepted for later rather than
// failed, such as the durable package's *DeferredError. The fallback behavior passes them on
// unchanged: the caller learns that the work was taken (and its id) instead of getting a
// degraded answer in its place.
type Deferring interface {
	Deferred() bool
}
