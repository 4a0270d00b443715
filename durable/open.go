package durable

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// Dialect names the database a queue keeps its items in.
type Dialect int

const (
	// SQLite is an embedded database in one file (modernc.org/sqlite, pure Go, driver name
	// "sqlite"): nothing to run beside the application. One process writes at a time.
	SQLite Dialect = iota + 1
	// Postgres is PostgreSQL (the pgx driver, driver name "pgx"): any number of instances
	// share one database and divide the work.
	Postgres
)

// String returns "sqlite" or "postgres".
func (d Dialect) String() string {
	switch d {
	case SQLite:
		return "sqlite"
	case Postgres:
		return "postgres"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

func (d Dialect) engine() (store.Engine, error) {
	switch d {
	case SQLite:
		return store.SQLite, nil
	case Postgres:
		return store.Postgres, nil
	}
	return nil, fmt.Errorf("durable: unknown %v: use durable.SQLite or durable.Postgres", d)
}

// Config configures a Queue. Exactly one of SQLitePath, PostgresDSN and DB says where the items
// are kept.
type Config struct {
	// SQLitePath is the SQLite database file, created (with its directory) on first use. The
	// queue opens it with a single connection, WAL journal, a busy timeout and immediate write
	// transactions, and Close closes it.
	SQLitePath string
	// PostgresDSN is a PostgreSQL connection string in any form pgx accepts; a search_path
	// parameter selects the schema. The queue opens a pool, and Close closes it.
	PostgresDSN string
	// DB is a pool the caller opened and owns, of the database Dialect names: the queue never
	// closes it. A SQLite pool should have one connection (db.SetMaxOpenConns(1)) and the
	// "_txlock=immediate" parameter, as SQLitePath sets up; a PostgreSQL pool must use the pgx
	// driver.
	DB *sql.DB
	// Dialect is the database of DB. Required with DB; with SQLitePath or PostgresDSN it may
	// be left zero (it must match when set).
	Dialect Dialect
	// SkipMigrations makes Open apply no migration: it only checks that the database's schema
	// is at least the version this package needs, and fails if not. Set it when the schema is
	// managed by the team's own migration tool (see MigrationSQL) or by a deploy step that
	// calls Migrate, and the application's database user may not change the schema. Default
	// false: Open applies the migrations the database lacks, the simplest setup.
	SkipMigrations bool

	// Policy is the retry policy of durable items, in the retry behavior's vocabulary; a
	// registration's WithPolicy is merged over it, field by field. Its timing fields say when
	// a failed item is tried again and when it gives up: MaxAttempts counts durable attempts
	// (scheduler dispatches; in-process attempts made before the item was deferred do not
	// count, nor do attempts interrupted by a scheduler's shutdown). Its classification fields
	// (RetryOnTimeout, RetryOnTransport, WaitForBreaker, RetryableStatusCodes, Classifier) are
	// layered over each request's own in-process retry policy (the retry behavior of its
	// pipeline, else retry.DefaultPolicy) to decide which failures are worth another try: the
	// deferral defers them, the scheduler tries them again.
	//
	// Zero fields mean the durable defaults, which differ from the in-process ones because
	// nobody is waiting: 10 attempts (with these delays they span about eight and a half
	// minutes, enough to outlast a restart or failover of the downstream), Exponential from
	// 1 s doubling up to 1 h (a long outage costs few attempts, and an item runs again soon
	// after its downstream recovers), Jitter On (items that failed together do not return
	// together), and timeouts, transport errors and open circuits retried (durable work exists
	// for the dependency that is down or hung). Open refuses a policy that Validate rejects.
	Policy retry.Policy
	// Clock tells the time used for due times, leases and attempt timestamps; inject a fake
	// one in tests to make items due or leases expire without waiting (a breaker registry in
	// the same test takes the same clock). Polling, heartbeat and sweep intervals are measured
	// with real timers whatever the Clock says. Default behaviors.SystemClock.
	Clock behaviors.Clock
	// Rand returns uniform random numbers in [0, 1) for backoff jitter; it is called from
	// several goroutines at once. Default math/rand/v2.
	Rand func() float64
	// Recheck is the longest an item the scheduler could not start waits before it is looked
	// at again: one refused by an open circuit breaker (however long the breaker says it stays
	// open: a breaker tripped by hand for a day, then reset in another instance, must not hold
	// it for a day), or one whose request name this instance does not know (during a rolling
	// deploy an instance on the newer version does). Items put off by a breaker are also freed
	// at once when it closes. Default 1 minute.
	Recheck time.Duration

	// OnDead are the observers called once for each new dead letter, in the order listed: an
	// item that became dead (attempts exhausted, a non-retryable error, a payload that no
	// longer decodes) and a failed item of RunBatch. They are called after the letter is
	// stored, outside any transaction, from the goroutine that stored it (the scheduler's loop
	// for dead items): keep them quick and hand slow work (paging someone) to a goroutine of
	// your own. A panic in one is recovered and logged, and the next one still runs. It is a
	// notification, not a guarantee: a process that dies between the commit and the call
	// never makes it; Stats.DeadLetters is the durable signal to alert on. Default empty: the
	// warning logged for each letter is the only notice.
	OnDead []func(ctx context.Context, d DeadLetter)
	// Logger receives the queue's own messages: a warning for each new dead letter (item, name,
	// last error), panics of OnDead, propagators that failed at enqueue, and each schema
	// migration Open applies (at info level; Migrate logs nothing). Default zap.L() as it
	// is when Open is called: a no-op until the application installs its logger with
	// zap.ReplaceGlobals, so the queue follows the application's choice and never prints on
	// its own.
	Logger *zap.Logger
	// ReplayLease is how long a replay (Queue.Replay) holds its dead letter before another
	// replay may take it: the replay extends it every third of it while the handler runs, so
	// it runs out only when the replaying process died or lost its database; the letter is
	// then free again at most ReplayLease later. Default 1 minute: short enough that an
	// operator retrying after a crash waits little, long enough that a database hiccup does
	// not let a second replay in beside a running one.
	ReplayLease time.Duration
	// Propagators carry chosen values of the enqueuing caller's context (trace context,
	// tenant, correlation id) to the dispatch of the item, as its metadata (Item.Metadata):
	// each Injects at Enqueue, EnqueueTx and deferral, and each Extracts, in order, into the
	// context of that item's dispatch (by a scheduler or durabletest.Work). Metadata is limited
	// to MaxMetadataSize; a propagator that panics is skipped and logged, and the item is
	// stored and dispatched without its values, never lost over them (logged to Logger at
	// Enqueue, to the scheduler's Logger at dispatch). Carry makes one for a mediator.Key. Default:
	// none, and items carry no metadata.
	Propagators []Propagator
	// MaxPayloadBytes is the longest encoded request the queue stores: Enqueue, EnqueueTx, the
	// deferral and RunBatch's dead letters refuse a longer one with an error matching
	// ErrPayloadTooLarge, before any database call (a letter is kept without its payload).
	// Default 4 MiB (DefaultMaxPayloadBytes): ordinary requests encode to a few KiB, so it
	// leaves three orders of magnitude of room, while a payload is held in memory several
	// times on its way (the encoded copy, the driver's buffer, each claim that reads it back),
	// and a database connection that carried a huge value keeps a buffer of its size until the
	// pool closes: one 1 GB request costs a gigabyte of heap for the life of the process, and
	// the database takes its time refusing it. Keep large documents elsewhere (a blob store)
	// and their key in the request. At most MaxPayloadLimit.
	MaxPayloadBytes int
}

// DefaultMaxPayloadBytes is the default of Config.MaxPayloadBytes: 4 MiB.
const DefaultMaxPayloadBytes = 4 << 20

// MaxPayloadLimit is the largest Config.MaxPayloadBytes accepted: 10⁹ bytes, the longest value
// SQLite stores by default, just under PostgreSQL's 1 GiB limit on a field. A larger limit
// would promise payloads neither database takes.
const MaxPayloadLimit = 1_000_000_000

// Open returns a Queue over the database cfg names, whose schema it migrates first (unless
// SkipMigrations is set). Register the request types on it, then enqueue, defer (NewDeferral)
// and schedule (Start). Shutdown and Close the queue when done.
func Open(ctx context.Context, cfg Config) (*Queue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	db, d, owns, err := cfg.database()
	if err != nil {
		return nil, err
	}
	e, _ := d.engine()
	if cfg.Logger == nil {
		cfg.Logger = zap.L()
	}
	log := cfg.Logger
	fail := func(err error) (*Queue, error) {
		if owns {
			_ = db.Close()
		}
		return nil, err
	}
	if err := connect(ctx, db, d); err != nil {
		return fail(err)
	}
	if cfg.SkipMigrations {
		if err := checkVersion(ctx, db, e); err != nil {
			return fail(err)
		}
	} else if err := store.Migrate(ctx, db, e, func(m store.Migration) {
		log.Info("durable: schema migration applied", zap.Int("version", m.Version), zap.String("migration", m.Name))
	}); err != nil {
		return fail(err)
	}
	if cfg.Recheck == 0 {
		cfg.Recheck = time.Minute
	}
	if cfg.MaxPayloadBytes == 0 {
		cfg.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	q := &Queue{store: store.New(db, e, owns), reg: newRegistry(defaultPolicy.Merge(cfg.Policy)), clock: cfg.Clock,
		rand: cfg.Rand, recheck: cfg.Recheck, propagators: slices.Clone(cfg.Propagators), maxPayload: cfg.MaxPayloadBytes}
	if q.clock == nil {
		q.clock = behaviors.SystemClock
	}
	if q.rand == nil {
		q.rand = rand.Float64
	}
	q.deadLetterConfig(cfg)
	return q, nil
}

// Validate reports every problem of cfg, joined, each naming its field: no database or more
// than one, a DB without its Dialect or a Dialect that does not match, a negative Recheck or
// ReplayLease, a MaxPayloadBytes that is negative or above MaxPayloadLimit, an invalid Policy
// (see retry.Policy.Validate), a nil propagator or two carried keys of one name. Open calls it.
func (cfg Config) Validate() error {
	var errs []error
	if _, _, err := cfg.dialect(); err != nil {
		errs = append(errs, err)
	}
	if err := cfg.Policy.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("durable: Open: Policy: %w", err))
	}
	if cfg.Recheck < 0 {
		errs = append(errs, fmt.Errorf("durable: Open: Recheck %v is negative", cfg.Recheck))
	}
	if cfg.ReplayLease < 0 {
		errs = append(errs, fmt.Errorf("durable: Open: ReplayLease %v is negative", cfg.ReplayLease))
	}
	if cfg.MaxPayloadBytes < 0 {
		errs = append(errs, fmt.Errorf("durable: Open: MaxPayloadBytes %d is negative", cfg.MaxPayloadBytes))
	} else if cfg.MaxPayloadBytes > MaxPayloadLimit {
		errs = append(errs, fmt.Errorf("durable: Open: MaxPayloadBytes %d is more than MaxPayloadLimit (%d), the longest value the databases store", cfg.MaxPayloadBytes, MaxPayloadLimit))
	}
	errs = append(errs, checkPropagators(cfg.Propagators)...)
	return errors.Join(errs...)
}

// database returns the pool cfg names, its dialect and whether the queue owns it.
func (cfg Config) database() (*sql.DB, Dialect, bool, error) {
	d, owned, err := cfg.dialect()
	if err != nil {
		return nil, 0, false, err
	}
	if !owned {
		return cfg.DB, d, false, nil
	}
	var db *sql.DB
	if d == SQLite {
		db, err = store.OpenSQLite(cfg.SQLitePath)
	} else {
		db, err = store.OpenPostgres(cfg.PostgresDSN)
	}
	if err != nil {
		return nil, 0, false, fmt.Errorf("durable: Open %v: %w", d, err)
	}
	return db, d, true, nil
}

// dialect checks that cfg names exactly one database and returns its dialect, and whether
// the queue opens (and so owns) the pool.
func (cfg Config) dialect() (Dialect, bool, error) {
	var set []string
	if cfg.SQLitePath != "" {
		set = append(set, "SQLitePath")
	}
	if cfg.PostgresDSN != "" {
		set = append(set, "PostgresDSN")
	}
	if cfg.DB != nil {
		set = append(set, "DB")
	}
	if len(set) != 1 {
		what := "none is set"
		if len(set) > 1 {
			what = strings.Join(set, " and ") + " are set"
		}
		return 0, false, fmt.Errorf("durable: Open: set exactly one of Config.SQLitePath, Config.PostgresDSN and Config.DB (with Config.Dialect); %s", what)
	}
	var d Dialect
	switch set[0] {
	case "SQLitePath":
		d = SQLite
	case "PostgresDSN":
		d = Postgres
	default:
		if cfg.Dialect == 0 {
			return 0, false, errors.New("durable: Open: Config.DB needs Config.Dialect (durable.SQLite or durable.Postgres)")
		}
		if _, err := cfg.Dialect.engine(); err != nil {
			return 0, false, err
		}
		return cfg.Dialect, false, nil
	}
	if cfg.Dialect != 0 && cfg.Dialect != d {
		return 0, false, fmt.Errorf("durable: Open: Config.Dialect is %v but Config.%s is set", cfg.Dialect, set[0])
	}
	return d, true, nil
}

// connect checks that db answers, so that a wrong address or credentials are reported as
// such, and on PostgreSQL that its search_path names a schema that exists, the usual mistake
// when a DSN selects a schema nobody created.
func connect(ctx context.Context, db *sql.DB, d Dialect) error {
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("durable: Open %v: connect: %w", d, err)
	}
	if d != Postgres {
		return nil
	}
	var schema sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return fmt.Errorf("durable: Open %v: connect: %w", d, err)
	}
	if !schema.Valid {
		var path string
		_ = db.QueryRowContext(ctx, "SHOW search_path").Scan(&path)
		return fmt.Errorf("durable: Open %v: the search_path (%s) names no existing schema: create the schema first, or fix the DSN's search_path", d, path)
	}
	return nil
}

// checkVersion fails unless db has applied every embedded migration: its newest version is
// not enough, since a migration may be added beside an older one.
func checkVersion(ctx context.Context, db *sql.DB, e store.Engine) error {
	have, err := store.Version(ctx, db, e)
	if err != nil {
		return err
	}
	missing, err := store.MissingMigrations(ctx, db, e)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("durable: Open: SkipMigrations is set and the database's schema is at version %d, but this package needs version %d and the database lacks migrations %v: run durable.Migrate (or apply durable.MigrationSQL with your migration tool) first",
			have, store.SchemaVersion(), missing)
	}
	return nil
}

// Migrate applies to db, a database of dialect d, the schema migrations it lacks: each in its
// own transaction, statement by statement, recorded in the switchboard_schema_migrations
// table. Concurrent calls (several instances starting at once) apply each migration once. Open
// calls it unless Config.SkipMigrations is set; call it from a deploy step that owns the
// schema.
func Migrate(ctx context.Context, db *sql.DB, d Dialect) error {
	e, err := d.engine()
	if err != nil {
		return err
	}
	return store.Migrate(ctx, db, e, nil)
}

// MigrationSQL returns every migration of dialect d, in order, as one script for a team's own
// migration tool (or psql, sqlite3): first the version table, then each migration headed by a
// comment with its version and name and followed by the insert of its row in the version
// table, so that the database ends as Migrate leaves it and Open (with or without
// SkipMigrations) accepts it. The script has no transaction statements; run it in one.
func MigrationSQL(d Dialect) string {
	e, err := d.engine()
	if err != nil {
		return "-- " + err.Error() + "\n"
	}
	ms, err := store.Migrations(e)
	if err == nil {
		var s string
		if s, err = store.Script(e, ms); err == nil {
			return s
		}
	}
	// The migrations are embedded and checked by the tests: this cannot happen in a build
	// that passed them.
	panic(err)
}
