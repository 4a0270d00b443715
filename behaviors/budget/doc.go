// Package budget holds the retry budget of switchboard: per key (a dependency; a request type
// by default), retries may be at most Config.Ratio of the calls made over a sliding
// Config.Window, plus a small floor of Config.Floor retries per second that a dependency
// called rarely may always spend. It bounds the load that retries add to a dependency that
// is failing: with the default ratio of 20 %, a dependency that fails every call receives at
// most 1.2 times the calls it would receive without retries (plus the floor), whatever the
// number of attempts the retry policies allow.
//
// A budget is not a behavior of its own. The behaviors that repeat calls share one: the retry
// behavior (retry.Config.Budget) counts one call per Send and asks the budget before each
// retry; a hedging behavior asks before each hedge; the durable queue's scheduler asks before
// each re-dispatch of a stored item, so in-process retries and durable retries draw on the
// same allowance. A retry the budget refuses is not made: Retry returns a *SpentError, a
// behaviors.Refusal (By "retry-budget") whose RetryAfter says when the window will have room.
//
// The success path (a call that is not retried) is a lookup of its key and an atomic add,
// with no lock, no allocation and, but once every 64 calls of a key, no clock reading: calls
// wait in a counter until a retry, a Snapshot or the 64th call places them in the window's
// current slot. A call placed late stays in the window a little longer than it should, which
// on a quiet key makes the budget more lenient by the ratio of fewer than 64 calls; it is never
// counted twice.
//
// A budget is per process. That is enough for a fleet: each instance holds its own retries
// to the ratio of its own calls, so the fleet's retries are at most the ratio of the fleet's
// calls (the floors add up, one per instance).
package budget
