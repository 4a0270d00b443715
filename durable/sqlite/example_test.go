package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/sqlite"
)

// A queue in one file, created and migrated by Open; the queue's Close closes the file.
func ExampleOpen() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "sqlite-example")
	defer os.RemoveAll(dir)
	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "var", "queue.db")), durable.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	missing, err := q.MissingMigrations(ctx)
	fmt.Println("missing migrations:", len(missing), err)
	// Output: missing migrations: 0 <nil>
}

// A pool of the application's own, its schema applied by a deploy step (Migrate) rather than
// by Open: SkipMigrations only checks it. The queue's Close leaves the pool open.
func ExampleNew() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "sqlite-example")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", filepath.Join(dir, "queue.db")+"?_txlock=immediate")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := durable.Open(ctx, sqlite.New(db), durable.Config{SkipMigrations: true}); err != nil {
		fmt.Println("before Migrate:", strings.Contains(err.Error(), "schema is at version 0"))
	}
	if err := sqlite.Migrate(ctx, db); err != nil {
		fmt.Println(err)
		return
	}
	q, err := durable.Open(ctx, sqlite.New(db), durable.Config{SkipMigrations: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = q.Close()
	fmt.Println("after Close the pool answers:", db.PingContext(ctx) == nil)
	// Output:
	// before Migrate: true
	// after Close the pool answers: true
}

// The script of every migration, for a migration tool of the team's own.
func ExampleMigrationSQL() {
	script := sqlite.MigrationSQL()
	fmt.Println(strings.Contains(script, "CREATE TABLE IF NOT EXISTS switchboard_schema_migrations"))
	fmt.Println(strings.Contains(script, "-- Migration 1: 0001_init.sql"))
	// Output:
	// true
	// true
}
