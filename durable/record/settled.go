package record

// Settled is how one claim of an item ended, once its outcome was written: the words of the
// scheduler's OnSettled observers, the metrics' settled counter, the logs and the dashboard. A
// claim that made an attempt says what became of the item (SettledSucceeded, SettledRetried,
// SettledDead, SettledInterrupted); one that did not says what held it back. The words an
// attempt row shares with it (Outcome) mean the same. It is a string, so that an observer that
// imports nothing of the queue (package metrics) takes one as it is.
type Settled = string

// The ways a claim settles.
const (
	SettledSucceeded Settled = "succeeded" // the attempt succeeded
	SettledRetried   Settled = "retried"   // the attempt failed; the item is tried again later
	// SettledDead: the item died: its attempt failed with an error the policy calls
	// permanent or used up its attempts, it could not be decoded, or a budget that fails over
	// ended it.
	SettledDead Settled = "dead"
	// SettledRefused: a breaker or another refusing behavior held the item back before any
	// handler: no attempt.
	SettledRefused Settled = "refused"
	SettledPaused  Settled = "paused" // a pause of its breaker key held it back: no attempt
	// SettledLimited: its breaker key's concurrency limit had no free slot: no attempt (a
	// rate limiter's refusal is SettledRefused).
	SettledLimited     Settled = "concurrency_limited"
	SettledExpired     Settled = "expired"     // its deadline ended it
	SettledInterrupted Settled = "interrupted" // a shutdown cancelled its attempt
	// SettledReleased: not attempted: a shutdown before it started, or a request name or
	// handler this instance lacks.
	SettledReleased Settled = "released"
)
