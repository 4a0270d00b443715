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
// request label and the span name are the same), attempt (retry.AttemptNumber; outside retry, the
// number of the last attempt a *retry.ExhaustedError reports), duration, outcome (one of the
// module's outcomes, behaviors.OutcomeOf: succeeded, failed, client_error, cancelled, refused,
// deferred — the values of the metrics' outcome label and the spans' switchboard.outcome) and, unless it
// succeeded, error (the error's text: an error that prints its own stack with %+v does not put
// it on the line). breaker is the circuit breaker's key: from the error of a call an open
// breaker refused or whose failure tripped it, and, when Config.Breakers is set, for every call
// of a request type whose pipeline has a breaker.
// When the call's context carries a valid OpenTelemetry span context (the tracing behavior's
// span, or the caller's), trace_id and span_id name it. Config.Fields adds the application's
// fields (an event id, a tenant) to every entry written.
//
// # Levels
//
// Each outcome has a level and a message of its own, so that error means a failure:
//
//	outcome       level (Config field, default)  message
//	succeeded     Success, debug                 switchboard: request handled
//	failed        Failure, error                 switchboard: request failed
//	client_error  ClientError, warn              switchboard: request invalid
//	refused       Refusal, warn                  switchboard: request refused
//	deferred      Deferred, info                 switchboard: request deferred
//	cancelled     Cancelled, debug               switchboard: request cancelled
//
// A failure is an error the other outcomes do not name (warn is the usual choice for Failure
// inside retry). A client error is the caller's (a validation error, a callee's 4xx other than
// 408 and 429: behaviors.IsClientError). A refusal is any refusal the caller got
// (behaviors.IsRefusal): its own breaker's, bulkhead's or rate limit's, or one its handler
// passed on, a rate limit further down shedding load; at most one entry per key every
// Config.RefusalEvery (default 10 s) is written, the next entry of the key counting the
// refusals held back in suppressed (a passed-on refusal is limited apart from the refused
// request's own entries, by its request type and the refusal's key). A deferred call was
// stored for later by the durable deferral: accepted work. A cancelled call's caller
// cancelled it or its deadline passed: the caller's choice, not a failure. Each entry is
// checked with zap's Logger.Check before any field is built.
//
// # Inner requests
//
// A request sent with the context of a request that is in flight through the behavior (by its
// handler, or by the handlers of the notifications it publishes) is an inner request of it:
// the behavior puts the outer request's scope on the context it passes on, and the inner
// request's behavior finds it there. An inner entry above Config.Inner (default debug) is held
// until the outer request ends, then written, with the time it happened and outer_outcome
// naming the outer request's outcome:
//
//   - at Config.Inner when the outer request succeeded or was deferred: what failed inside it
//     was dealt with (the handler coped, a fallback answered the inner call, the deferral stored
//     the work), and the outer request's own entry is the one line at an operator's level;
//   - at its own level when the outer request ended otherwise (failed, client_error, refused,
//     cancelled): it then explains what went wrong.
//
// Inner entries at or below Config.Inner are written at once, as nothing is left to decide. A
// request inside an inner request is an inner request of the same outer one. At most
// Config.MaxInner (default 16) entries are held per outer request; the outer entry counts the
// rest in inner_dropped. A request sent after its outer request ended (by a goroutine the
// handler left behind) is written at once, at its own level, and so are the held entries when
// a panic passes through the behavior (a behavior inside it panicked).
//
// A fallback that answers the outer request itself, outside the behavior, is not seen from
// inside: the outer entry is the failure the fallback answered. Place the behavior outside
// fallback (mediator.WithOrder(behaviors.FallbackOrder - 1)) to log the answer instead.
//
// # Stack traces
//
// The behavior writes through a copy of Config.Logger without its AddStacktrace option, so
// that zap's production configuration (a stack from error up) does not put the behavior's own
// stack, which says nothing of the failure, on every error line. An entry whose error is a
// panic (*mediator.PanicError) carries the panic's stack. Config.KeepStacktraces keeps the
// logger's option.
//
// # Cost
//
// A success below the logger's level costs two clock readings, a level check and the outer
// request's scope: one allocation of 48 bytes, the context in which inner requests find it.
// Nothing else is built for an entry whose level is disabled, and the fields hooks run only
// for entries that are written.
package logging
