package behaviors

import (
	"errors"
	"fmt"
	"time"
)

// ErrCircuitTripped reports a call whose own counted failure opened its circuit breaker: the
// failure that reached FailureThreshold or FailureRate, or a probe's failure that opened a
// half-open breaker again. The handler ran and failed; the calls after it are refused until
// the breaker lets a probe through, so retrying at once is pointless. It is matched by
// *CircuitTrippedError, never by a refusal: a tripped call is a failure, not a refusal, and
// does not match ErrCircuitOpen.
var ErrCircuitTripped = errors.New("behaviors: circuit tripped")

// CircuitTrippedError is returned by the CircuitBreaker behavior, in place of the handler's
// error, for a call whose own counted failure opened the breaker. It matches ErrCircuitTripped
// (not ErrCircuitOpen: the handler did run) and unwraps to the handler's error, so errors.Is
// and errors.As reach that error through it. Only the call that opened the breaker gets one;
// the calls refused after it get a *CircuitOpenError. Code that uses BreakerRegistry.Gate
// directly does not: its handler's error is its own.
type CircuitTrippedError struct {
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
func (e *CircuitTrippedError) Error() string {
	return fmt.Sprintf("%v (circuit %q opened for %s)", e.Err, e.Key, e.Remaining)
}

// Is reports whether target is ErrCircuitTripped.
func (e *CircuitTrippedError) Is(target error) bool { return target == ErrCircuitTripped }

// Unwrap returns the handler's error.
func (e *CircuitTrippedError) Unwrap() error { return e.Err }

// RetryAfter returns Remaining, or the handler's own Retry-After hint when that is longer: no
// call gets through before then, so a caller that waits is best served waiting that long.
func (e *CircuitTrippedError) RetryAfter() time.Duration {
	return max(e.Remaining, RetryAfter(e.Err))
}
