// Package pgtest isolates the PostgreSQL tests: the schema of one test (the implementation of
// durabletest.PostgresSchema, here so that the store's own tests, which durabletest's imports
// would cycle with, use the same one), the database of one test behind PgBouncer
// (BouncerDatabase), and throwaway servers, with a PgBouncer in front if asked (StartServer),
// or a primary with a synchronous standby, for failovers (StartReplicated).
package pgtest
