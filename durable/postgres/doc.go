// Package postgres is the PostgreSQL driver of package durable, through pgx: any number of
// instances share one database and divide the work (claims take FOR UPDATE SKIP LOCKED). Pass
// it to durable.Open:
//
//	q, err := durable.Open(ctx, postgres.Open(dsn, postgres.Config{}), durable.Config{})
//
// Importing this package registers pgx's database/sql driver, "pgx".
package postgres
