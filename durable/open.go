package durable

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// Driver is the database a Queue keeps its items in: sqlite.Open(path) or sqlite.New(db) of
// package durable/sqlite (one file, one process writing at a time), or postgres.Open(dsn) or
// postgres.New(db) of package durable/postgres (any number of instances divide the work).
// Each driver package alone imports its database driver and owns its migrations (Migrate,
// MigrationSQL), so a program links only the database it uses. Only those packages implement
// it: its method names an internal type.
type Driver interface {
	// Database opens (or, for a pool the caller owns, wraps) the driver's database.
	Database() (store.Database, error)
}

// Config configures a Queue; the database is Open's Driver argument.
type Config struct {
	// SkipMigrations makes Open only check that the schema is at least the version this
	// package needs, for a schema managed by a migration tool (the driver's MigrationSQL) or a
	// deploy step (its Migrate). Default false: Open applies the missing migrations.
	SkipMigrations bool

	// Policy is the retry policy of durable items; a registration's WithPolicy is merged over
	// it field by field. MaxAttempts counts scheduler dispatches (not in-process attempts
	// before the deferral, nor attempts a shutdown interrupted). Its classification fields
	// are layered over each request's in-process retry policy to decide what is worth another
	// try: deferred, and tried again by the scheduler.
	//
	// Zero fields mean durable defaults, which differ from the in-process ones because nobody
	// waits: 10 attempts, Exponential from 1 s doubling up to 1 h (about eight and a half
	// minutes in all, enough to outlast a restart or failover downstream, and a long outage
	// costs few attempts), Jitter On (items that failed together do not return together),
	// and timeouts, transport errors and open circuits retried (durable work exists for the
	// dependency that is down or hung).
	Policy retry.Policy
	// Clock tells the time of due times, leases and attempt timestamps; a fake one in tests
	// makes items due or leases expire without waiting. Intervals (polling, heartbeats,
	// sweeps) use real timers. Default behaviors.SystemClock.
	Clock behaviors.Clock
	// Rand returns uniform numbers in [0, 1) for jitter, from several goroutines at once.
	// Default math/rand/v2.
	Rand func() float64
	// Recheck is the longest an item the scheduler could not start waits before it is looked
	// at again: one refused by an open breaker (a breaker tripped by hand for a day and reset
	// elsewhere must not hold it a day; a breaker closing here frees it at once), or one whose
	// name this instance does not know (a rolling deploy's newer instance may). Default 1 minute.
	Recheck time.Duration

	// OnDead, when set, is called once for each new dead letter: an item that became dead
	// (attempts exhausted, a non-retryable error, a payload that no longer decodes) and a
	// failed item of RunBatch. It is called after the letter is stored, outside any
	// transaction, from the goroutine that stored it (the scheduler's loop for dead items):
	// keep it quick and hand slow work (paging someone) to a goroutine of your own. A panic in
	// it is recovered and logged. It is a notification, not a guarantee: a process that dies
	// between the commit and the call never makes it; Stats.DeadLetters is the durable signal
	// to alert on. Default nil: the warning logged for each letter is the only notice.
	OnDead func(ctx context.Context, d DeadLetter)
	// Logger receives the queue's messages: a warning per new dead letter, panics of OnDead,
	// failed propagators, and each migration Open applies. Default zap.L() as of Open: a no-op
	// until the application calls zap.ReplaceGlobals, so the queue never prints on its own.
	Logger *zap.Logger
	// ReplayLease is how long a replay holds its dead letter; it is extended while the handler
	// runs, so it runs out only when the replaying process died or lost its database. Default
	// 1 minute: an operator retrying after a crash waits little, and a database hiccup does
	// not let a second replay in beside a running one.
	ReplayLease time.Duration
	// Propagators carry values of the enqueuing caller's context (trace context, tenant) to
	// the item's dispatch, as its metadata (at most MaxMetadataSize): each Injects when an
	// item is stored and Extracts, in order, at its dispatch. A propagator that panics is
	// skipped and logged; the item is never lost over it. Carry makes one for a mediator.Key.
	// Default none.
	Propagators []Propagator
	// MaxPayloadBytes is the longest encoded request stored; a longer one is refused before
	// any database call with an error matching ErrPayloadTooLarge (a RunBatch letter is kept
	// without its payload). Default 4 MiB (DefaultMaxPayloadBytes): three orders of magnitude
	// above ordinary requests, while a payload is held in memory several times on its way and
	// a connection that carried a huge value keeps a buffer of its size until the pool
	// closes. Keep large documents in a blob store and their key in the request. At most
	// MaxPayloadLimit.
	MaxPayloadBytes int
}

// Open returns a Queue over driver's database, migrated first unless SkipMigrations. Shutdown
// and Close the queue when done.
func Open(ctx context.Context, driver Driver, cfg Config) (*Queue, error) {
	if driver == nil {
		return nil, errors.New("durable: Open: the driver is nil: pass sqlite.Open(path) (package durable/sqlite) or postgres.Open(dsn) (package durable/postgres)")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dbase, err := driver.Database()
	if err != nil {
		return nil, err
	}
	db, e, owns := dbase.DB, dbase.Engine, dbase.Owned
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
	if err := store.Connect(ctx, db, e); err != nil {
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

// Validate reports every problem of cfg, joined, each naming its field. Open calls it.
func (cfg Config) Validate() error {
	var errs []error
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
		return fmt.Errorf("durable: Open: SkipMigrations is set and the database's schema is at version %d, but this package needs version %d and the database lacks migrations %v: run the driver package's Migrate (or apply its MigrationSQL with your migration tool) first",
			have, store.SchemaVersion(), missing)
	}
	return nil
}
