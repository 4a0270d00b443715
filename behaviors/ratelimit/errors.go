package ratelimit

import (
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
)

// ErrLimited reports a call refused because its rate limit had no permit for it in time.
var ErrLimited = errors.New("ratelimit: limited")

// LimitedError reports a call refused by a rate limiter. It matches ErrLimited and is a
// behaviors.Refusal (By "rate-limit"): the call did not happen, so a breaker does not count it
// and a durable queue charges no attempt for it.
type LimitedError struct {
	// Key is the limit's key.
	Key string
	// Rate is the limit, in permits a second (the instance's share while a fleet's store is
	// away).
	Rate float64
	// Wait is how long until the next permit: the error's RetryAfter.
	Wait time.Duration

	req any // the request refused; see Refusal
}

// Error names the key, the rate and the wait, to the millisecond (to the microsecond under
// one): the text is read by people, in logs and on an item's last error; RetryAfter is exact.
func (e *LimitedError) Error() string {
	return fmt.Sprintf("rate limit: %q over %g per second (next permit in %v)", e.Key, e.Rate, readable(e.Wait))
}

// readable is d rounded to the millisecond, or to the microsecond when under one.
func readable(d time.Duration) time.Duration {
	if d < time.Millisecond && d > -time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

// Is reports whether target is ErrLimited.
func (e *LimitedError) Is(target error) bool { return target == ErrLimited }

// Retryable reports false: at once, the limit still has no permit. RetryAfter says when it
// has.
func (e *LimitedError) Retryable() bool { return false }

// RetryAfter is the wait until the next permit.
func (e *LimitedError) RetryAfter() time.Duration { return e.Wait }

// Refusal implements behaviors.Refusal: By "rate-limit", the limit's Key, and the request it
// refused (nil for a LimitedError made by hand).
func (e *LimitedError) Refusal() behaviors.RefusalInfo {
	return behaviors.RefusalInfo{By: "rate-limit", Key: e.Key, Request: e.req}
}
