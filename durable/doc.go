// Package durable parks requests that keep failing in a database and retries them later,
// by exactly one instance at a time, until they succeed or become dead letters.
//
// A complete setup on the embedded default (see the package Example):
//
//	q, err := durable.Open(ctx, sqlite.Open("var/queue.db"), durable.Config{}) // created and migrated on first use
//	durable.Register[*SendInvoice](q, "billing.send-invoice")                  // before Build
//	m.Use(durable.NewDeferral(q, durable.DeferralConfig{}))                    // optional: defer failed sends
//	err = q.Start(m, durable.SchedulerConfig{})                                // in every instance, after m.Build()
//	defer q.Shutdown(ctx)
//
// Open's Driver argument says where items are kept: SQLite (package durable/sqlite, one file,
// nothing to run beside the application) or PostgreSQL (package durable/postgres, several
// instances sharing the work); switching is changing that argument.
//
// A registered request type (Register) is stored by Queue.Enqueue, or by the Deferral behavior
// when its in-process attempts failed in a way worth another try. The scheduler (Queue.Start,
// in every instance) claims due items, holds a lease on each, dispatches each through the
// mediator as exactly one attempt, and records the outcome under a fence, so a late completion
// from a worker whose lease ran out is rejected. Every attempt is a row (Queue.Attempts); a
// refusal (an open breaker, a full bulkhead) is not an attempt, and the item waits for it to
// clear. Failed attempts back off (Config.Policy); an item that gives up becomes a dead letter,
// which an operator lists, replays or discards (Queue.DeadLetters, Replay, Discard), audited.
// Queue.RunBatch keeps each failing request of a batch as a dead letter while the rest run;
// Schedule sends a request on a cron expression; Config.Propagators carry context values
// (trace context, tenant) from the enqueuing caller to the dispatch.
//
// Delivery is at least once: a handler may run again after its instance died following the
// handler's side effect, so handlers of durable requests must be idempotent (FromContext gives
// the item id). Package durabletest runs items in tests without a scheduler. See
// docs/durable.md and docs/dead-letters.md for the state machine, failure modes and tuning.
package durable
