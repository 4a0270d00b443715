// Package behaviors is the root of switchboard's built-in resilience behaviors; each policy
// lives in its own package beneath it:
//
//	recovery    panics of behaviors become errors
//	validation  requests check themselves before the pipeline runs
//	fallback    a degraded answer for the final failure
//	retry       more attempts, with backoff, under layered policies
//	breaker     a circuit breaker per key, in a registry
//	timeout     a deadline per attempt or for the whole call
//	bulkhead    a bound on concurrent calls per key
//
// This package holds what they all share: key functions (KeyFunc, TypeKey), error
// classification (Classifier, Retryable, IsTimeout, IsTransport, RetryAfter, Refused and the
// interfaces errors implement to be classified: StatusCoder, RetryableError, RetryAfterHinter,
// Deferring), the Switch of layered policies, the Clock, and the default orders of every
// built-in behavior in one table (see RecoverOrder). Registering the behaviors in any order
// yields
//
//	tracing (pre)  →  recovery (pre)  →  validation (pre)  →  fallback (30)  →  durable deferral (40)
//	  →  total timeout (49)  →  retry (50)  →  breaker (60)  →  timeout (70)  →  bulkhead (80)
//	  →  handler
//
// (tracing is the tracing package's behavior, the durable deferral the durable package's, and
// the total timeout a timeout with Config.Total; each appears only when registered)
// Fallback is outermost so it sees the final failure (an open circuit included); the breaker
// is inside retry so every attempt is gated and counted; the timeout is inside retry, so it
// bounds each attempt (timeout.Config.Total moves it outside, to bound the whole call).
//
// The success path of fallback, retry and the breaker allocates nothing: retry creates no
// backoff and no timer until a call fails, and a successful call through a closed breaker
// costs a few atomic loads and no lock and no clock reading (while the breaker's FailureRate
// is off).
//
// Errors are values: each package pairs a sentinel with a typed error that matches it with
// errors.Is (breaker.ErrOpen and *breaker.OpenError, timeout.ErrExceeded and
// *timeout.ExceededError, ...). A caller's own cancellation is never retried, never counted by
// a breaker and never replaced by a fallback. A dispatch marked mediator.Unattended is never
// answered by a fallback, and one marked mediator.SingleAttempt is attempted once.
//
// # Hooks
//
// Observers of every behavior attach once, to the mediator (mediator.Mediator.Observe): each
// behavior bound into its pipelines calls those implementing its observer interface
// (retry.Observer, fallback.Observer, breaker.Observer and RefusalObserver, ratelimit.Observer
// and PermitObserver, budget.Observer, hedge.Observer), and a durable queue started with the
// mediator calls its own (durable.ClaimObserver, SettledObserver, DeadObserver). Logging,
// metrics and tracing each attach with one line:
//
//	m.Observe(lg)                 // the logging behavior
//	m.Observe(rec)                // a metrics.Recorder
//	m.Observe(tracing.SpanEvents{})
//
// A component shared by several pipelines (a breaker registry, a retry budget) calls each
// observer once (ObserverSet). Every behavior also has hooks of its own, for what concerns it
// alone: a slice of functions, empty by default (retry.Config.OnRetry,
// fallback.Config.OnFallback, breaker.Config.OnRefusal, OnStateChange, OnLateProbe and
// OnStoreError, durable.Config.OnClaim, durable.Config.OnDead, mediator.Config.ErrorSink),
// called before the mediator's observers.
//
// Observers run one after another in the order listed (registration order), on the goroutine
// the hook names, each after the one before it returned; a hook with none costs a length
// check. The slice is copied when the behavior or registry is made, so changing it later
// changes nothing. A panicking observer of a call's hook (retry, fallback, breaker) is not
// recovered: the panic goes up the call as a panic of the handler would (a recovery behavior
// outside it turns it into an error), and the observers after it are not called. The hooks of
// the durable queue's own goroutines (OnClaim, OnDead) and the mediator's ErrorSink, which
// have no caller to tell, recover an observer's panic, log it, and call the next one.
//
// docs/resilience.md explains the ordering rules and lists every default with the reason for
// it.
package behaviors
