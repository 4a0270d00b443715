// Package durable parks requests that keep failing in a database and retries them later,
// by exactly one instance at a time, until they succeed or become dead letters.
//
// A complete setup on the embedded default (see the package Example):
//
//	q, err := durable.Open(ctx, sqlite.Open("var/queue.db"), durable.Config{}) // created and migrated on first use
//	durable.Register[*SendInvoice](q, "billing.send-invoice")                  // before Build
//	m.Use(durable.NewDeferral(q, durable.DeferralConfig{}))                    // optional: defer failed sends
//	err = q.Start(m)                                                           // in every instance, after m.Build()
//	defer q.Shutdown(ctx)
//
// Open's Driver says where items are kept: SQLite (durable/sqlite) or PostgreSQL
// (durable/postgres); switching is changing that argument. Queue.Enqueue stores a registered
// request, as the Deferral does one whose in-process attempts failed. The scheduler
// (Queue.Start, in every instance) claims due items, leases each, dispatches each as one
// attempt, and records the outcome under a fence, so a late completion from a worker whose
// lease ran out is rejected. A refusal (an open breaker, a full bulkhead) is not an attempt.
// Failed attempts back off (Config.Policy); an item that gives up becomes a dead letter, which
// an operator lists, replays or discards, audited. Queue.RunBatch keeps each failing request of
// a batch as a dead letter; Schedule sends a request on a cron expression.
//
// Delivery is at least once: a handler may run again after its instance died past the
// handler's side effect, so handlers must be idempotent (FromContext gives the item id).
// What the queue stores and its readers return (items, attempts, dead letters, schedules, their
// states and outcomes) is plain data in package durable/record. Package durabletest runs items
// in tests. See docs/durable.md and docs/dead-letters.md for the
// state machine, failure modes and tuning.
package durable
