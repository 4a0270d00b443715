// Package fallback holds the fallback behavior of switchboard: the outermost resilience
// behavior, it turns the final failure of a call (an open circuit included) into a degraded
// response. New makes one for every request type whose response accepts its result, checked at
// Build; NewFor makes one for a single request type (or interface). It never answers the
// caller's own cancellation, deferred work, or a dispatch marked mediator.Unattended.
package fallback
