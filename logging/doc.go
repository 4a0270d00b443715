// Package logging holds switchboard's logging behavior: one zap entry per call it wraps, with
// the request type, the retry attempt, the duration, the outcome, the error and, for a failure
// refused or tripped by a circuit breaker (or any call when Config.Breakers is set), the
// breaker's key.
//
//	m.Use(logging.New(logging.Config{Logger: logger}))
//
// # Placement
//
// Its default place is mediator.StageDefault at Order (35): inside fallback, outside the
// durable deferral, the total timeout, retry and the breaker. There it sees each call's final
// outcome once: a failure retry gave up on is logged before a fallback answers for it, a call
// the deferral parked is logged as deferred (at info: the work was accepted, nobody need act),
// and a success after two failed attempts is one success line with attempt 1 (retry is inside
// it). Place it inside retry (mediator.WithOrder between
// behaviors.RetryOrder and behaviors.BreakerOrder, e.g. 55) to log every attempt instead, with
// its attempt number; a refusal by an open breaker is then logged for each attempt too.
//
// # Fields
//
// Every entry has request (the request type, as behaviors.RequestName names it: the metrics'
// request label and the span name are the same), attempt (retry.Attempt; outside retry, the
// number of the last attempt a *retry.ExhaustedError reports), duration, outcome (one of the
// module's outcomes, behaviors.OutcomeOf: success, failure, cancelled, rejected, deferred —
// the values of the metrics' outcome label and the spans' switchboard.outcome) and, unless it
// succeeded, error. breaker is the circuit breaker's key: from the error of a call an open
// breaker refused or whose failure tripped it, and for every call when Config.Breakers is set.
//
// # Levels
//
// A success is logged at Config.Success (default debug), a failure at Config.Failure (default
// error; warn is the usual choice inside retry) and a call whose caller cancelled it or whose
// deadline passed at Config.Cancelled (default debug), with outcome "cancelled": the caller's
// choice, not a failure. A call the durable deferral stored for later is logged at
// Config.Deferred (default info), with outcome "deferred": accepted work, not an error. A
// refusal by the request's own breaker or bulkhead is a failure with outcome "rejected". Each entry is checked with zap's Logger.Check before any field is
// built, so a success at a disabled level allocates nothing.
package logging
