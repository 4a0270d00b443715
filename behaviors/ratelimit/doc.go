// Package ratelimit holds the rate limiter behavior of switchboard: per key (a request type by
// default), a smooth limiter (GCRA: Config.Rate permits a second, up to Config.Burst at once
// after a quiet spell), or at the rate and burst of the key's own (Config.Limits, or
// Config.LimitFor for keys known at run time). A call that finds no permit waits for one up to Config.MaxWait, or is
// refused with a *LimitedError (matching ErrLimited), a behaviors.Refusal whose RetryAfter is
// the wait until the next permit: retry does not retry it, a breaker does not count it, and a
// durable queue parks the item until then with no attempt charged.
//
// With a Config.Store the limit is the fleet's: the instances lease permits from the store in
// small batches, in the background, and hand them out locally, so that no request waits on the
// store (see PermitStore; durable.NewRateLimitStore keeps them in a queue's database).
package ratelimit
