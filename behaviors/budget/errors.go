package budget

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
)

// ErrSpent reports a retry that a retry budget refused.
var ErrSpent = errors.New("retry budget: spent")

// SpentError reports a retry (or a hedge, or a durable re-dispatch) that a retry budget
// refused, because its key's retries already reached the budget's allowance over the window.
// It matches ErrSpent and is a behaviors.Refusal, By "retry-budget": the retry it refuses
// did not happen, so a breaker does not count it and retry does not retry it. RetryAfter says
// when the window will have room for a retry again.
//
// A behavior that refused to repeat a failed call sets Err to that failure, and Unwrap returns
// it, so errors.Is and errors.As reach the failure through the refusal.
type SpentError struct {
	// Key is the budget's key of the refused retry.
	Key string
	// Calls and Retries are the key's calls and retries in the window when the retry was
	// refused.
	Calls, Retries int
	// Allowed is the number of retries the window allowed: Ratio × Calls + Floor × Window.
	Allowed float64
	// Window is the budget's window.
	Window time.Duration
	// Wait is how long until the window has room for one more retry, at the key's current
	// calls; RetryAfter returns it.
	Wait time.Duration
	// Err is the failure the refused retry would have repeated; nil when the refusal was
	// asked for without one.
	Err error

	req any // the request refused; see Refusal
}

// Error names the key, the window's counts and, when set, the failure not retried.
func (e *SpentError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "retry budget: %q exceeded (%d retries of %d calls in %s, %.4g allowed)",
		e.Key, e.Retries, e.Calls, e.Window, e.Allowed)
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// Is reports whether target is ErrSpent.
func (e *SpentError) Is(target error) bool { return target == ErrSpent }

// Unwrap returns Err, the failure the refused retry would have repeated.
func (e *SpentError) Unwrap() error { return e.Err }

// Retryable reports false: an exceeded budget says that retrying now adds load to a dependency
// that is already failing.
func (e *SpentError) Retryable() bool { return false }

// RetryAfter returns Wait: a caller that tries again later (a durable queue) waits at least
// that long.
func (e *SpentError) RetryAfter() time.Duration { return e.Wait }

// Refusal implements behaviors.Refusal: By "retry-budget", the budget's Key, and the request
// whose retry it refused (nil for a SpentError made by hand).
func (e *SpentError) Refusal() behaviors.RefusalInfo {
	return behaviors.RefusalInfo{By: By, Key: e.Key, Request: e.req}
}

// By is the RefusalInfo.By of a budget's refusals.
const By = "retry-budget"
