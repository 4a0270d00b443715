package postgres_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/postgres"
)

// A queue on PostgreSQL, shared by every instance that opens the same database and schema:
// the only change from SQLite is Open's driver argument. (No output: it needs a server.)
func ExampleOpen() {
	ctx := context.Background()
	dsn := os.Getenv("DATABASE_URL") // e.g. postgres://app@db:5432/app?search_path=jobs
	q, err := durable.Open(ctx, postgres.Open(dsn, postgres.Config{}), durable.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
}

// The script of every migration, for a migration tool of the team's own (or psql, in one
// transaction).
func ExampleMigrationSQL() {
	script := postgres.MigrationSQL()
	fmt.Println(strings.Contains(script, "CREATE TABLE IF NOT EXISTS switchboard_schema_migrations"))
	fmt.Println(strings.Contains(script, "-- Migration 1: 0001_init.sql"))
	// Output:
	// true
	// true
}

// An instance's connection budget: at most MaxConns connections, the notification connection
// among them, whatever the load; a fleet of N instances holds at most N × MaxConns. Behind
// PgBouncer in transaction pooling mode, TransactionPooling keeps no state on a session (no
// prepared statement, no LISTEN: the schedulers poll). A budget out of range is refused,
// naming the field.
func ExampleConfig() {
	direct := postgres.Config{MaxConns: 6} // 15 instances within max_connections = 100
	behindPgBouncer := postgres.Config{MaxConns: 4, TransactionPooling: true}
	fmt.Println(direct.Validate(), behindPgBouncer.Validate())
	fmt.Println(postgres.Config{MaxConns: 2, MaxIdleConns: 3}.Validate())
	// Output:
	// <nil> <nil>
	// postgres.Config.MaxIdleConns is 3, more than MaxConns (2): idle connections are among the open ones
}
