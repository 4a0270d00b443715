// Package retry holds the retry behavior of switchboard: it calls the rest of a pipeline again
// when it fails with an error worth another attempt, waiting between attempts.
//
// A Policy says how often and how patiently; policies come in layers merged field by field,
// later winning: DefaultPolicy, the behavior's Config.Policy, the policy of the request's key
// (Config.Key and Config.KeyPolicy) and the per-request override of WithOverride. Retries are
// opt-in: DefaultPolicy makes one attempt. Policy.Retries is the one classification of the
// module (the durable queue decides with it too), Policy.Delay the one delay formula and
// Policy.Validate the one validation.
//
// The behavior sits in mediator.StageDefault at behaviors.RetryOrder, outside the circuit
// breaker (package breaker), so every attempt is gated and counted, and a failure that opens
// the breaker ends the retries at once. Its success path allocates nothing: no policy merge,
// no backoff and no timer until a call fails. Attempt tells a handler which attempt it runs.
//
// Config.Budget bounds the retries of a dependency beside those of one call: a retry budget
// (package budget) that counts the calls and allows retries up to a ratio of them. A retry it
// refuses is not made, and the call ends with the last attempt's error.
//
// A call attempted more than once ends in an *ExhaustedError (matching ErrExhausted) that
// unwraps to the last attempt's error. The caller's cancellation is never retried.
package retry
