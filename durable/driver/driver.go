package driver

import "context"

// Driver is a database a queue keeps its items in: what durable.Open takes, made by a
// driver package (durable/sqlite's Open or New, durable/postgres's, or a third party's).
type Driver interface {
	// Open connects to the database (opening it, or wrapping a pool the caller owns) and
	// checks that it answers, reporting a wrong address, credentials or setting as such, and
	// returns its Executor. It migrates nothing: durable.Open then calls the Executor's
	// Migrate, or, with Config.SkipMigrations, its MissingMigrations. durable.Open calls Open
	// once per queue, and the queue's Close calls the Executor's Close. On an error Open
	// leaves nothing open.
	Open(ctx context.Context) (Executor, error)
}
