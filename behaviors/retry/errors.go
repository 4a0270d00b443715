package retry

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/budget"
)

// ErrExhausted reports a call that failed after more than one attempt, or whose retries a
// server's Retry-After hint, the policy's MaxAge or a retry budget cut short.
var ErrExhausted = errors.New("retry: retries exhausted")

// ExhaustedError is the final error of a call that was attempted more than once, or whose
// retries a server's Retry-After hint (Hint), the policy's MaxAge or a retry budget (Budget)
// cut short. It matches ErrExhausted and unwraps to
// the last attempt's error, so errors.Is and errors.As reach the handler's error through it.
// When the last attempt was refused before reaching the handler (an open circuit breaker, a
// full bulkhead), the error of the last attempt that did reach it stays reachable through
// errors.Is and errors.As too.
type ExhaustedError struct {
	// Attempts is how many attempts were made, the first included.
	Attempts int
	// Err is the last attempt's error.
	Err error
	// Hint is the server's Retry-After hint that ended the retries although the policy allowed
	// more attempts: it asked for a longer wait than MaxDelay allows. Zero otherwise.
	Hint time.Duration
	// MaxDelay is the policy's MaxDelay when Hint ended the retries.
	MaxDelay time.Duration
	// MaxAge is the policy's MaxAge when it ended the retries although the policy allowed more
	// attempts: the next one would have started more than MaxAge after the first. Zero
	// otherwise.
	MaxAge time.Duration
	// Budget is the retry budget's refusal when the budget ended the retries although the
	// policy allowed more attempts (its Err is the last attempt's error); nil otherwise. The
	// error then also matches budget.ErrSpent, and errors.As finds the *budget.SpentError.
	// It is not a refusal of the call: the attempts made reached the handler (or were refused
	// by what refused them), and the call says what they did.
	Budget *budget.SpentError

	handlerErr error // the last error from an attempt that was not refused; nil when Err is one
}

// Error says how many attempts were made and what the last one returned, and why the retries
// stopped early when a Retry-After hint or MaxAge stopped them.
func (e *ExhaustedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "retry: failed after %d attempt", e.Attempts)
	if e.Attempts != 1 {
		b.WriteByte('s')
	}
	if e.Hint > 0 {
		fmt.Fprintf(&b, " (retries stopped: the server asked to wait %s, more than MaxDelay %s)", e.Hint, e.MaxDelay)
	}
	if e.MaxAge > 0 {
		fmt.Fprintf(&b, " (retries stopped: the next attempt would start more than MaxAge %s after the first failure)", e.MaxAge)
	}
	if s := e.Budget; s != nil {
		fmt.Fprintf(&b, " (retries stopped: retry budget %q exceeded, %d retries of %d calls in %s)", s.Key, s.Retries, s.Calls, s.Window)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	if e.handlerErr != nil {
		fmt.Fprintf(&b, " (last handler error: %v)", e.handlerErr)
	}
	return b.String()
}

// RetryAfter returns how long a caller that tries again later (a durable queue) should wait at
// least: the longest of Hint when a server's hint ended the retries, the budget's wait when a
// budget did, and the hint the last attempt's error carries (a server's Retry-After, the open
// time of a breaker it tripped or met); else 0.
func (e *ExhaustedError) RetryAfter() time.Duration {
	d := max(e.Hint, behaviors.RetryAfter(e.Err), behaviors.RetryAfter(e.handlerErr))
	if e.Budget != nil {
		d = max(d, e.Budget.Wait)
	}
	return d
}

// Is reports whether target is ErrExhausted, budget.ErrSpent when a budget ended the
// retries, or matches the last handler error of a call whose last attempt was refused.
func (e *ExhaustedError) Is(target error) bool {
	return target == ErrExhausted || (e.Budget != nil && target == budget.ErrSpent) ||
		(e.handlerErr != nil && errors.Is(e.handlerErr, target))
}

// As finds Budget for a **budget.SpentError target, and target in the last handler error of a
// call whose last attempt was refused.
func (e *ExhaustedError) As(target any) bool {
	if t, ok := target.(**budget.SpentError); ok && e.Budget != nil {
		*t = e.Budget
		return true
	}
	return e.handlerErr != nil && errors.As(e.handlerErr, target)
}

// HandlerReached reports whether an attempt reached the handler although the last one was
// refused (an open breaker, a full bulkhead): the call was made and failed, so observers and
// the durable scheduler report it as a failure and an attempt, not as a refusal.
func (e *ExhaustedError) HandlerReached() bool { return e.handlerErr != nil }

// Unwrap returns the last attempt's error.
func (e *ExhaustedError) Unwrap() error { return e.Err }
