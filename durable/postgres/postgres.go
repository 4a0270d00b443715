package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/internal/pgxconn"
	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// engineFor returns the PostgreSQL engine of the store over pgx; listen: the instances tell
// each other of new items and changed breakers (LISTEN/NOTIFY), otherwise they poll.
func engineFor(listen bool) store.Engine {
	drv := store.PostgresDriver{NotApplied: pgxconn.NotApplied, ReadOnly: pgxconn.ReadOnly, SendBatch: pgxconn.SendBatch}
	if listen {
		drv.Listen = pgxconn.Listen
	}
	return store.NewPostgres(drv)
}

// engine is the engine of Migrate and MigrationSQL (which listen to nothing).
var engine = engineFor(false)

// pgDriver is a PostgreSQL database for durable.Open, made by Open or New.
type pgDriver struct {
	dsn string
	db  *sql.DB
	cfg Config
}

// Open returns the driver of the PostgreSQL database of dsn, a connection string in any form
// pgx accepts (a search_path parameter selects the schema, which must exist; an
// application_name parameter names the instance's connections in pg_stat_activity, "switchboard"
// by default), with cfg's connection budget and mode (see Config: its zero value is the
// default). The queue opens the pool when durable.Open is called, and its Close closes it.
//
// For a primary with a standby, name both hosts with target_session_attrs=read-write
// ("postgres://u@db1:5432,db2:5432/app?target_session_attrs=read-write&connect_timeout=2"):
// after a failover every connection dialled reaches the promoted standby, and a connection
// whose server refuses writes as read-only is dropped rather than kept ("Failover" in
// docs/durable.md).
func Open(dsn string, cfg Config) driver.Driver { return &pgDriver{dsn: dsn, cfg: cfg} }

// New returns the driver of db, a pool of pgx's database/sql driver ("pgx", or
// stdlib.OpenDB/OpenDBFromPool of github.com/jackc/pgx/v5/stdlib) that the caller opened and
// owns: the queue never closes it. The pool's own settings are its budget (set
// db.SetMaxOpenConns: an unbounded pool grows with the load); cfg's MaxConns, MaxIdleConns and
// IdleTimeout must be zero, and TransactionPooling applies as with Open.
func New(db *sql.DB, cfg Config) driver.Driver { return &pgDriver{db: db, cfg: cfg} }

// Open opens (or wraps) the driver's database, checks that it answers and returns its
// executor, for durable.Open.
func (d *pgDriver) Open(ctx context.Context) (driver.Executor, error) {
	dbase, err := d.database()
	if err != nil {
		return nil, err
	}
	return dbase.Open(ctx)
}

// database opens the driver's database, or wraps the caller's pool.
func (d *pgDriver) database() (store.Database, error) {
	if err := d.cfg.Validate(); err != nil {
		return store.Database{}, fmt.Errorf("durable: Open postgres: %w", err)
	}
	if d.db != nil {
		if !pgxconn.IsPgx(d.db) {
			return store.Database{}, fmt.Errorf("durable: Open postgres: postgres.New was given a pool of the database/sql driver %T; it needs pgx's (github.com/jackc/pgx/v5/stdlib)", d.db.Driver())
		}
		if d.cfg.MaxConns != 0 || d.cfg.MaxIdleConns != 0 || d.cfg.IdleTimeout != 0 {
			return store.Database{}, errors.New("durable: Open postgres: postgres.New was given Config.MaxConns, MaxIdleConns or IdleTimeout: they set up the pool postgres.Open opens; set a pool of your own with db.SetMaxOpenConns, SetMaxIdleConns and SetConnMaxIdleTime")
		}
		listen := !d.cfg.TransactionPooling && d.db.Stats().MaxOpenConnections != 1
		return store.Database{DB: d.db, Engine: engineFor(listen)}, nil
	}
	if d.dsn == "" {
		return store.Database{}, errors.New("durable: Open postgres: postgres.Open was given an empty DSN")
	}
	cfg := d.cfg.withDefaults()
	db, err := pgxconn.OpenPool(d.dsn, pgxconn.Pool{
		MaxConns: cfg.MaxConns, MaxIdleConns: cfg.MaxIdleConns, IdleTime: cfg.IdleTimeout,
		NoSessionState: cfg.TransactionPooling, ApplicationName: "switchboard",
	})
	if err != nil {
		return store.Database{}, fmt.Errorf("durable: Open postgres: %w", err)
	}
	listen := !cfg.TransactionPooling && cfg.MaxConns > 1
	return store.Database{DB: db, Engine: engineFor(listen), Owned: true}, nil
}

// Migrate applies to db, a pool of pgx's database/sql driver, the schema migrations it lacks:
// each in its own transaction, statement by statement, recorded in the
// switchboard_schema_migrations table. Concurrent calls (several instances starting at once)
// apply each migration once: each migration's transaction takes an advisory lock. durable.Open calls it unless
// Config.SkipMigrations is set; call it from a deploy step that owns the schema.
func Migrate(ctx context.Context, db *sql.DB) error {
	return store.Migrate(ctx, db, engine, nil)
}

// MigrationSQL returns every PostgreSQL migration, in order, as one script for a team's own
// migration tool (or psql): first the version table, then each migration headed by a comment
// with its version and name and followed by the insert of its row in the version table, so
// that the database ends as Migrate leaves it and durable.Open (with or without
// SkipMigrations) accepts it. The script has no transaction statements; run it in one.
func MigrationSQL() string { return store.MustScript(engine) }
