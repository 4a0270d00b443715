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
	"github.com/switchboard-go/switchboard/durable/internal/dbhealth"
	"github.com/switchboard-go/switchboard/durable/internal/notify"
	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
)

// Driver is the database a Queue keeps items in, made by package durable/sqlite or
// durable/postgres. Each alone imports its database driver and owns its migrations,
// so a program links only the database it uses.
type Driver interface {
	// Database opens (or, for a pool the caller owns, wraps) the driver's database.
	Database() (store.Database, error)
}

// Config configures a Queue; the database is Open's Driver argument.
type Config struct {
	// SkipMigrations makes Open only check the schema's version, for a schema a migration tool
	// manages (the driver's MigrationSQL). Default false: Open applies what is missing.
	SkipMigrations bool

	// Policy is the retry policy of durable items, under each registration's WithPolicy; its
	// classification, over each request's in-process policy, decides what is deferred and
	// retried. Zero fields mean durable defaults, since nobody waits: 10 attempts (see
	// record.Item.Counted), Exponential from 1 s doubling to 1 h (eight and a half minutes, enough
	// to outlast a restart downstream), Jitter On (items that failed together do not return
	// together), and timeouts, transport errors and open circuits retried (durable work is
	// for the dependency that is down).
	Policy retry.Policy
	Clock  behaviors.Clock // of due times and leases; default behaviors.SystemClock
	Rand   func() float64  // [0, 1) for jitter, called concurrently; default math/rand/v2
	// Recheck is how long an item the scheduler could not start waits to be looked at again
	// when nothing else says when: an unknown name or a missing handler (an instance on
	// another version may know it), or a breaker whose probes are out, whose verdict frees or
	// moves the item at once and Recheck only bounds the wait should that word not reach this
	// instance. An item parked on an open breaker waits until the breaker may probe instead.
	// Default 1 minute: a rolling deploy's new instances are up well within it.
	Recheck time.Duration

	// OnDead are called, in order, once for each new dead letter (an item that became dead,
	// a failed item of RunBatch), after it is stored, outside any transaction, on the goroutine
	// that stored it: keep them quick. A panic in one is logged and the next still runs. A
	// process that dies after the commit never calls them: alert on Stats.DeadLetters.
	// Default empty: the warning logged for each letter is the only notice.
	OnDead []func(ctx context.Context, d record.DeadLetter)
	// Logger gets dead letters, OnDead panics, failed propagators and migrations. Default
	// zap.L() as of Open: silent until the application calls zap.ReplaceGlobals.
	Logger *zap.Logger
	// ReplayLease is how long a replay holds its letter, extended while it runs. Default 1
	// minute: an operator retrying after a crash waits little, and a hiccup does not let a
	// second replay in beside a running one.
	ReplayLease time.Duration
	// Propagators carry values of the enqueuing caller's context (trace context, tenant) to
	// the dispatch as the item's metadata; one that panics is skipped and logged. Default none.
	Propagators []Propagator
	// MaxPayloadBytes is the longest encoded request stored (ErrPayloadTooLarge, before any
	// database call). Default 4 MiB: far above ordinary requests, while a payload is copied on
	// its way and a connection keeps a buffer of the largest value it carried. Keep large
	// documents in a blob store. At most MaxPayloadLimit.
	MaxPayloadBytes int
}

// Open returns a Queue over driver's database, migrating it unless SkipMigrations.
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
	for i, p := range q.propagators {
		if dp, ok := p.(dispatching); ok {
			q.dispatchers = append(q.dispatchers, dispatcher{index: i, p: dp})
		}
	}
	if q.clock == nil {
		q.clock = behaviors.SystemClock
	}
	if q.rand == nil {
		q.rand = rand.Float64
	}
	q.deadLetterConfig(cfg)
	q.sender = newSenderName()
	q.notifyHealth = dbhealth.Health{Log: q.log}
	if q.store.Notifies() {
		q.notifier = notify.NewNotifier(q.store, q.sender, &q.notifyHealth)
	}
	return q, nil
}

// Validate reports each problem of cfg, naming its field. Open calls it.
func (cfg Config) Validate() error {
	var errs []error
	// Over the durable defaults: a BaseDelay beyond the default MaxDelay is a mistake too.
	if err := defaultPolicy.Merge(cfg.Policy).Validate(); err != nil {
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
