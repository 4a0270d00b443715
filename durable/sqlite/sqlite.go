package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	// Registers the "sqlite" database/sql driver.
	msqlite "modernc.org/sqlite"

	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// sqliteDriver is a SQLite database for durable.Open, made by Open or New.
type sqliteDriver struct {
	path string
	db   *sql.DB
}

// Open returns the driver of the SQLite database file at path, created (with its directory)
// when durable.Open first uses it. The queue opens the file with a single connection, WAL
// journal, a busy timeout and immediate write transactions (one writer at a time: a single
// connection serialises this process's statements, the busy timeout and immediate
// transactions serialise writers across processes), and its Close closes it.
func Open(path string) driver.Driver { return &sqliteDriver{path: path} }

// New returns the driver of db, a pool of the "sqlite" driver that the caller opened and owns:
// the queue never closes it. It should have one connection (db.SetMaxOpenConns(1)) and the
// "_txlock=immediate" parameter, as Open sets up.
func New(db *sql.DB) driver.Driver { return &sqliteDriver{db: db} }

// Open opens (or wraps) the driver's database, checks that it answers and returns its
// executor, for durable.Open.
func (d *sqliteDriver) Open(ctx context.Context) (driver.Executor, error) {
	dbase, err := d.database()
	if err != nil {
		return nil, err
	}
	return dbase.Open(ctx)
}

// database opens the driver's database, or wraps the caller's pool.
func (d *sqliteDriver) database() (store.Database, error) {
	if d.db != nil {
		if _, ok := d.db.Driver().(*msqlite.Driver); !ok {
			return store.Database{}, fmt.Errorf("durable: Open sqlite: sqlite.New was given a pool of the database/sql driver %T; it needs modernc.org/sqlite's (\"sqlite\")", d.db.Driver())
		}
		return store.Database{DB: d.db, Engine: store.SQLite}, nil
	}
	if d.path == "" {
		return store.Database{}, errors.New("durable: Open sqlite: sqlite.Open was given an empty path")
	}
	db, err := store.OpenSQLite(d.path)
	if err != nil {
		return store.Database{}, fmt.Errorf("durable: Open sqlite: %w", err)
	}
	return store.Database{DB: db, Engine: store.SQLite, Owned: true}, nil
}

// Migrate applies to db, a SQLite pool, the schema migrations it lacks: each in its own
// transaction, statement by statement, recorded in the switchboard_schema_migrations table.
// Concurrent calls apply each migration once. durable.Open calls it unless
// Config.SkipMigrations is set; call it from a deploy step that owns the schema.
func Migrate(ctx context.Context, db *sql.DB) error {
	return store.Migrate(ctx, db, store.SQLite, nil)
}

// MigrationSQL returns every SQLite migration, in order, as one script for a team's own
// migration tool (or sqlite3): first the version table, then each migration headed by a
// comment with its version and name and followed by the insert of its row in the version
// table, so that the database ends as Migrate leaves it and durable.Open (with or without
// SkipMigrations) accepts it. The script has no transaction statements; run it in one.
func MigrationSQL() string { return store.MustScript(store.SQLite) }
