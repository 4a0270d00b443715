// Package hedge holds the hedging behavior of switchboard: when a call has not succeeded
// after a delay, it sends another attempt of the same request alongside the first, and the
// first attempt to succeed wins; the others are cancelled and their results discarded.
// Hedging trades a few extra requests for a shorter slow tail: a call is slow only when every
// attempt is.
//
// The delay is fixed (Config.Delay) or a percentile of the key's recent successful attempts
// (Config.Percentile), measured by a bounded latency sketch per key that records without a
// lock or an allocation. Config.MaxHedges bounds the hedges of a call, and Config.Budget makes
// each hedge ask a retry budget (package budget) first, so that retries and hedges together
// stay within the budget's ratio.
//
// Only idempotent requests may be hedged: a hedged command runs twice, at once. Register the
// behavior for them alone, with mediator.ForInterface, mediator.ForRequest or mediator.When.
// The attempts of a call run at the same time with the same request pointer, so the handler
// must not modify the request.
//
// The behavior sits in mediator.StageDefault at behaviors.HedgeOrder, inside retry and outside
// the circuit breaker, the rate limiter and the per-attempt timeout: every attempt is gated
// and counted by the breaker, takes a permit of its own and has its own deadline. A failure
// of one attempt while another runs does not end the call; when every attempt that was sent
// has failed, the call fails with the primary attempt's error (the one the call would have had
// without hedging, which retry outside classifies as usual), unless a hedge panicked: a
// hedge runs on a goroutine of its own, so its panic becomes its error, a
// *mediator.PanicError, which the call then returns. The caller's cancellation ends
// the call with the context's error, and no hedge is sent after it. A dispatch marked
// mediator.SingleAttempt (the durable scheduler's) is one attempt: the behavior steps aside.
//
// A call that ends before its delay starts no goroutine and allocates only the primary's
// cancellable context: the primary attempt runs on the caller's goroutine, the hedge would be
// sent by a timer's callback that the call stops, and the state of such calls, their timer
// included, is reused. A call returns only after every attempt it sent has returned, so no
// goroutine outlives it: the handler must honour its context's cancellation, or a lost
// attempt delays the winner's answer.
package hedge
