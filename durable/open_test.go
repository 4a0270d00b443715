package durable_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	istore "github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/postgres"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/durable/sqlite"
)

// Open names a missing or wrong driver before touching any database, and reports every
// problem of the Config at once, each naming its field.
func TestOpenNamesDriverMistakes(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pgxPool, err := sql.Open("pgx", "postgres://nobody@127.0.0.1:1/x")
	if err != nil {
		t.Fatal(err)
	}
	defer pgxPool.Close()
	for name, c := range map[string]struct {
		driver durable.Driver
		want   string
	}{
		"nil":            {nil, "the driver is nil: pass sqlite.Open(path)"},
		"empty path":     {sqlite.Open(""), "sqlite.Open was given an empty path"},
		"empty DSN":      {postgres.Open("", postgres.Config{}), "postgres.Open was given an empty DSN"},
		"pool of SQLite": {postgres.New(db, postgres.Config{}), "postgres.New was given a pool of the database/sql driver"},
		"budget on a pool of the caller's": {postgres.New(pgxPool, postgres.Config{MaxConns: 4}),
			"postgres.New was given Config.MaxConns, MaxIdleConns or IdleTimeout"},
		"negative budget":           {postgres.Open("postgres://x@127.0.0.1:1/x", postgres.Config{MaxConns: -1}), "postgres.Config.MaxConns is -1"},
		"more idle than the budget": {postgres.Open("postgres://x@127.0.0.1:1/x", postgres.Config{MaxConns: 2, MaxIdleConns: 3}), "MaxIdleConns is 3, more than MaxConns (2)"},
	} {
		q, err := durable.Open(ctx, c.driver, durable.Config{})
		if q != nil || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Open = %v, %v; want an error containing %q", name, q, err, c.want)
		}
	}
	bad := durable.Config{Recheck: -time.Second, Policy: retry.Policy{MaxAttempts: -1}}
	path := filepath.Join(t.TempDir(), "never.db")
	for _, err := range []error{bad.Validate(), func() error { _, err := durable.Open(ctx, sqlite.Open(path), bad); return err }()} {
		for _, want := range []string{"Recheck -1s is negative", "MaxAttempts -1 is negative"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%v: want it to name %q", err, want)
			}
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("Open with a bad Config created the database file: %v", err)
	}
}

// A pool of the caller's: SkipMigrations refuses an unmigrated schema, naming both versions and
// Migrate; after Migrate (or the MigrationSQL script) it opens; Close leaves the pool open.
func TestOpenWithCallersPool(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		var (
			db     *sql.DB
			driver durable.Driver
		)
		switch b.name {
		case "sqlite":
			if err := os.MkdirAll(filepath.Dir(b.target), 0o755); err != nil {
				t.Fatal(err)
			}
			db = must[*sql.DB](t)(sql.Open("sqlite", b.target+"?_txlock=immediate"))
			db.SetMaxOpenConns(1)
			driver = sqlite.New(db)
		default:
			db = must[*sql.DB](t)(sql.Open("pgx", b.target))
			driver = postgres.New(db, postgres.Config{})
		}
		defer db.Close()
		_, err := durable.Open(ctx, driver, durable.Config{SkipMigrations: true})
		for _, want := range []string{"schema is at version 0", fmt.Sprintf("needs version %d", istore.SchemaVersion()), "Migrate"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Open with SkipMigrations on an empty database: %v; want it to mention %q", err, want)
			}
		}
		if b.name == "sqlite" {
			if err := sqlite.Migrate(ctx, db); err != nil {
				t.Fatal(err)
			}
		} else {
			// The script a team's migration tool would run, statement by statement as it
			// would: here in one transaction.
			tx := must[*sql.Tx](t)(db.BeginTx(ctx, nil))
			if _, err := tx.Exec(postgres.MigrationSQL()); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		q, err := durable.Open(ctx, driver, durable.Config{SkipMigrations: true})
		if err != nil {
			t.Fatal(err)
		}
		registerTypes(q)
		id := must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 1})).ID
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		if err := db.Ping(); err != nil {
			t.Fatalf("Close closed the caller's pool: %v", err)
		}
		// Open without SkipMigrations finds nothing to do and sees the item.
		q = b.queue(t, durable.Config{})
		if it := item(t, q, id); it.State != record.StatePending {
			t.Fatalf("item %+v", it)
		}
	})
}

func TestMigrationSQLHeadsEachMigration(t *testing.T) {
	for d, s := range map[string]string{"sqlite": sqlite.MigrationSQL(), "postgres": postgres.MigrationSQL()} {
		for _, want := range []string{"CREATE TABLE IF NOT EXISTS switchboard_schema_migrations", "-- Migration 1: 0001_init.sql",
			"-- Migration 3: 0003_isolation.sql", "INSERT INTO switchboard_schema_migrations (version, name, applied_at) VALUES (3, '0003_isolation.sql'"} {
			if !strings.Contains(s, want) {
				t.Errorf("%v: MigrationSQL lacks %q", d, want)
			}
		}
	}
}

// Open reports what a user got wrong in a PostgreSQL DSN as such, before any migration: a
// server that does not answer, and a search_path naming a schema nobody created (which used to
// fail inside the first migration with "no schema has been selected to create in"), also when
// an existing schema follows it (the queue then opened on that one).
func TestOpenNamesConnectionMistakes(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skip(pgDSNEnv + " not set")
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", "no_such_schema_here")
	u.RawQuery = q.Encode()
	ctx := context.Background()
	if _, err := durable.Open(ctx, postgres.Open(u.String(), postgres.Config{}), durable.Config{}); err == nil ||
		!strings.Contains(err.Error(), "no_such_schema_here") || !strings.Contains(err.Error(), "names no existing schema") {
		t.Errorf("missing schema: %v", err)
	}
	// A missing schema first, an existing one after it: the server falls back to the second,
	// and the queue would join whatever fleet works there.
	q.Set("search_path", "no_such_schema_here,public")
	u.RawQuery = q.Encode()
	if _, err := durable.Open(ctx, postgres.Open(u.String(), postgres.Config{}), durable.Config{}); err == nil ||
		!strings.Contains(err.Error(), `"no_such_schema_here"`) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing first schema: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there now: the connection is refused
	refused := fmt.Sprintf("postgres://nobody@127.0.0.1:%d/x?sslmode=disable&connect_timeout=5", port)
	if _, err := durable.Open(ctx, postgres.Open(refused, postgres.Config{}), durable.Config{}); err == nil || !strings.Contains(err.Error(), "durable: Open postgres: connect:") {
		t.Errorf("refused: %v", err)
	}
}

// SkipMigrations checks every migration, not only the newest: a database that has the newest
// version but lacks one added beside an older one (two branches each adding a migration) is
// refused, naming what it lacks. It used to be accepted.
func TestSkipMigrationsFindsAGap(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := sqlite.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "DELETE FROM switchboard_schema_migrations WHERE version = 4"); err != nil {
		t.Fatal(err)
	}
	q, err := durable.Open(ctx, sqlite.New(db), durable.Config{SkipMigrations: true})
	if q != nil || err == nil || !strings.Contains(err.Error(), "lacks migrations [4]") {
		t.Fatalf("Open = %v, %v; want it to name the missing migration 4", q, err)
	}
}
