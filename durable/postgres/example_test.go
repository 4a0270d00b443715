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
