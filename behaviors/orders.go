package behaviors

// The default orders of the built-in behaviors and of the mediator's exception behaviors. Stage
// always beats order; within a stage a lower order is outer. Registering them in any order
// gives this one pipeline:
//
//	stage    order  behavior                               defined as
//	pre      -2000  tracing                                TracingOrder
//	pre      -1001  metrics                                RecoverOrder - 1
//	pre      -1000  recovery                               RecoverOrder
//	pre        100  validation                             ValidationOrder
//	default     10  exception handlers                     mediator.ExceptionHandlerOrder
//	default     20  exception actions                      mediator.ExceptionActionOrder
//	default     30  fallback                               FallbackOrder
//	default     35  logging                                logging.Order (FallbackOrder + 5)
//	default     40  durable deferral                       DeferralOrder
//	default     49  total timeout (timeout.Config.Total)   RetryOrder - 1
//	default     50  retry                                  RetryOrder
//	default     55  hedge                                  HedgeOrder
//	default     60  circuit breaker                        BreakerOrder
//	default     65  rate limiter                           RateLimitOrder
//	default     70  timeout, per attempt                   TimeoutOrder
//	default     80  bulkhead                               BulkheadOrder
//	                handler
//
// Exception handlers and actions see the final error, after resilience has done what it can.
// Fallback is inside them and outside everything else, so it sees the final failure (an open
// circuit included). The durable deferral is inside fallback, so work it takes for later is
// not answered by a fallback, and outside retry, so it defers only what retry gave up on. The
// breaker is inside retry, so every attempt is gated and counted; hedging is between them, so
// every hedged attempt is gated and counted too; the rate limiter is inside the breaker, so a
// call the breaker refuses spends no permit, and outside the per-attempt timeout, so waiting for
// a permit does not use up the attempt's time; the timeout is inside the breaker, so a
// timed-out attempt is counted; the bulkhead is innermost, so a slot is held only while the
// handler runs.
const (
	// TracingOrder is the order of the tracing behavior (package tracing) within
	// mediator.StagePre: outside recovery, so its span covers the whole pipeline and records a
	// behavior's panic as the error recovery makes of it, and outside the context-population
	// behaviors, so they and everything inside see the span. It recovers nothing itself.
	TracingOrder = -2000
	// RecoverOrder is the order of the recovery behavior within mediator.StagePre: below every
	// other built-in order but TracingOrder (whose behavior cannot panic), so no panic of the
	// pipeline escapes Send.
	RecoverOrder = -1000
	// ValidationOrder is the order of the validation behavior within mediator.StagePre: after
	// the context-population behaviors at lower orders (authentication, locale), so validators
	// may use what they set.
	ValidationOrder = 100
	// FallbackOrder is the order of the fallback behavior within mediator.StageDefault:
	// outside retry, the breaker and the durable deferral, so it sees only the final failure.
	FallbackOrder = 30
	// DeferralOrder is the order of the durable package's deferral behavior within
	// mediator.StageDefault: inside fallback and outside retry, so it defers the work that
	// retry gave up on and no fallback answers for the work it deferred.
	DeferralOrder = 40
	// RetryOrder is the order of the retry behavior within mediator.StageDefault.
	RetryOrder = 50
	// HedgeOrder is the order of the hedging behavior within mediator.StageDefault: inside
	// retry, so a call whose attempts all failed is retried as a whole, and outside the
	// circuit breaker, so every hedged attempt is gated and counted by the breaker, takes a
	// rate-limit permit and runs under its own per-attempt timeout.
	HedgeOrder = 55
	// BreakerOrder is the order of the circuit breaker behavior within mediator.StageDefault:
	// inside retry, so every attempt is gated and counted.
	BreakerOrder = 60
	// RateLimitOrder is the order of the rate limiter behavior within mediator.StageDefault:
	// inside the breaker, so a call an open breaker refuses spends no permit, and outside the
	// per-attempt timeout, so waiting for a permit does not eat the attempt's time.
	RateLimitOrder = 65
	// TimeoutOrder is the order of a per-attempt timeout within mediator.StageDefault: inside
	// retry and the breaker, so it bounds each attempt and the breaker counts a timed-out one.
	// A total timeout sits at RetryOrder - 1 instead, just outside retry.
	TimeoutOrder = 70
	// BulkheadOrder is the order of the bulkhead behavior within mediator.StageDefault:
	// innermost, so a slot is held only while the handler runs.
	BulkheadOrder = 80
)
