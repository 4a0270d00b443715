// Package pgxconn holds what the PostgreSQL engine of the durable store needs from the pgx
// driver itself: the classification of its errors and batches on a database/sql connection.
// Only durable/postgres (and the store's tests) import it, so a program without PostgreSQL
// links no pgx.
package pgxconn
