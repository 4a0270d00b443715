// Package store keeps durable items and their attempts in SQLite or PostgreSQL over
// database/sql. It is the storage layer of package durable: durable's Queue and its scheduler are
// its only users.
//
// The shared code (this package's store.go) reads and writes through an engine, one per
// database: sqlite.go and postgres.go hold each engine's statements and the calls whose shape
// differs between the two (claims, batched completions, lease extension, the sweep, the
// migration lock). Both engines have the same schema, created by the versioned migrations
// embedded from migrations/<engine>/ and applied statement by statement (see Migrate and
// Split).
package store
