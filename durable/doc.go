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
// Open's Driver argument says where the items are kept: SQLite (package durable/sqlite, a
// file: nothing to run beside the application) or PostgreSQL (package durable/postgres, from a
// DSN or a pool of your own: several instances sharing the work); switching is changing that
// argument. Both have the same schema, created by versioned migrations that Open applies; a
// team that manages its schema itself runs the driver package's Migrate, or feeds its
// MigrationSQL to its own migration tool, and sets Config.SkipMigrations.
//
// A request type becomes durable when it is registered on the queue (Register) under a stable
// name with a Codec (JSON by default). Then:
//
//   - Queue.Enqueue persists a request to run later (with optional dedupe and ordering keys);
//   - the Deferral behavior (NewDeferral), placed outside retry, persists a request whose
//     in-process attempts ended in a retryable error or an open circuit breaker, and returns a
//     *DeferredError carrying the item id instead of the error;
//   - the scheduler Queue.Start runs in every instance claims due items for its free workers (FOR UPDATE
//     SKIP LOCKED on PostgreSQL), holds a lease with heartbeats, dispatches each item through
//     the mediator as exactly one attempt (marked mediator.Unattended, SingleAttempt and
//     Stored, for that request alone), and completes it under a fence (owner + attempt
//     number) so that a late completion from a worker whose lease expired is rejected.
//
// Every attempt is its own row (Queue.Attempts), and only what the handler did is one: a
// refusal (an open circuit breaker, a full bulkhead) undoes the claim, and the item waits for
// the refusal to clear. What is worth another try is decided by the request's own retry
// policy with the classification of Config.Policy over it. Failed attempts are retried with
// exponential backoff (Config.Policy, a retry.Policy with durable defaults); exhausted or non-retryable items, and items whose payload no longer decodes, end in
// StateDead with their payload and last error kept. An item whose lease ran out while it ran
// runs alone next time, so an item that crashes its process is the only one charged for it.
//
// An item that gives up becomes a dead letter (written with its last outcome, never deleted):
// Queue.DeadLetters lists them, Queue.DeadLetter shows one with its timeline, Queue.Replay runs
// one again through the mediator and Queue.Discard retires one with a reason, both audited,
// one at a time or up to 100 at once (ReplayMany, DiscardMany). Queue.RunBatch sends a batch of
// requests and captures each one that fails as a dead letter while the rest still run.
// Config.OnDead and Stats.DeadLetters tell an operator about them. Succeeded items are pruned
// after SchedulerConfig.Retention. Schedule sends a request on a cron expression, each due run
// claimed by one instance. Config.Propagators carry chosen context values (trace context,
// tenant) from the enqueuing caller to the item's dispatch. See docs/dead-letters.md.
//
// Delivery is at least once: a handler may run again for an item whose previous attempt's
// outcome was lost (the instance died after the handler's side effect), so handlers of durable
// requests must be idempotent. FromContext gives a handler the item id and attempt number.
// Package durabletest runs items in tests without a scheduler. See docs/durable.md for the
// state machine, the failure modes, the tables and tuning.
package durable
