package breaker

import (
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/internal/classify"
)

var (
	// ErrOpen reports a call refused by an open (or fully probed half-open) circuit breaker.
	// The handler was not called.
	ErrOpen = errors.New("breaker: circuit open")
	// ErrUnknown reports a breaker key the registry does not hold.
	ErrUnknown = errors.New("breaker: unknown breaker")
)

// OpenError is returned instead of calling the handler while the breaker for Key is open. It
// matches ErrOpen, and is a behaviors.Refusal: behaviors.Refused tells whether it refused a
// given request.
type OpenError struct {
	// Key is the breaker's key.
	Key string
	// Remaining is the time until the breaker may let a probe through: the rest of the open
	// duration. For a half-open breaker whose probe slots are all taken it is 0, as OpenFor
	// reports: the probes may decide at any moment, usually long before the probe timeout, so
	// a caller that waits should look again soon rather than wait out the timeout.
	Remaining time.Duration

	req any // the request refused, when the behavior refused it; see Request
}

// Error names the key and the remaining open time, rounded as a person reads a wait (whole
// seconds from 10 s, tenths from 1 s, milliseconds below): a wall clock's remainder to the
// nanosecond says nothing more. RetryAfter gives the exact time.
func (e *OpenError) Error() string {
	return fmt.Sprintf("breaker: circuit open for %q (probe in %s)", e.Key, readable(e.Remaining))
}

// readable rounds d for a message.
func readable(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(time.Millisecond)
	}
	return d
}

// Is reports whether target is ErrOpen.
func (e *OpenError) Is(target error) bool { return target == ErrOpen }

// RetryAfter returns Remaining: a caller that waits is best served waiting that long.
func (e *OpenError) RetryAfter() time.Duration { return e.Remaining }

// Retryable reports false: a call refused by an open breaker is retried only by a retry policy
// that waits for the breaker, never by behaviors.Retryable.
func (e *OpenError) Retryable() bool { return false }

// Refusal implements behaviors.Refusal: By "breaker", the breaker's Key, and the request the
// breaker behavior refused (nil for a refusal of Registry.Gate, and for an OpenError made by
// hand).
func (e *OpenError) Refusal() behaviors.RefusalInfo {
	return behaviors.RefusalInfo{By: "breaker", Key: e.Key, Request: e.req}
}

// ErrTripped reports a call whose own counted failure opened its circuit breaker: the
// failure that reached FailureThreshold or FailureRate, or a probe's failure that opened a
// half-open breaker again. The handler ran and failed; the calls after it are refused until
// the breaker lets a probe through, so retrying at once is pointless. It is matched by
// *TrippedError, never by a refusal: a tripped call is a failure, not a refusal, and
// does not match ErrOpen.
var ErrTripped = classify.ErrTripped

// TrippedError is returned by the breaker Behavior, in place of the handler's
// error, for a call whose own counted failure opened the breaker. It matches ErrTripped
// (not ErrOpen: the handler did run) and unwraps to the handler's error, so errors.Is
// and errors.As reach that error through it. Only the call that opened the breaker gets one;
// the calls refused after it get an *OpenError. Code that uses Registry.Gate
// directly does not: its handler's error is its own.
type TrippedError struct {
	// Key is the breaker's key.
	Key string
	// Remaining is the open duration the failure started: no call to Key gets through before
	// it has passed.
	Remaining time.Duration
	// Err is the handler's error.
	Err error
}

// Error returns the handler's error followed by a note that the circuit of Key opened, and
// for how long.
func (e *TrippedError) Error() string {
	return fmt.Sprintf("%v (circuit %q opened for %s)", e.Err, e.Key, e.Remaining)
}

// Is reports whether target is ErrTripped.
func (e *TrippedError) Is(target error) bool { return target == ErrTripped }

// Unwrap returns the handler's error.
func (e *TrippedError) Unwrap() error { return e.Err }

// RetryAfter returns Remaining, or the handler's own Retry-After hint when that is longer: no
// call gets through before then, so a caller that waits is best served waiting that long.
func (e *TrippedError) RetryAfter() time.Duration {
	return max(e.Remaining, behaviors.RetryAfter(e.Err))
}
