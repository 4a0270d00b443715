// Package sqlite is the SQLite driver of package durable: a queue in one database file, through
// modernc.org/sqlite (pure Go, no cgo). Nothing runs beside the application; one process
// writes at a time, so it suits one instance (several processes on one file queue for the write
// lock). Pass it to durable.Open:
//
//	q, err := durable.Open(ctx, sqlite.Open("var/queue.db"), durable.Config{})
//
// Importing this package registers modernc.org/sqlite's database/sql driver, "sqlite".
package sqlite
