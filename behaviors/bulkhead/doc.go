// Package bulkhead holds the bulkhead behavior of switchboard: at most Config.Limit calls per
// key (a request type by default) run at once, and a call that finds no free slot fails with a
// *FullError (matching ErrFull), which retry does not retry and a breaker does not count.
package bulkhead
