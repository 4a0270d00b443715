// Package behaviors holds the built-in resilience behaviors of switchboard: retry, a per-key
// circuit breaker with its registry, fallback, timeout, bulkhead, validation and recover.
//
// Each behavior reports its own stage and order, so registering them in any order yields
//
//	recover (pre)  →  validation (pre)  →  fallback (30)  →  retry (50)  →  circuit breaker (60)
//	  →  timeout (70)  →  bulkhead (80)  →  handler
//
// Fallback is outermost so it sees the final failure (an open circuit included); the breaker
// is inside retry so every attempt is gated and counted; the timeout is inside retry, so it
// bounds each attempt. Move the timeout outside retry (an order below 50) to bound the whole
// call instead.
//
// The success path of fallback, retry and the breaker allocates nothing: retry creates no
// backoff and no timer until a call fails, and a successful call through a closed breaker
// costs a few atomic loads (its state before the call, its failure count after) and no lock
// and no clock reading. That holds while the registry's FailureRate is off: with it on, the
// rate window counts every call, so each successful call takes the breaker's lock and reads
// the clock once.
//
// Errors are values: sentinels (ErrCircuitOpen, ErrCircuitTripped, ErrTimeout,
// ErrBulkheadFull, ErrValidation, ErrRetriesExhausted, ErrUnknownBreaker) matched by typed
// errors (*CircuitOpenError, *CircuitTrippedError, ...) with errors.Is and errors.As. A
// caller's own cancellation is never retried, never counted by a breaker and never replaced
// by a fallback.
//
// A dispatch marked mediator.Unattended (a scheduler running stored work) is never answered by
// a fallback, and one marked mediator.SingleAttempt is attempted once; marks bind to one
// request, so the requests its handler sends run under their own policies.
//
// docs/resilience.md explains the ordering rules and lists every default with the reason for
// it.
package behaviors
