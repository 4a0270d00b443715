// Package durabletest helps test code that uses package durable, without a scheduler, goroutines
// or sleeps.
//
//   - NewQueue opens a throwaway queue: SQLite in the test's temporary directory, or a fresh
//     PostgreSQL schema when SWITCHBOARD_TEST_PG_DSN is set; it is closed (and the schema
//     dropped) when the test ends.
//   - PostgresSchema is that schema alone: a schema of the test's own on a shared PostgreSQL
//     server, dropped when the test ends, and the DSN selecting it (for postgres.Open).
//   - RequireEnqueued asserts that a request of a type is waiting in the queue and returns the
//     requests it found, decoded.
//   - Work runs every item that is due now through the mediator, one at a time in the calling
//     goroutine, exactly as the scheduler of Queue.Start would (the same attempt rows, retry and dead-letter
//     decisions, breaker refusals), and reports what happened. With an injected clock
//     (a ManualClock in durable.Config.Clock), a test moves time forward to make retries due and calls Work
//     again.
package durabletest
