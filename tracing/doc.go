// Package tracing traces the dispatches of a mediator with OpenTelemetry, and carries their
// trace context with the work the durable queue defers, so that one trace shows a request, its
// deferral and the dispatch that finally runs it.
//
// The Behavior (New) starts one span per dispatch, named after the request type
// ("billing.SendInvoice"), in mediator.StagePre at behaviors.TracingOrder: outermost, so the
// span covers every behavior and the handler, and everything inside it (logging, the handler,
// the requests the handler sends) sees it. A failure sets the span's status to Error and
// records the error; the caller's own cancellation is recorded as such (the attribute
// switchboard.outcome = "cancelled" and a switchboard.cancelled event), not as an error, since
// a caller that gave up says nothing about the service. Work the durable deferral took for
// later (a *durable.DeferredError, recognised by its methods, so that tracing does not import
// durable) is not an error either: the span gets outcome "deferred" and a switchboard.deferred
// event naming the item.
//
// The resilience behaviors tell the span what happened inside: OnRetry is a ready
// retry.Config.OnRetry that adds a switchboard.retry event per retry (attempt, delay, error),
// OnFallback a ready fallback.Config.OnFallback that adds a switchboard.fallback event saying
// what the fallback did (answered, declined, failed, cancelled), and a
// circuit breaker's refusal (a *breaker.OpenError met by a retry, answered by a fallback,
// deferred, or returned) adds a switchboard.breaker.refused event.
//
// Propagator makes the ItemPropagator, a durable.Propagator, that stores a deferred item's
// trace context as its metadata (W3C Trace Context and Baggage by default). The dispatch of
// the item, by a scheduler or durabletest.Work, runs with that context, so its span is a child
// of the span that deferred or enqueued it, in the same trace, and carries the item's id,
// attempt and dispatching instance. The package imports no durable code: a traced program
// without a queue links none, nor any database driver. See docs/observability.md.
package tracing
