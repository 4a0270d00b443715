// Package gate is the durable queue's admission gate: for every claim of an item it decides
// whether the item may run now, and if not, until when, on what key, and whether the claim is
// an attempt charged to the item. Every hold-back answers through it, so the rule is in one
// place:
//
//   - Before the handler. An item whose last allowed attempt was abandoned, or whose deadline
//     has passed, is dead (its letter says which). An item whose request name this instance
//     does not know, or whose handler it lacks, waits Recheck for an instance that has them.
//     Then, in this order: a pause of one of its breaker keys, its breakers (the key that
//     guards it and the key it is parked on, in every registry the scheduler knows; a
//     half-open breaker lets through no more items than it has free probe slots), its retry
//     budget (a re-dispatch is a retry), and its concurrency limit's slot. A hold-back here is
//     no attempt: the claim is undone, the item is parked on the hold-back's key until its
//     retry-after (a breaker's probe time, a pause's end, a budget's room; for a breaker
//     whose probes are out, their verdict, the end of this gate's probe, or the time the
//     breaker gives up on them, and Recheck at most), and nothing is charged.
//   - After the handler. A refusal of the dispatch before it reached any handler (an open
//     breaker of the request's own pipeline or of a call its handler made, a rate limit, a
//     full bulkhead, a user's own behaviors.Refusal) is likewise no attempt: parked on the
//     refuser's key until its retry-after, uncharged. An attempt that reached a handler and
//     then met a refusal (an in-process retry whose later attempt was refused) is a failed
//     attempt: charged, and retried by the policy at the later of its backoff and the
//     refusal's retry-after, never dead for the refusal. A shutdown's cancellation is an
//     interrupted attempt, not counted against MaxAttempts.
//   - Death. An item dies only of MaxAttempts, its deadline, or an error the policy calls
//     permanent (an undecodable payload is one; so is a retry budget's refusal when the
//     registration says FailOverBudget). The error of its dead letter says which.
//
// Nothing else decides these: the executor asks Admit before the dispatch and Judge after it,
// and writes what they return.
package gate
