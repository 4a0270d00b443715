package httpcall

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ErrStatus reports a response whose status code says the call failed (see FromResponse).
var ErrStatus = errors.New("httpcall: error status")

// StatusError is a response turned into an error by FromResponse: its status code says the
// server failed (5xx), asks for time (429), or gave up waiting for the request (408). It
// matches ErrStatus. It implements behaviors.StatusCoder and behaviors.RetryAfterHinter, so the
// default classifiers understand it without configuration: retry retries 429, 502, 503 and
// 504 and waits at least as long as the server's Retry-After asks; a breaker counts every
// StatusError as a failure of the server behind it.
type StatusError struct {
	// Method is the request's method, such as "GET".
	Method string
	// URL is the request's URL without its user information, query and fragment: error
	// messages end up in logs, and those parts carry passwords, API keys and signatures.
	URL string
	// Code is the response's status code, such as 503.
	Code int
	// Status is the response's status line, such as "503 Service Unavailable".
	Status string
	// Hint is the wait the response's Retry-After header asks for (see RetryAfter); zero when
	// it has none, or one that cannot be parsed.
	Hint time.Duration
	// Body is the beginning of the response's body, at most 4 KiB of it: enough for an error
	// document, such as a problem+json, without holding a large page in memory. It is not part
	// of the message, which must not carry what a server chose to put there into logs.
	Body []byte
}

// Error names the request and the status, such as
// "httpcall: GET https://api.example.com/quotes: 503 Service Unavailable".
func (e *StatusError) Error() string {
	status := e.Status
	if status == "" {
		status = strconv.Itoa(e.Code)
	}
	return fmt.Sprintf("httpcall: %s %s: %s", e.Method, e.URL, status)
}

// Is reports whether target is ErrStatus.
func (e *StatusError) Is(target error) bool { return target == ErrStatus }

// StatusCode returns Code: it implements behaviors.StatusCoder, which the retry and breaker
// classifiers read.
func (e *StatusError) StatusCode() int { return e.Code }

// RetryAfter returns Hint: it implements behaviors.RetryAfterHinter, so retry waits at least
// that long before the next attempt and the durable queue schedules the next try no earlier.
func (e *StatusError) RetryAfter() time.Duration { return e.Hint }

// bodyPrefix is how much of an error response's body a StatusError keeps; drainLimit is how
// much more is read and discarded so that the connection can be reused. A longer body is
// cut off with the connection, which is cheaper than reading it.
const (
	bodyPrefix = 4 << 10
	drainLimit = 64 << 10
)

// maxHint caps a Retry-After hint. A server that asks for more than a day says "not today" as
// well as it says anything, and a capped hint cannot overflow the arithmetic of the code that
// adds it to a time.
const maxHint = 24 * time.Hour

// FromResponse returns nil for a response whose status says the call worked or is the caller's
// business, and a *StatusError for one whose status says the server failed: 408 Request
// Timeout, 429 Too Many Requests and every 5xx. Other 4xx statuses stay responses: they are
// the caller's fault, no retry changes them, and a breaker does not count them; a 404 or a 409
// is an answer the caller reads. 1xx, 2xx and 3xx statuses are never errors.
//
// Bodies: a response turned into an error has had the beginning of its body read into
// StatusError.Body, the rest drained (up to 64 KiB, so the connection can be reused) and the
// body closed: the caller gets only the error and has nothing to close. A response for which
// FromResponse returns nil is untouched, and its body is the caller's to read and close, as
// always. A nil response returns nil.
func FromResponse(resp *http.Response) error {
	if resp == nil || !isErrorStatus(resp.StatusCode) {
		return nil
	}
	e := &StatusError{Code: resp.StatusCode, Status: resp.Status}
	if req := resp.Request; req != nil {
		e.Method = req.Method
		if e.Method == "" {
			e.Method = http.MethodGet
		}
		e.URL = redact(req.URL)
	}
	now := time.Now()
	if d, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
		now = d
	}
	e.Hint, _ = parseRetryAfter(resp.Header.Get("Retry-After"), now)
	if resp.Body != nil {
		e.Body, _ = io.ReadAll(io.LimitReader(resp.Body, bodyPrefix))
		if len(e.Body) == 0 {
			e.Body = nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
		_ = resp.Body.Close()
	}
	return e
}

// isErrorStatus reports the statuses FromResponse turns into errors.
func isErrorStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || (code >= 500 && code <= 599)
}

// redact returns u without user information, query and fragment.
func redact(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := url.URL{Scheme: u.Scheme, Opaque: u.Opaque, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return c.String()
}

// parseRetryAfter parses a Retry-After value, delta-seconds or an HTTP-date, into the wait it
// asks for, measured from now (the response's Date, when it has one, so that the clocks of
// server and client need not agree). A date in the past asks for no wait (0, true). A value
// that is neither (empty, negative, a fraction, any other text) is no hint (0, false). A wait
// longer than maxHint, and a number too large to represent, is maxHint.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			var ne *strconv.NumError
			if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
				return maxHint, true
			}
			return 0, false
		}
		if n > uint64(maxHint/time.Second) {
			return maxHint, true
		}
		return time.Duration(n) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := at.Sub(now)
	switch {
	case d < 0:
		return 0, true
	case d > maxHint:
		return maxHint, true
	}
	return d, true
}
