// Package timeout holds the timeout behavior of switchboard: a deadline on the rest of a
// pipeline, per attempt (inside retry, the default) or for the whole call (Config.Total). A call
// that runs past it fails with an *ExceededError (matching ErrExceeded) that
// behaviors.IsTimeout recognises, a breaker counts and retry retries only when its policy says
// so.
package timeout
