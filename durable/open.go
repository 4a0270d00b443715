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

// Driver is the database a Queue keeps its items in, made by a driver package:
// sqlite.Open(path) or sqlite.New(db) of package durable/sqlite (an embedded database in one
// file, nothing to run beside the application, one process writing at a time), or
// postgres.Open(dsn) or postgres.New(db) of package durable/postgres (any number of instances
// share one PostgreSQL database and divide the work). Each driver package alone imports its
// database driver, opens its pool and applies its migrations (Migrate, MigrationSQL), so a
// program links only the database it uses. Switching databases is changing this one argument
// of Open.
//
// Its method names an internal type: only those packages implement it.
type Driver interface {
	// Database opens (or, for a pool the caller owns, wraps) the driver's database.
	Database() (store.Database, error)
}

// Config configures a Queue; the database is Open's Driver argument.
type Config struct {
	// SkipMigrations makes Open apply no migration: it only checks that the database's schema
	// is at least the version this package needs, and fails if not. Set it when the schema is
	// managed by the team's own migration tool (the driver package's MigrationSQL) or by a
	// deploy step that calls its Migrate, and the application's database user may not change the schema. Default
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
	// Enqueue, to the scheduler's Logger at dispatch). Carry makes one for a mediator.ContextKey. Default:
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

// Open returns a Queue over driver's database, whose schema it migrates first (unless
// SkipMigrations is set). Register the request types on it, then enqueue, defer (NewDeferral)
// and schedule (Start). Shutdown and Close the queue when done: Close closes a pool the driver
// opened (sqlite.Open, postgres.Open), never one the caller passed (sqlite.New, postgres.New).
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

// Validate reports every problem of cfg, joined, each naming its field: a negative Recheck or
// ReplayLease, a MaxPayloadBytes that is negative or above MaxPayloadLimit, an invalid Policy
// (see retry.Policy.Validate), a nil propagator or two carried keys of one name. Open calls it.
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
