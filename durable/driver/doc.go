// Package driver is the interface between package durable and a database: a Driver opens an
// Executor, whose methods are the store operations the queue, its scheduler and its
// operators' calls run, and whose data types are defined here. Packages durable/sqlite and
// durable/postgres are its built-in implementations; a third party implements it for another
// database (CockroachDB, YugabyteDB, libSQL, MySQL) and proves the implementation with
// package durable/drivertest's Exercise.
//
// The interface is database/sql-based: an Executor keeps its rows in a *sql.DB, and the
// operations that let a caller add statements of its own to an operation's transaction
// (Executor.EnqueueTx, SetLimit, SetPause, EditSchedule, AddAudit) hand it a *sql.Tx.
//
// Four capabilities are optional, each an interface an Executor may also implement, found by
// type assertion: Notifier (wake-ups across instances, as PostgreSQL's LISTEN/NOTIFY gives),
// FleetStores (the shared circuit breakers and rate limits of durable.NewBreakerStore and
// durable.NewRateLimitStore), ItemFinder (durable.Queue.Find) and HistoryStore (the
// per-minute history of durable.Queue.History). Without them the queue polls, the fleet stores
// and Find report that the driver lacks them, and no history is kept. docs/architecture.md,
// "Writing a driver", describes each
// operation group and what Exercise checks of it.
package driver
