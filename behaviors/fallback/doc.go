// Package fallback holds the fallback behavior of switchboard: the outermost resilience
// behavior, it turns the final failure of a call (an open circuit included) into a degraded
// response. New makes one for every request type whose response accepts its result, checked at
// Build; NewFor makes one for a single request type (or interface). It never answers the
// caller's own cancellation, deferred work, or a dispatch marked mediator.Unattended.
//
// A fallback may decline a failure per request: Config.When sees the request and the error
// before the function runs, and a function with no answer after all (a cache miss) returns
// ErrDecline; either way the caller gets the original error unchanged. Config.OnFallback hears,
// after the function ran, what the fallback did with each failure it handled, as a Verdict:
// Answered, Declined, Failed or Cancelled.
package fallback
